"""Play the DQN model of ``train_mountaincar`` (``mountaincar_model.zip``) on MountainCar-v0: stable-baselines 2's
``deepq/experiments/enjoy_mountaincar.py`` on sbtf::

    python -m sbtf.scripts.deepq.experiments.enjoy_mountaincar [--no-render]
"""
from __future__ import annotations

import argparse

from sbtf.scripts.deepq.experiments import _enjoy
from sbtf.scripts.deepq.experiments.train_mountaincar import MODEL_PATH


def main(args: argparse.Namespace) -> None:
    """
    Play the trained model (rendered unless ``args.no_render``, which plays one episode).

    :param args: (argparse.Namespace) ``no_render``
    """
    _enjoy.play("MountainCar-v0", MODEL_PATH, args)


if __name__ == "__main__":
    main(_enjoy.parse_args("Enjoy trained DQN on MountainCar"))
