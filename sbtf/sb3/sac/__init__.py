"""stable-baselines3's SAC (``stable_baselines3.sac``): ``SAC`` and its ``MlpPolicy``, ``CnnPolicy``,
``MultiInputPolicy``."""
from sbtf.sb3.sac.policies import CnnPolicy, MlpPolicy, MultiInputPolicy, SACPolicy
from sbtf.sb3.sac.sac import SAC

__all__ = ["SAC", "SACPolicy", "MlpPolicy", "CnnPolicy", "MultiInputPolicy"]
