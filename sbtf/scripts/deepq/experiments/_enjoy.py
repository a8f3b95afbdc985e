"""Playing a DQN model saved by the ``train_*`` experiments (what the ``enjoy_*`` scripts share)."""
from __future__ import annotations

import argparse
from typing import List, Optional

import gymnasium

from sbtf.deepq import DQN


def play(env_id: str, model_path: str, args: argparse.Namespace) -> None:
    """
    Play episodes forever, printing each episode's reward; with ``args.no_render``, play one episode without a
    window (what the automatic tests do).

    :param env_id: (str) the env id
    :param model_path: (str) the saved model
    :param args: (argparse.Namespace) ``no_render``
    """
    env = gymnasium.make(env_id, render_mode=None if args.no_render else "human")
    model = DQN.load(model_path, env)
    try:
        while True:
            obs, _ = env.reset()
            done, episode_rew = False, 0.0
            while not done:
                action, _ = model.predict(obs)
                obs, reward, terminated, truncated, _ = env.step(action)
                done = terminated or truncated
                episode_rew += float(reward)
            print("Episode reward", episode_rew)
            if args.no_render:
                break
    finally:
        env.close()


def parse_args(description: str, argv: Optional[List[str]] = None) -> argparse.Namespace:
    """The flags: ``--no-render`` (play one episode without a window)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--no-render", default=False, action="store_true", help="Disable rendering")
    return parser.parse_args(argv)
