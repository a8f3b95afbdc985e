"""Re-exports of the off-policy core (kept so that ``from sbtf.common.off_policy import X`` works), and the SAC/TD3
actor/critic networks.

Where things live:

* ``sbtf.common.off_policy_algorithm``: ``OffPolicyAlgorithm``, the one learn loop of DQN, SAC, TD3 and DDPG;
* ``sbtf.common.off_policy_actor_critic``: ``ActorCriticOffPolicyAlgorithm`` (what SAC and TD3 share);
* ``sbtf.common.off_policy_train``: ``TrainStepCache`` (the K-gradient-step ``TrainStep`` per variant) and the
  former ``TrainFunctionCache``;
* ``sbtf.common.off_policy_ops``: in-graph helpers (target updates, Huber loss, stateless seeds);
* ``sbtf.common.optimizers.Adam``: TF1's Adam with the fused ``ResourceApplyAdam`` kernel (``FusedAdam`` here is
  that class, under its former name).
"""
from __future__ import annotations

from typing import Any, Sequence, Tuple

import numpy as np
import tensorflow as tf

from sbtf.common.fast_call import FastFunction, FlatLayout, to_tensor  # noqa: F401 (re-exported)
from sbtf.common.off_policy_actor_critic import ActorCriticOffPolicyAlgorithm  # noqa: F401 (re-exported)
from sbtf.common.off_policy_algorithm import OffPolicyAlgorithm, learn_doc  # noqa: F401 (re-exported)
from sbtf.common.off_policy_ops import (copy_variables, huber_loss, polyak_update,  # noqa: F401 (re-exported)
                                        stateless_seed)
from sbtf.common.off_policy_train import TrainFunctionCache  # noqa: F401 (re-exported)
from sbtf.common.optimizers import Adam as FusedAdam  # noqa: F401 (re-exported under its former name)


__all__ = ["OffPolicyAlgorithm", "ActorCriticOffPolicyAlgorithm", "learn_doc", "FusedAdam", "TrainFunctionCache", "FastFunction", "FlatLayout", "to_tensor", "polyak_update", "copy_variables", "huber_loss",
           "stateless_seed"]


# ---------------------------------------------------------------------------------------------------------------
# feed-forward actor / critics with SB2 names (shared by the SAC and TD3 policies)
# ---------------------------------------------------------------------------------------------------------------
from sbtf.common.off_policy_networks import ActorCriticNetworks  # noqa: E402,F401 (moved; re-exported)
