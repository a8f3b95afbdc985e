"""Recurrent PPO (sb3-contrib ``sb3_contrib.ppo_recurrent``): ``RecurrentPPO`` and its ``MlpLstmPolicy``,
``CnnLstmPolicy``, ``MultiInputLstmPolicy``."""
from sbtf.contrib.ppo_recurrent.policies import (CnnLstmPolicy, MlpLstmPolicy, MultiInputLstmPolicy,
                                                 RecurrentActorCriticPolicy)
from sbtf.contrib.ppo_recurrent.ppo_recurrent import RecurrentPPO

__all__ = ["RecurrentPPO", "RecurrentActorCriticPolicy", "MlpLstmPolicy", "CnnLstmPolicy", "MultiInputLstmPolicy"]
