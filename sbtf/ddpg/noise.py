"""``stable_baselines.ddpg.noise`` of stable-baselines 2.x: the noise classes, which live in ``sbtf.common.noise``."""
from sbtf.common.noise import ActionNoise, AdaptiveParamNoiseSpec, NormalActionNoise, OrnsteinUhlenbeckActionNoise

__all__ = ["ActionNoise", "AdaptiveParamNoiseSpec", "NormalActionNoise", "OrnsteinUhlenbeckActionNoise"]
