"""stable-baselines3's ``common.env_util``: making VecEnvs (``make_vec_env``, ``make_atari_env``, which live in
:mod:`sbtf.common.cmd_util`, stable-baselines 2's place) and looking through an env's wrappers."""
from __future__ import annotations

from sbtf.common.cmd_util import make_atari_env, make_vec_env
from sbtf.common.vec_env.util import is_wrapped, unwrap_wrapper

__all__ = ["make_vec_env", "make_atari_env", "is_wrapped", "unwrap_wrapper"]
