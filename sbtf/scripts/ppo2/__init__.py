"""stable-baselines 2's scripts of ``ppo2``, on sbtf (see :mod:`sbtf.scripts`)."""
