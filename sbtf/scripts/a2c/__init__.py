"""stable-baselines 2's scripts of ``a2c``, on sbtf (see :mod:`sbtf.scripts`)."""
