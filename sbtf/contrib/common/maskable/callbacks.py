"""``MaskableEvalCallback`` (sb3-contrib ``common/maskable/callbacks.py``): ``EvalCallback`` with action masks."""
from __future__ import annotations

from typing import Any, Optional

from sbtf.common.callbacks import BaseCallback, EvalCallback
from sbtf.contrib.common.maskable.evaluation import MaskedPredictor
from sbtf.contrib.common.maskable.utils import is_masking_supported

__all__ = ["MaskableEvalCallback"]


class MaskableEvalCallback(EvalCallback):
    """
    Callback for evaluating an agent, with the evaluation env's action masks applied (see ``EvalCallback`` for the
    other parameters).

    :param warn: (bool) warn when the evaluation env is not wrapped in a ``Monitor``
    :param callback_after_eval: (BaseCallback) called after every evaluation (e.g. ``StopTrainingOnNoModelImprovement``)
    :param use_masking: (bool) apply the action masks during evaluation
    """

    def __init__(self, eval_env: Any, callback_on_new_best: Optional[BaseCallback] = None, n_eval_episodes: int = 5,
                 eval_freq: int = 10000, log_path: Optional[str] = None, best_model_save_path: Optional[str] = None,
                 deterministic: bool = True, render: bool = False, verbose: int = 1, warn: bool = True,
                 callback_after_eval: Optional[BaseCallback] = None, use_masking: bool = True):
        super().__init__(eval_env, callback_on_new_best=callback_on_new_best, n_eval_episodes=n_eval_episodes,
                         eval_freq=eval_freq, log_path=log_path, best_model_save_path=best_model_save_path,
                         deterministic=deterministic, render=render, verbose=verbose, warn=warn,
                         callback_after_eval=callback_after_eval)
        self.use_masking = use_masking
        if use_masking and not is_masking_supported(self.eval_env):
            raise ValueError("The evaluation environment does not support action masking. Consider using "
                             "ActionMasker wrapper")

    def _on_step(self) -> bool:
        if not self.use_masking:
            return super()._on_step()
        model = self.model
        self.model = MaskedPredictor(model, self.eval_env)  # evaluate_policy's predict reads the masks
        try:
            return super()._on_step()
        finally:
            self.model = model
