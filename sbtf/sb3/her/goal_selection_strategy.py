"""stable-baselines3's ``her.goal_selection_strategy`` module path."""
from sbtf.her.replay_buffer import GoalSelectionStrategy

__all__ = ["GoalSelectionStrategy"]
