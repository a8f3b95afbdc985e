"""stable-baselines3's DDPG (``stable_baselines3.ddpg``): ``DDPG`` and TD3's ``MlpPolicy``, ``CnnPolicy``,
``MultiInputPolicy`` (as sb3's ``ddpg.policies``)."""
from sbtf.sb3.ddpg.ddpg import DDPG
from sbtf.sb3.td3.policies import CnnPolicy, MlpPolicy, MultiInputPolicy

__all__ = ["DDPG", "MlpPolicy", "CnnPolicy", "MultiInputPolicy"]
