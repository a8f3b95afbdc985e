"""A2C, stable-baselines 2's synchronous advantage actor-critic
(``from sbtf.a2c import A2C``, SB2's ``stable_baselines.a2c``)."""
from sbtf.a2c.a2c import A2C

__all__ = ["A2C"]
