"""``evaluate_policy`` with action masks (sb3-contrib ``common/maskable/evaluation.py``).

The episodes are run by :func:`sbtf.common.evaluation.evaluate_policy`; the model's ``predict`` is given the env's
current ``action_masks()`` at every step.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from sbtf.common.evaluation import evaluate_policy as evaluate
from sbtf.contrib.common.maskable.utils import get_action_masks, is_masking_supported

__all__ = ["evaluate_policy", "MaskedPredictor"]


class MaskedPredictor:
    """
    A model whose ``predict`` reads the action masks of ``env`` (the env being evaluated) at every call; every other
    attribute is the model's.

    :param model: (MaskablePPO) the model
    :param env: (gymnasium.Env or VecEnv) the environment the masks are read from
    """

    def __init__(self, model: Any, env: Any):
        self._model = model
        self._env = env

    def predict(self, observation, state=None, mask=None, deterministic: bool = False):
        return self._model.predict(observation, state=state, deterministic=deterministic,
                                   action_masks=get_action_masks(self._env))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


def evaluate_policy(model: Any, env: Any, n_eval_episodes: int = 10, deterministic: bool = True, render: bool = False,
                    callback: Optional[Callable[[Dict[str, Any], Dict[str, Any]], Any]] = None,
                    reward_threshold: Optional[float] = None, return_episode_rewards: bool = False, warn: bool = True,
                    use_masking: bool = True) -> Union[Tuple[float, float], Tuple[List[float], List[int]]]:
    """
    Runs the policy for ``n_eval_episodes`` episodes and returns the mean reward (see
    :func:`sbtf.common.evaluation.evaluate_policy`), with the env's action masks applied at every step.

    :param model: (MaskablePPO) the agent
    :param env: (gymnasium.Env or VecEnv) the environment (with ``action_masks()`` when ``use_masking``)
    :param n_eval_episodes: (int) number of episodes
    :param deterministic: (bool) the most likely valid actions instead of samples
    :param render: (bool) render the environment
    :param callback: (callable) called after each step with ``(locals(), globals())``
    :param reward_threshold: (float) raise when the mean reward is not above it
    :param return_episode_rewards: (bool) return the episodes' rewards and lengths instead of the mean and std
    :param warn: (bool) warn when the env is not wrapped in a ``Monitor``
    :param use_masking: (bool) apply the action masks
    :return: (float, float) mean and std of the episode rewards, or ([float], [int]) with ``return_episode_rewards``
    """

    if use_masking:
        if not is_masking_supported(env):
            raise ValueError("Environment does not support action masking. Consider using ActionMasker wrapper")
        model = MaskedPredictor(model, env)
    return evaluate(model, env, n_eval_episodes=n_eval_episodes, deterministic=deterministic, render=render,
                    callback=callback, reward_threshold=reward_threshold, return_episode_rewards=return_episode_rewards,
                    warn=warn)
