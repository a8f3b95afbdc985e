"""TD3 (stable-baselines 2.x ``stable_baselines.td3``)."""
from sbtf.common.noise import NormalActionNoise, OrnsteinUhlenbeckActionNoise
from sbtf.td3.policies import CnnPolicy, LnCnnPolicy, LnMlpPolicy, MlpPolicy
from sbtf.td3.td3 import TD3

__all__ = ["TD3", "MlpPolicy", "CnnPolicy", "LnMlpPolicy", "LnCnnPolicy", "NormalActionNoise",
           "OrnsteinUhlenbeckActionNoise"]
