"""PPO1: Proximal Policy Optimization, MPI version (stable-baselines 2.x ``stable_baselines.ppo1``)."""
from sbtf.ppo1.pposgd_simple import PPO1

__all__ = ["PPO1"]
