"""stable-baselines3's ``common.callbacks``: every callback of :mod:`sbtf.common.callbacks` plus SB3's
``LogEveryNTimesteps`` and ``StopTrainingOnMaxEpisodes``."""
from __future__ import annotations

from typing import Any, Dict

import numpy as np

from sbtf.common.callbacks import (BaseCallback, CallbackList, CheckpointCallback, ConvertCallback, EvalCallback,
                                   EventCallback, EveryNTimesteps, ProgressBarCallback,
                                   StopTrainingOnNoModelImprovement, StopTrainingOnRewardThreshold)

__all__ = ["BaseCallback", "EventCallback", "CallbackList", "ConvertCallback", "CheckpointCallback", "EvalCallback",
           "StopTrainingOnRewardThreshold", "StopTrainingOnNoModelImprovement", "EveryNTimesteps",
           "ProgressBarCallback", "LogEveryNTimesteps", "StopTrainingOnMaxEpisodes"]


class LogEveryNTimesteps(EveryNTimesteps):
    """
    Write the model's logger (``model.logger.dump``) every ``n_steps`` timesteps.

    :param n_steps: (int) number of timesteps between two writes
    """

    def __init__(self, n_steps: int) -> None:
        super().__init__(n_steps, callback=ConvertCallback(self._log_data))

    def _log_data(self, _locals: Dict[str, Any], _globals: Dict[str, Any]) -> bool:
        self.model.logger.dump(step=self.num_timesteps)
        return True


class StopTrainingOnMaxEpisodes(BaseCallback):
    """
    Stop training once ``max_episodes`` episodes were played per environment (``max_episodes * n_envs`` episodes
    in all, counted from the ``dones`` of each step).

    :param max_episodes: (int) episodes per environment before training stops
    :param verbose: (int) 1: say why training stopped
    """

    def __init__(self, max_episodes: int, verbose: int = 0) -> None:
        super().__init__(verbose=verbose)
        self.max_episodes = max_episodes
        self._total_max_episodes = max_episodes
        self.n_episodes = 0

    def _init_callback(self) -> None:
        self._total_max_episodes = self.max_episodes * self.training_env.num_envs

    def _on_step(self) -> bool:
        dones = self.locals.get("dones")
        if dones is None:
            raise KeyError("StopTrainingOnMaxEpisodes reads the step's `dones`, which this algorithm's loop does not "
                           "pass to its callbacks")
        self.n_episodes += int(np.sum(dones))
        keep_going = self.n_episodes < self._total_max_episodes
        if self.verbose >= 1 and not keep_going:
            print(f"Stopping training with a total of {self.num_timesteps} steps because the "
                  f"{self.model.__class__.__name__} "
                  f"model reached max_episodes={self.max_episodes}, by playing for {self.n_episodes} episodes")
        return keep_going
