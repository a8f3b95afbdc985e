"""Helpers to create (vectorized, monitored) environments and the argument parsers of the example scripts."""
from __future__ import annotations

import argparse
import os
import warnings
from typing import Any, Callable, Dict, List, Optional, Type, Union

import gymnasium
from gymnasium.envs.registration import load_env_creator
from gymnasium.wrappers import FilterObservation, FlattenObservation

from sbtf import logger
from sbtf.common.atari_wrappers import make_atari, wrap_deepmind
from sbtf.common.envs.gym_compat import resolve_env_id, wrap_env
from sbtf.common.misc_util import mpi_rank_or_zero, set_global_seeds
from sbtf.common.monitor import Monitor
from sbtf.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv


def _log_dir() -> Optional[str]:
    """The current sbtf logger folder (None when the logger is not configured)."""
    return logger.get_dir()


def supported_render_modes(env_id: str) -> List[str]:
    """
    The render modes a registered env lists in its ``metadata["render_modes"]`` (empty when unknown).

    :param env_id: (str) a gymnasium env id (retired ids are resolved as ``gymnasium.make`` is called by sbtf)
    :return: (list of str)
    """
    try:
        with warnings.catch_warnings():  # a retired id is reported once, by the make call itself
            warnings.simplefilter("ignore")
            spec = gymnasium.spec(resolve_env_id(env_id))
        creator = spec.entry_point if callable(spec.entry_point) else load_env_creator(spec.entry_point)
    except Exception:  # noqa: BLE001 - unknown id or broken entry point: gymnasium.make reports it properly
        return []
    metadata = getattr(creator, "metadata", None) or {}
    return list(metadata.get("render_modes", []))


def render_mode_kwargs(env_id: Any, env_kwargs: Optional[Dict[str, Any]] = None,
                       render_mode: Optional[str] = "rgb_array") -> Dict[str, Any]:
    """
    ``{"render_mode": render_mode}`` when ``env_id`` is an env id whose env supports that mode and ``env_kwargs`` does
    not choose one; ``{}`` otherwise. With the default 'rgb_array', ``vec_env.render(mode='rgb_array')`` returns
    frames as it did in stable-baselines (gymnasium envs only render in the mode they were made with).

    :param env_id: (str or callable) what is being made
    :param env_kwargs: (dict) the user's keyword arguments for the env
    :param render_mode: (str) the wanted render mode (None: none)
    :return: (dict) keyword arguments to add for ``gymnasium.make``
    """
    if render_mode is None or not isinstance(env_id, str) or "render_mode" in (env_kwargs or {}):
        return {}
    return {"render_mode": render_mode} if render_mode in supported_render_modes(env_id) else {}


