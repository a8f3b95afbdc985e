"""SAC (stable-baselines 2.x ``stable_baselines.sac``)."""
from sbtf.sac.policies import CnnPolicy, LnCnnPolicy, LnMlpPolicy, MlpPolicy
from sbtf.sac.sac import SAC

__all__ = ["SAC", "MlpPolicy", "CnnPolicy", "LnMlpPolicy", "LnCnnPolicy"]
