"""sb3-contrib's path of stable-baselines3's off-policy base: it lives in ``sbtf.sb3.common.off_policy_algorithm``
(sb3-contrib builds on SB3, and sbtf.contrib on sbtf.sb3)."""
from sbtf.sb3.common.off_policy_algorithm import (TRAIN_FREQ_UNITS, ActorCriticOffPolicyAlgorithm,
                                                  ContribOffPolicyAlgorithm, EntropyRegularisedAlgorithm,
                                                  TrainFreqField, contrib_save_schema, parse_train_freq)

__all__ = ["ContribOffPolicyAlgorithm", "ActorCriticOffPolicyAlgorithm", "EntropyRegularisedAlgorithm",
           "TrainFreqField", "parse_train_freq", "contrib_save_schema", "TRAIN_FREQ_UNITS"]
