"""sb3-contrib's ``common.wrappers.time_feature`` module path (the class lives in :mod:`sbtf.common.wrappers`)."""
from sbtf.common.wrappers import TimeFeatureWrapper

__all__ = ["TimeFeatureWrapper"]
