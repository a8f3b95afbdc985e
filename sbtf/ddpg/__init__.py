"""DDPG (stable-baselines 2.x ``stable_baselines.ddpg``), with the noise classes SB2 exported from here."""
from sbtf.common.noise import AdaptiveParamNoiseSpec, NormalActionNoise, OrnsteinUhlenbeckActionNoise
from sbtf.ddpg.ddpg import DDPG
from sbtf.ddpg.policies import CnnPolicy, LnCnnPolicy, LnMlpPolicy, MlpPolicy

__all__ = ["DDPG", "MlpPolicy", "CnnPolicy", "LnMlpPolicy", "LnCnnPolicy", "AdaptiveParamNoiseSpec",
           "NormalActionNoise", "OrnsteinUhlenbeckActionNoise"]
