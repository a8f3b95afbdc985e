"""Augmented Random Search (sb3-contrib's ``sb3_contrib.ars``)."""
from sbtf.contrib.ars.ars import ARS
from sbtf.contrib.ars.policies import ARSLinearPolicy, ARSPolicy, LinearPolicy, MlpPolicy

__all__ = ["ARS", "ARSPolicy", "ARSLinearPolicy", "LinearPolicy", "MlpPolicy"]
