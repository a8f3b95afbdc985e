"""
The message of a model / env space mismatch (``load(..., env=)``, ``set_env(env)``): which space differs, with both.
"""
from typing import Optional

import gymnasium as gym

__all__ = ["env_space_mismatch_message"]


def _differs(kind: str, env_space: gym.Space, model_space: gym.Space) -> str:
    return f"the {kind} space of the env {env_space} differs from the model's {model_space}"


def env_space_mismatch_message(env_observation_space: gym.Space, model_observation_space: gym.Space,
                               env_action_space: gym.Space, model_action_space: gym.Space,
                               observation_differs: bool, action_differs: bool, hint: str = "") -> Optional[str]:
    """
    The error message for an env whose spaces do not match the model's, naming each space that differs and
    showing the env's and the model's; None when neither differs.

    :param env_observation_space: (gym.Space) the env's observation space
    :param model_observation_space: (gym.Space) the model's observation space
    :param env_action_space: (gym.Space) the env's action space
    :param model_action_space: (gym.Space) the model's action space
    :param observation_differs: (bool) whether the observation spaces differ
    :param action_differs: (bool) whether the action spaces differ
    :param hint: (str) an extra sentence (starting with a space) for the observation mismatch, e.g. a missing time
        feature; used only when the action spaces match (otherwise the env is simply another env)
    :return: (str or None) the message
    """
    parts = []
    if observation_differs:
        parts.append(_differs("observation", env_observation_space, model_observation_space))
    if action_differs:
        parts.append(_differs("action", env_action_space, model_action_space))
    if not parts:
        return None
    message = "; ".join(parts)
    message = message[0].upper() + message[1:] + "."
    if observation_differs and not action_differs and hint:
        return message + hint
    return (message + " The env must have the spaces the model was trained on: pass the env it was trained on "
            "(with the same wrappers), or train a new model on this env.")
