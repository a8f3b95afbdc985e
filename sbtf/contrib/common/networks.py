"""sb3-contrib's path of stable-baselines3's network pieces: they live in ``sbtf.sb3.common.networks`` (sb3-contrib
builds on SB3, and sbtf.contrib on sbtf.sb3)."""
from sbtf.sb3.common.networks import (FEATURE_EXTRACTORS, FeaturesExtractor, Mlp, ScopedVariables, TorchLinear,
                                      actor_critic_arch, is_image_space, new_extractor_layer, resolve_extractor_class)

__all__ = ["FEATURE_EXTRACTORS", "TorchLinear", "Mlp", "FeaturesExtractor", "ScopedVariables", "is_image_space",
           "resolve_extractor_class", "new_extractor_layer", "actor_critic_arch"]
