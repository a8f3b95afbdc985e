"""sb3-contrib's ``common.wrappers``: ``ActionMasker`` (defined in :mod:`sbtf.contrib.common.maskable.wrappers`) and
``TimeFeatureWrapper`` (defined in :mod:`sbtf.common.wrappers`, where rl-baselines-zoo's agents find it)."""
from sbtf.contrib.common.wrappers.action_masker import ActionMasker
from sbtf.contrib.common.wrappers.time_feature import TimeFeatureWrapper

__all__ = ["ActionMasker", "TimeFeatureWrapper"]
