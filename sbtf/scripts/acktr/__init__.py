"""stable-baselines 2's scripts of ``acktr``, on sbtf (see :mod:`sbtf.scripts`)."""
