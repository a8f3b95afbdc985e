"""stable-baselines3's TD3 policies (``stable_baselines3.td3.policies``, also DDPG's): ``TD3Policy`` with
``MlpPolicy``, ``CnnPolicy``, ``MultiInputPolicy``.

A ``TD3Policy`` holds ``actor`` (features, hidden layers ``actor/fc{i}``, output ``actor/out`` then tanh),
``actor_target``, ``critic`` (``n_critics`` Q-networks ``critic/qf{i}`` on ``concat[features, action]``) and
``critic_target`` (the networks of ``sbtf.sb3.common.actor_critic``). Actions are in [-1, 1]; the model rescales
them to the action space. Acting runs in NumPy for Mlp actors.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

import gymnasium as gym
import tensorflow as tf

from sbtf.common.policies import register_policy_base
from sbtf.sb3.common.actor_critic import DeterministicActor as Actor
from sbtf.sb3.common.actor_critic import OffPolicyActorCriticPolicy


class TD3Policy(OffPolicyActorCriticPolicy):
    """
    Policy class (with both actor and critic) for TD3 and DDPG: stable-baselines3's arguments (the learning-rate
    schedule is the model's ``learning_rate``).

    :param observation_space: (gymnasium.Space) Observation space
    :param action_space: (gymnasium.spaces.Box) Action space
    :param net_arch: ([int] or dict) hidden layers of the actor and the critics (default [400, 300]; [256, 256]
        behind a NatureCNN), or ``dict(pi=[...], qf=[...])``
    :param activation_fn: (callable or str) activation function (a TF / Keras activation; default ``tf.nn.relu``)
    :param features_extractor_class: (type) a Keras layer class with a ``features_dim`` (``sbtf.common.extractors``:
        ``FlattenExtractor``, ``NatureCNN``, ``CombinedExtractor``, or your own), or a built-in one's name
    :param features_extractor_kwargs: (dict) keyword arguments of the features extractor
    :param normalize_images: (bool) divide uint8 images by 255
    :param optimizer_class: (None or "Adam") the optimizer (PyTorch's Adam, sb3's default)
    :param optimizer_kwargs: (dict) the optimizer's ``eps`` / ``betas``
    :param n_critics: (int) number of critic networks
    :param share_features_extractor: (bool) the critic uses the actor's features extractor (trained by the actor)
    """

    _actor_kind = "deterministic"
    _algo_name = "TD3"
    _default_net_arch = [400, 300]

    def __init__(self, observation_space: gym.Space, action_space: gym.Space,
                 net_arch: Union[List[int], Dict[str, List[int]], None] = None, activation_fn=tf.nn.relu,
                 features_extractor_class=None, features_extractor_kwargs: Optional[Dict[str, Any]] = None,
                 normalize_images: bool = True, optimizer_class=None, optimizer_kwargs: Optional[Dict[str, Any]] = None,
                 n_critics: int = 2, share_features_extractor: bool = False):
        super().__init__(observation_space, action_space, net_arch=net_arch, activation_fn=activation_fn,
                         features_extractor_class=features_extractor_class,
                         features_extractor_kwargs=features_extractor_kwargs, normalize_images=normalize_images,
                         optimizer_class=optimizer_class, optimizer_kwargs=optimizer_kwargs, n_critics=n_critics,
                         share_features_extractor=share_features_extractor, critic_outputs=1)


class MlpPolicy(TD3Policy):
    """TD3 / DDPG policy on flattened observations (sb3 ``MlpPolicy``)."""


class CnnPolicy(TD3Policy):
    """TD3 / DDPG policy with the nature CNN (sb3 ``CnnPolicy``)."""

    _default_extractor = "NatureCNN"


class MultiInputPolicy(TD3Policy):
    """TD3 / DDPG policy for Dict observations (sb3 ``MultiInputPolicy``): ``CombinedExtractor`` features."""

    _default_extractor = "CombinedExtractor"


register_policy_base(TD3Policy, {"MlpPolicy": MlpPolicy, "CnnPolicy": CnnPolicy, "MultiInputPolicy": MultiInputPolicy})

__all__ = ["Actor", "TD3Policy", "MlpPolicy", "CnnPolicy", "MultiInputPolicy"]
