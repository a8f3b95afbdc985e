"""stable-baselines 2's scripts of ``deepq``, on sbtf (see :mod:`sbtf.scripts`)."""
