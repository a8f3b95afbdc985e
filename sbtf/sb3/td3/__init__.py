"""stable-baselines3's TD3 (``stable_baselines3.td3``): ``TD3`` and its ``MlpPolicy``, ``CnnPolicy``,
``MultiInputPolicy``."""
from sbtf.sb3.td3.policies import CnnPolicy, MlpPolicy, MultiInputPolicy, TD3Policy
from sbtf.sb3.td3.td3 import TD3

__all__ = ["TD3", "TD3Policy", "MlpPolicy", "CnnPolicy", "MultiInputPolicy"]
