"""MPI-parallel models: the MPI mixin and the MPI actor-critic base (PPO1, TRPO, GAIL)."""
