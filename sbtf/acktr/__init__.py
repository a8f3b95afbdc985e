from sbtf.acktr.acktr import ACKTR
from sbtf.acktr.kfac import KfacOptimizer

__all__ = ["ACKTR", "KfacOptimizer"]
