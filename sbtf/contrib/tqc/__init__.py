"""TQC (sb3-contrib ``sb3_contrib.tqc``): ``TQC`` and its ``MlpPolicy``, ``CnnPolicy``, ``MultiInputPolicy``."""
from sbtf.contrib.tqc.policies import CnnPolicy, MlpPolicy, MultiInputPolicy, TQCPolicy
from sbtf.contrib.tqc.tqc import TQC

__all__ = ["TQC", "TQCPolicy", "MlpPolicy", "CnnPolicy", "MultiInputPolicy"]
