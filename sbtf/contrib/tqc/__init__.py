"""TQC (sb3-contrib ``sb3_contrib.tqc``): ``TQC`` and its ``MlpPolicy`` / ``CnnPolicy``."""
from sbtf.contrib.tqc.policies import CnnPolicy, MlpPolicy, TQCPolicy
from sbtf.contrib.tqc.tqc import TQC

__all__ = ["TQC", "TQCPolicy", "MlpPolicy", "CnnPolicy"]
