"""TRPO: Trust Region Policy Optimization, MPI version (stable-baselines 2.x ``stable_baselines.trpo_mpi``)."""
from sbtf.trpo_mpi.trpo_mpi import TRPO

__all__ = ["TRPO"]