def make_vec_env(env_id: Union[str, Callable[..., Any]], n_envs: int = 1, seed: Optional[int] = None,
                 start_index: int = 0, monitor_dir: Optional[str] = None,
                 wrapper_class: Optional[Callable[[gymnasium.Env], gymnasium.Env]] = None,
                 env_kwargs: Optional[Dict[str, Any]] = None, vec_env_cls: Optional[Type[VecEnv]] = None,
                 vec_env_kwargs: Optional[Dict[str, Any]] = None,
                 render_mode: Optional[str] = "rgb_array") -> VecEnv:
    """
    Create ``n_envs`` envs, each wrapped in a ``Monitor``, in a VecEnv (a ``DummyVecEnv`` unless told otherwise,
    which is usually the fastest).

    :param env_id: (str or Type[gym.Env]) an env id, or an env class / any callable returning an env (gymnasium or
        old-gym API)
    :param n_envs: (int) how many envs
    :param seed: (int) base seed: env ``rank`` gets ``seed + rank`` at the first ``reset()`` (rank = start_index + i)
    :param start_index: (int) rank of the first env
    :param monitor_dir: (str) folder for the monitor files (``<rank>.monitor.csv``); None writes no file (the
        Monitor still reports episodes in the infos)
    :param wrapper_class: (gym.Wrapper or callable) applied to each env after the Monitor (a wrapper class or any
        function of the env)
    :param env_kwargs: (dict) keyword arguments for the env class (or for ``gymnasium.make`` with an env id)
    :param vec_env_cls: (Type[VecEnv]) the VecEnv class (DummyVecEnv by default; ``EnvPoolVecEnv`` builds
        EnvPool's C++ envs from ``env_id`` instead of calling Python envs, and takes no ``wrapper_class``)
    :param vec_env_kwargs: (dict) keyword arguments for the VecEnv class
    :param render_mode: (str) render mode of envs made from an env id, used when the env lists it in its
        ``metadata["render_modes"]`` and ``env_kwargs`` gives none. The default 'rgb_array' makes
        ``env.render(mode='rgb_array')`` (stable-baselines' GIF recipe) and ``VecVideoRecorder`` work; it costs
        nothing until a frame is asked for. None: gymnasium's default (no rendering)
    :return: (VecEnv) the vectorized environment
    """
    vec_env_kwargs = {} if vec_env_kwargs is None else vec_env_kwargs
    if vec_env_cls is not None and hasattr(vec_env_cls, "from_make_vec_env"):
        # VecEnvs that build their envs themselves from an id (EnvPoolVecEnv: C++ envs, no Python env per rank)
        return vec_env_cls.from_make_vec_env(env_id, n_envs=n_envs, seed=seed, start_index=start_index,
                                             monitor_dir=monitor_dir, wrapper_class=wrapper_class,
                                             env_kwargs=env_kwargs, **vec_env_kwargs)
    env_kwargs = {} if env_kwargs is None else env_kwargs
    env_kwargs = {**render_mode_kwargs(env_id, env_kwargs, render_mode), **env_kwargs}

    def make_env(rank: int) -> Callable[[], gymnasium.Env]:
        def _init() -> gymnasium.Env:
            if isinstance(env_id, str):
                env = wrap_env(env_id, **env_kwargs)
            else:
                env = wrap_env(env_id(**env_kwargs))
            # Monitor: episode rewards / lengths in info["episode"] (and a monitor.csv file in monitor_dir)
            monitor_path = os.path.join(monitor_dir, str(rank)) if monitor_dir is not None else None
            if monitor_path is not None:
                os.makedirs(monitor_dir, exist_ok=True)
            env = Monitor(env, filename=monitor_path)
            if wrapper_class is not None:
                env = wrapper_class(env)
            return env
        return _init

    if vec_env_cls is None:
        vec_env_cls = DummyVecEnv

    vec_env = vec_env_cls([make_env(i + start_index) for i in range(n_envs)], **vec_env_kwargs)
    if seed is not None:
        # gymnasium envs take their seed at reset: env i gets seed + start_index + i at the first reset().
        vec_env.seed(seed + start_index)
    return vec_env


def make_atari_env(env_id: str, num_env: int, seed: int, wrapper_kwargs: Optional[Dict[str, Any]] = None,
                   start_index: int = 0, allow_early_resets: bool = True, start_method: Optional[str] = None,
                   use_subprocess: bool = False, monitor_dir: Optional[str] = None) -> VecEnv:
    """
    Create a VecEnv of DeepMind-style Atari envs (``make_atari`` + ``Monitor`` + ``wrap_deepmind``). Monitor files
    go to the sbtf logger's folder when it is configured.

    :param env_id: (str) a ``NoFrameskip`` env id
    :param num_env: (int) how many envs
    :param seed: (int) base seed (env ``rank`` gets ``seed + rank`` at the first reset; also ``set_global_seeds``)
    :param wrapper_kwargs: (dict) keyword arguments of ``wrap_deepmind``
    :param start_index: (int) rank of the first env
    :param allow_early_resets: (bool) let the Monitor accept resets before the end of an episode
    :param start_method: (str) start method of ``SubprocVecEnv``
    :param use_subprocess: (bool) use a ``SubprocVecEnv`` (when num_env > 1) instead of the usually faster
        ``DummyVecEnv``
    :param monitor_dir: (str) folder of the Monitor files ``<rank>.monitor.csv`` (stable-baselines3's argument;
        default: the sbtf logger's folder, or no files when it is not configured)
    :return: (VecEnv) the Atari VecEnv
    """
    if wrapper_kwargs is None:
        wrapper_kwargs = {}
    log_dir = monitor_dir if monitor_dir is not None else _log_dir()

    def make_env(rank: int) -> Callable[[], gymnasium.Env]:
        def _thunk() -> gymnasium.Env:
            env = make_atari(env_id)
            env = Monitor(env, log_dir and os.path.join(log_dir, str(rank)), allow_early_resets=allow_early_resets)
            return wrap_deepmind(env, **wrapper_kwargs)
        return _thunk

    set_global_seeds(seed)

    if num_env == 1 or not use_subprocess:
        vec_env: VecEnv = DummyVecEnv([make_env(i + start_index) for i in range(num_env)])
    else:
        vec_env = SubprocVecEnv([make_env(i + start_index) for i in range(num_env)], start_method=start_method)
    vec_env.seed(seed + start_index)
    return vec_env


