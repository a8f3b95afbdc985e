"""DDPG training: stable-baselines 2's ``ddpg/main.py`` on sbtf (same flags; one env per MPI rank).

::

    python -m sbtf.scripts.ddpg.main --env-id Pendulum-v1 --noise-type ou_0.2 --num-timesteps 10000
    mpirun -np 2 python -m sbtf.scripts.ddpg.main --env-id Pendulum-v1

Retired gym ids (``Pendulum-v0``) are played on their gymnasium successor.
"""
from __future__ import annotations

import argparse
import os
import time
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from sbtf import logger
from sbtf.bench import Monitor
from sbtf.common.envs.gym_compat import wrap_env
from sbtf.common.misc_util import boolean_flag, set_global_seeds
from sbtf.common.mpi_util import get_rank
from sbtf.common.noise import AdaptiveParamNoiseSpec, NormalActionNoise, OrnsteinUhlenbeckActionNoise
from sbtf.ddpg import DDPG
from sbtf.ddpg.policies import LnMlpPolicy, MlpPolicy


def parse_noise_types(noise_type: str, nb_actions: int) -> Tuple[Optional[Any], Optional[Any]]:
    """
    ``--noise-type``: comma-separated ``none``, ``adaptive-param_<std>``, ``normal_<std>``, ``ou_<std>``.

    :param noise_type: (str) the flag's value
    :param nb_actions: (int) the size of the action space
    :return: (ActionNoise or None, AdaptiveParamNoiseSpec or None) the action noise and the parameter noise
    """
    action_noise, param_noise = None, None
    for current in noise_type.split(","):
        current = current.strip()
        if current == "none":
            continue
        kind, _, stddev_text = current.partition("_")
        try:
            stddev = float(stddev_text)
        except ValueError:
            raise ValueError('unknown noise type "{}" (expected none, adaptive-param_<std>, normal_<std> or '
                             'ou_<std>)'.format(current)) from None
        if kind == "adaptive-param":
            param_noise = AdaptiveParamNoiseSpec(initial_stddev=stddev, desired_action_stddev=stddev)
        elif kind == "normal":
            action_noise = NormalActionNoise(mean=np.zeros(nb_actions), sigma=stddev * np.ones(nb_actions))
        elif kind == "ou":
            action_noise = OrnsteinUhlenbeckActionNoise(mean=np.zeros(nb_actions), sigma=stddev * np.ones(nb_actions))
        else:
            raise ValueError('unknown noise type "{}" (expected none, adaptive-param_<std>, normal_<std> or '
                             'ou_<std>)'.format(current))
    return action_noise, param_noise


def run(env_id: str, seed: int, noise_type: str, layer_norm: bool, evaluation: bool, **kwargs: Any) -> None:
    """
    Train DDPG on ``env_id``.

    :param env_id: (str) the environment id
    :param seed: (int) the seed (``seed + 1000000 * rank`` on each MPI rank)
    :param noise_type: (str) see :func:`parse_noise_types`
    :param layer_norm: (bool) use ``LnMlpPolicy`` (layer normalisation) instead of ``MlpPolicy``
    :param evaluation: (bool) evaluate on a separate env (rank 0), monitored in ``gym_eval``
    :param kwargs: ``num_timesteps`` and DDPG's arguments (``batch_size``, ``actor_lr``, ``nb_rollout_steps``, ...)
    """
    rank = get_rank()
    if rank != 0:
        logger.set_level(logger.DISABLED)
    log_dir = logger.get_dir()
    env = Monitor(wrap_env(env_id), log_dir and os.path.join(log_dir, str(rank)))
    eval_env = None
    if evaluation and rank == 0:
        eval_env = Monitor(wrap_env(env_id), log_dir and os.path.join(log_dir, "gym_eval"))
    action_noise, param_noise = parse_noise_types(noise_type, env.action_space.shape[-1])

    seed = seed + 1000000 * rank
    logger.info("rank {}: seed={}, logdir={}".format(rank, seed, logger.get_dir()))
    set_global_seeds(seed)
    env.reset(seed=seed)
    env.action_space.seed(seed)
    if eval_env is not None:
        eval_env.reset(seed=seed)
    start_time = time.time()
    num_timesteps = kwargs.pop("num_timesteps")
    model = DDPG(policy=LnMlpPolicy if layer_norm else MlpPolicy, env=env, eval_env=eval_env,
                 param_noise=param_noise, action_noise=action_noise, buffer_size=int(1e6), verbose=2, seed=seed,
                 **kwargs)
    model.learn(total_timesteps=num_timesteps)
    env.close()
    if eval_env is not None:
        eval_env.close()
    if rank == 0:
        logger.info("total runtime: {}s".format(time.time() - start_time))


def parse_args(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    """
    The flags of SB2's ``ddpg/main.py``.

    :param argv: ([str]) the arguments (default: ``sys.argv[1:]``)
    :return: (dict) the arguments of :func:`run`
    """
    parser = argparse.ArgumentParser(formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--env-id", type=str, default="HalfCheetah-v4")
    boolean_flag(parser, "render-eval", default=False)
    boolean_flag(parser, "layer-norm", default=True)
    boolean_flag(parser, "render", default=False)
    boolean_flag(parser, "normalize-returns", default=False)
    boolean_flag(parser, "normalize-observations", default=True)
    parser.add_argument("--seed", help="RNG seed", type=int, default=0)
    parser.add_argument("--critic-l2-reg", type=float, default=1e-2)
    parser.add_argument("--batch-size", type=int, default=64)  # per MPI worker
    parser.add_argument("--actor-lr", type=float, default=1e-4)
    parser.add_argument("--critic-lr", type=float, default=1e-3)
    boolean_flag(parser, "enable-popart", default=False)
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--reward-scale", type=float, default=1.)
    parser.add_argument("--clip-norm", type=float, default=None)
    parser.add_argument("--nb-train-steps", type=int, default=50)  # per epoch cycle and MPI worker
    parser.add_argument("--nb-eval-steps", type=int, default=100)  # per epoch cycle and MPI worker
    parser.add_argument("--nb-rollout-steps", type=int, default=100)  # per epoch cycle and MPI worker
    parser.add_argument("--noise-type", type=str, default="adaptive-param_0.2",
                        help="none, adaptive-param_<std>, normal_<std> or ou_<std> (comma-separated)")
    parser.add_argument("--num-timesteps", type=int, default=int(1e6))
    boolean_flag(parser, "evaluation", default=False)
    return vars(parser.parse_args(argv))


def main(argv: Optional[List[str]] = None) -> None:
    """Parse the flags, configure the logger on rank 0 and train."""
    args = parse_args(argv)
    if get_rank() == 0:
        logger.configure()
    run(**args)


if __name__ == "__main__":
    main()
