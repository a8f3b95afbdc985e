"""HER (stable-baselines 2.x ``stable_baselines.her``) and stable-baselines3's ``HerReplayBuffer``."""
from sbtf.her.her import HER, UnsupportedHEREnvError
from sbtf.her.her_replay_buffer import HerReplayBuffer
from sbtf.her.replay_buffer import GoalSelectionStrategy, HindsightExperienceReplayWrapper, KEY_TO_GOAL_STRATEGY
from sbtf.her.utils import KEY_ORDER, HERGoalEnvWrapper

__all__ = ["HER", "UnsupportedHEREnvError", "HerReplayBuffer", "GoalSelectionStrategy",
           "HindsightExperienceReplayWrapper", "KEY_TO_GOAL_STRATEGY", "KEY_ORDER", "HERGoalEnvWrapper"]
