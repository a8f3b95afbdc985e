"""ACER, actor-critic with experience replay (``from sbtf.acer import ACER``, SB2's ``stable_baselines.acer``)."""
from sbtf.acer.acer_simple import ACER

__all__ = ["ACER"]
