"""stable-baselines 2's scripts of ``ppo1``, on sbtf (see :mod:`sbtf.scripts`)."""
