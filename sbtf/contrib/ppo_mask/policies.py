"""The policy names of ``MaskablePPO`` (sb3-contrib ``ppo_mask/policies.py``)."""
from sbtf.contrib.common.maskable.policies import MaskableActorCriticCnnPolicy, MaskableActorCriticPolicy

MlpPolicy = MaskableActorCriticPolicy
CnnPolicy = MaskableActorCriticCnnPolicy

__all__ = ["MlpPolicy", "CnnPolicy"]
