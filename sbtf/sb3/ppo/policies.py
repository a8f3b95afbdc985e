"""The policy names of PPO (``stable_baselines3.ppo.policies``): SB3's actor-critic policies."""
from sbtf.sb3.common.policies import ActorCriticCnnPolicy, ActorCriticPolicy, MultiInputActorCriticPolicy

MlpPolicy = ActorCriticPolicy
CnnPolicy = ActorCriticCnnPolicy
MultiInputPolicy = MultiInputActorCriticPolicy

__all__ = ["MlpPolicy", "CnnPolicy", "MultiInputPolicy"]
