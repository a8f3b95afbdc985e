"""The policy names of A2C (``stable_baselines3.a2c.policies``): SB3's actor-critic policies."""
from sbtf.sb3.common.policies import ActorCriticCnnPolicy, ActorCriticPolicy, MultiInputActorCriticPolicy

MlpPolicy = ActorCriticPolicy
CnnPolicy = ActorCriticCnnPolicy
MultiInputPolicy = MultiInputActorCriticPolicy

__all__ = ["MlpPolicy", "CnnPolicy", "MultiInputPolicy"]
