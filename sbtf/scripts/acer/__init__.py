"""stable-baselines 2's scripts of ``acer``, on sbtf (see :mod:`sbtf.scripts`)."""
