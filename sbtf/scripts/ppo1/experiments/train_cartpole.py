"""PPO1 on CartPole-v1 for 1000 steps: stable-baselines 2's ``ppo1/experiments/train_cartpole.py`` on sbtf, a quick
check that PPO1 (and MPI) runs::

    mpirun -np 2 python -m sbtf.scripts.ppo1.experiments.train_cartpole
"""
from __future__ import annotations

from sbtf.ppo1 import PPO1


def main() -> None:
    """Train PPO1 (linear schedule) on CartPole-v1 for 1000 timesteps; under mpirun every rank takes part."""
    model = PPO1("MlpPolicy", "CartPole-v1", schedule="linear", verbose=0)
    model.learn(total_timesteps=1000)


if __name__ == "__main__":
    main()