def _seed_single_env(env: gymnasium.Env, seed: int) -> None:
    """Seed a gymnasium env now (its first reset with the seed), the way ``env.seed(seed)`` did with old gym."""
    env.reset(seed=seed)
    env.action_space.seed(seed)


def make_mujoco_env(env_id: str, seed: int, allow_early_resets: bool = True) -> gymnasium.Env:
    """
    Create a wrapped, monitored gym.Env for MuJoCo.

    :param env_id: (str) the environment ID
    :param seed: (int) the initial seed for RNG (offset by 10000 times the MPI rank)
    :param allow_early_resets: (bool) allows early reset of the environment
    :return: (gymnasium.Env) The mujoco environment (already reset once with its seed)
    """
    set_global_seeds(seed + 10000 * mpi_rank_or_zero())
    env = wrap_env(env_id)
    log_dir = _log_dir()
    env = Monitor(env, log_dir and os.path.join(log_dir, '0'), allow_early_resets=allow_early_resets)
    _seed_single_env(env, seed)
    return env


def make_robotics_env(env_id: str, seed: int, rank: int = 0, allow_early_resets: bool = True) -> gymnasium.Env:
    """
    Create a wrapped, monitored gym.Env for MuJoCo (goal-based robotics envs: the 'observation' and 'desired_goal'
    entries of the Dict observation are flattened into one Box).

    :param env_id: (str) the environment ID
    :param seed: (int) the initial seed for RNG
    :param rank: (int) the rank of the environment (for logging)
    :param allow_early_resets: (bool) allows early reset of the environment
    :return: (gymnasium.Env) The robotic environment (already reset once with its seed)
    """

    set_global_seeds(seed)
    env = wrap_env(env_id)
    env = FlattenObservation(FilterObservation(env, ['observation', 'desired_goal']))
    log_dir = _log_dir()
    env = Monitor(env, log_dir and os.path.join(log_dir, str(rank)), info_keywords=('is_success',),
                  allow_early_resets=allow_early_resets)
    _seed_single_env(env, seed)
    return env


def arg_parser() -> argparse.ArgumentParser:
    """
    Create an empty argparse.ArgumentParser.

    :return: (ArgumentParser)
    """
    return argparse.ArgumentParser(formatter_class=argparse.ArgumentDefaultsHelpFormatter)


def atari_arg_parser() -> argparse.ArgumentParser:
    """
    Create an argparse.ArgumentParser for run_atari.py.

    :return: (ArgumentParser) parser {'--env': 'BreakoutNoFrameskip-v4', '--seed': 0, '--num-timesteps': int(1e7)}
    """
    parser = arg_parser()
    parser.add_argument('--env', help='environment ID', default='BreakoutNoFrameskip-v4')
    parser.add_argument('--seed', help='RNG seed', type=int, default=0)
    parser.add_argument('--num-timesteps', type=int, default=int(10e6))
    return parser


def mujoco_arg_parser() -> argparse.ArgumentParser:
    """
    Create an argparse.ArgumentParser for run_mujoco.py.

    :return:  (ArgumentParser) parser {'--env': 'Reacher-v2', '--seed': 0, '--num-timesteps': int(1e6), '--play':
        False}
    """
    parser = arg_parser()
    parser.add_argument('--env', help='environment ID', type=str, default='Reacher-v2')
    parser.add_argument('--seed', help='RNG seed', type=int, default=0)
    parser.add_argument('--num-timesteps', type=int, default=int(1e6))
    parser.add_argument('--play', default=False, action='store_true')
    return parser


def robotics_arg_parser() -> argparse.ArgumentParser:
    """
    Create an argparse.ArgumentParser for run_mujoco.py.

    :return: (ArgumentParser) parser {'--env': 'FetchReach-v0', '--seed': 0, '--num-timesteps': int(1e6)}
    """
    parser = arg_parser()
    parser.add_argument('--env', help='environment ID', type=str, default='FetchReach-v0')
    parser.add_argument('--seed', help='RNG seed', type=int, default=None)
    parser.add_argument('--num-timesteps', type=int, default=int(1e6))
    return parser
