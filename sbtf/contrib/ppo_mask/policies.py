"""The policy names of ``MaskablePPO`` (sb3-contrib ``ppo_mask/policies.py``)."""
from sbtf.contrib.common.maskable.policies import (MaskableActorCriticCnnPolicy, MaskableActorCriticPolicy,
                                                   MaskableMultiInputActorCriticPolicy)

MlpPolicy = MaskableActorCriticPolicy
CnnPolicy = MaskableActorCriticCnnPolicy
MultiInputPolicy = MaskableMultiInputActorCriticPolicy

__all__ = ["MlpPolicy", "CnnPolicy", "MultiInputPolicy"]
