"""sb3-contrib's ``sb3_contrib.common.vec_env``: :class:`AsyncEval` (ARS's candidates evaluated in worker processes)."""
from sbtf.contrib.common.vec_env.async_eval import AsyncEval

__all__ = ["AsyncEval"]
