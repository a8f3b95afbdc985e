"""stable-baselines 2's scripts of ``ddpg``, on sbtf (see :mod:`sbtf.scripts`)."""
