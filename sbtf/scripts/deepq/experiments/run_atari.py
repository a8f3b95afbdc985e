"""DQN on an Atari game: stable-baselines 2's ``deepq/experiments/run_atari.py`` on sbtf (same flags)::

    python -m sbtf.scripts.deepq.experiments.run_atari --env BreakoutNoFrameskip-v4 --prioritized 1 --dueling 1

Atari envs need ale-py (``pip install "sbtf[atari]"``).
"""
from __future__ import annotations

import argparse
from typing import List, Optional

from sbtf import logger
from sbtf.bench import Monitor
from sbtf.common import atari_wrappers
from sbtf.deepq import DQN, CnnPolicy, wrap_atari_dqn


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """The flags: ``--env``, ``--seed``, ``--prioritized``, ``--dueling``, ``--prioritized-replay-alpha``,
    ``--num-timesteps``."""
    parser = argparse.ArgumentParser(formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--env", help="environment ID", default="BreakoutNoFrameskip-v4")
    parser.add_argument("--seed", help="RNG seed", type=int, default=0)
    parser.add_argument("--prioritized", type=int, default=1)
    parser.add_argument("--dueling", type=int, default=1)
    parser.add_argument("--prioritized-replay-alpha", type=float, default=0.6)
    parser.add_argument("--num-timesteps", type=int, default=int(10e6))
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> None:
    """Train DQN (CNN policy, dueling and prioritized replay by default) on the Atari game of ``--env``."""
    args = parse_args(argv)
    logger.configure()
    env = atari_wrappers.make_atari(args.env)
    env = Monitor(env, logger.get_dir())
    env = wrap_atari_dqn(env)
    env.reset(seed=args.seed)
    model = DQN(env=env, policy=CnnPolicy, policy_kwargs=dict(dueling=args.dueling == 1), learning_rate=1e-4,
                buffer_size=10000, exploration_fraction=0.1, exploration_final_eps=0.01, train_freq=4,
                learning_starts=10000, target_network_update_freq=1000, gamma=0.99,
                prioritized_replay=bool(args.prioritized), prioritized_replay_alpha=args.prioritized_replay_alpha,
                seed=args.seed)
    model.learn(total_timesteps=args.num_timesteps)
    env.close()


if __name__ == "__main__":
    main()
