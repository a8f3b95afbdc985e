"""stable-baselines3's SAC policies (``stable_baselines3.sac.policies``): ``SACPolicy`` with ``MlpPolicy``,
``CnnPolicy``, ``MultiInputPolicy``.

A ``SACPolicy`` holds ``actor`` (squashed Gaussian: features, hidden layers ``actor/fc{i}``, heads ``actor/mu`` and
``actor/log_std``, log-std clipped to [-20, 2]; with gSDE the ``actor/log_std`` matrix), ``critic`` (``n_critics``
Q-networks ``critic/qf{i}`` on ``concat[features, action]``) and ``critic_target``; they are the networks of
``sbtf.sb3.common.actor_critic`` that sb3-contrib's TQC uses too. Actions are in [-1, 1]; the model rescales them to
the action space. Acting runs in NumPy for Mlp actors.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

import gymnasium as gym
import tensorflow as tf

from sbtf.common.policies import register_policy_base
from sbtf.sb3.common.actor_critic import LOG_STD_MAX, LOG_STD_MIN, OffPolicyActorCriticPolicy
from sbtf.sb3.common.actor_critic import SquashedGaussianActor as Actor


class SACPolicy(OffPolicyActorCriticPolicy):
    """
    Policy class (with both actor and critic) for SAC: stable-baselines3's arguments (the learning-rate schedule is
    the model's ``learning_rate``).

    :param observation_space: (gymnasium.Space) Observation space
    :param action_space: (gymnasium.spaces.Box) Action space
    :param net_arch: ([int] or dict) hidden layers of the actor and the critics (default [256, 256]), or
        ``dict(pi=[...], qf=[...])``
    :param activation_fn: (callable or str) activation function (a TF / Keras activation; default ``tf.nn.relu``)
    :param use_sde: (bool) gSDE actor (set by ``SAC(use_sde=True)``)
    :param log_std_init: (float) initial value of gSDE's log std
    :param use_expln: (bool) gSDE: ``expln`` instead of ``exp`` for the std
    :param clip_mean: (float) gSDE: the mean is clipped to [-clip_mean, clip_mean] (0: no clip)
    :param features_extractor_class: (type) a Keras layer class with a ``features_dim`` (``sbtf.common.extractors``:
        ``FlattenExtractor``, ``NatureCNN``, ``CombinedExtractor``, or your own), or a built-in one's name
    :param features_extractor_kwargs: (dict) keyword arguments of the features extractor
    :param normalize_images: (bool) divide uint8 images by 255
    :param optimizer_class: (None or "Adam") the optimizer (PyTorch's Adam, sb3's default)
    :param optimizer_kwargs: (dict) the optimizer's ``eps`` / ``betas``
    :param n_critics: (int) number of critic networks
    :param share_features_extractor: (bool) the critic uses the actor's features extractor (trained by the actor)
    """

    _algo_name = "SAC"
    _default_net_arch = [256, 256]

    def __init__(self, observation_space: gym.Space, action_space: gym.Space,
                 net_arch: Union[List[int], Dict[str, List[int]], None] = None, activation_fn=tf.nn.relu,
                 use_sde: bool = False, log_std_init: float = -3, use_expln: bool = False, clip_mean: float = 2.0,
                 features_extractor_class=None, features_extractor_kwargs: Optional[Dict[str, Any]] = None,
                 normalize_images: bool = True, optimizer_class=None, optimizer_kwargs: Optional[Dict[str, Any]] = None,
                 n_critics: int = 2, share_features_extractor: bool = False):
        super().__init__(observation_space, action_space, net_arch=net_arch, activation_fn=activation_fn,
                         features_extractor_class=features_extractor_class,
                         features_extractor_kwargs=features_extractor_kwargs, normalize_images=normalize_images,
                         optimizer_class=optimizer_class, optimizer_kwargs=optimizer_kwargs, n_critics=n_critics,
                         share_features_extractor=share_features_extractor, critic_outputs=1,
                         use_sde=bool(use_sde), log_std_init=float(log_std_init), use_expln=bool(use_expln),
                         clip_mean=float(clip_mean))
        self.log_std_init = log_std_init
        self.use_expln = use_expln
        self.clip_mean = clip_mean


class MlpPolicy(SACPolicy):
    """SAC policy on flattened observations (sb3 ``MlpPolicy``)."""


class CnnPolicy(SACPolicy):
    """SAC policy with the nature CNN (sb3 ``CnnPolicy``)."""

    _default_extractor = "NatureCNN"


class MultiInputPolicy(SACPolicy):
    """SAC policy for Dict observations (sb3 ``MultiInputPolicy``): ``CombinedExtractor`` features."""

    _default_extractor = "CombinedExtractor"


register_policy_base(SACPolicy, {"MlpPolicy": MlpPolicy, "CnnPolicy": CnnPolicy, "MultiInputPolicy": MultiInputPolicy})

__all__ = ["Actor", "SACPolicy", "MlpPolicy", "CnnPolicy", "MultiInputPolicy", "LOG_STD_MIN", "LOG_STD_MAX"]
