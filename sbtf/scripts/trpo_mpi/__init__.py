"""stable-baselines 2's scripts of ``trpo_mpi``, on sbtf (see :mod:`sbtf.scripts`)."""
