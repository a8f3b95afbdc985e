"""ACKTR, actor-critic with K-FAC natural-gradient steps, and its optimizer (SB2's ``stable_baselines.acktr``)."""
from sbtf.acktr.acktr import ACKTR
from sbtf.acktr.kfac import KfacOptimizer

__all__ = ["ACKTR", "KfacOptimizer"]
