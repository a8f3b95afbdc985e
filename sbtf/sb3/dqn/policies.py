"""stable-baselines3's DQN policies (``stable_baselines3.dqn.policies``) as Keras models: ``QNetwork``,
``DQNPolicy`` and its ``MlpPolicy``, ``CnnPolicy``, ``MultiInputPolicy``.

A ``DQNPolicy`` holds the Q-network and its target (SB3's ``q_net`` and ``q_net_target``), each its own features
extractor (``sbtf.common.extractors``' ``FlattenExtractor``, ``NatureCNN``, ``CombinedExtractor`` or a user's Keras
layer with a ``features_dim``) then sb3's ``create_mlp`` to ``n_actions`` Q-values, built by the network code QR-DQN
shares (``sbtf.sb3.dqn.q_learning``). Variable names: ``model/q_net/fc{i}/kernel:0``,
``model/q_net/out/bias:0``, ``model/q_net_target/...`` (``<net>/features_extractor/...`` for the extractor's own
variables). Acting runs the online network in NumPy on copies of its weights for Mlp networks, else in one compiled
TF call (``sbtf.common.compile.acting``).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import gymnasium as gym
import numpy as np
import tensorflow as tf

from sbtf.common.nn.network_ops import TF_OPS
from sbtf.common.policies import register_policy_base
from sbtf.sb3.dqn.q_learning import QPolicyBase, QValueNetwork


class QNetwork(QValueNetwork):
    """
    SB3's ``QNetwork``: features, then an MLP to one Q-value per action. Called on a batch of observations it
    returns the (batch, n_actions) Q-values, as SB3's ``q_net(obs)``.

    :param scope: the scope of its variable names (``q_net`` or ``q_net_target``)
    :param observation_space: the observation space
    :param action_space: the (Discrete) action space
    :param net_arch: hidden layer sizes
    :param activation_fn: activation of the hidden layers (a TF / Keras function or its name)
    :param features_extractor_class: the features extractor class
    :param normalize_images: divide uint8 images by 255
    :param features_extractor_kwargs: the extractor's keyword arguments
    """

    def __init__(self, scope: str, observation_space: gym.Space, action_space: gym.spaces.Discrete,
                 net_arch: List[int], activation_fn, features_extractor_class: type, normalize_images: bool = True,
                 features_extractor_kwargs: Optional[Dict[str, Any]] = None, **kwargs):
        super().__init__(scope, observation_space, int(action_space.n), net_arch, activation_fn,
                         features_extractor_class, normalize_images, features_extractor_kwargs, **kwargs)
        self.action_space = action_space

    @property
    def q_net(self):
        """SB3's name of the MLP (``create_mlp``) behind the features."""
        return self.mlp

    def q_values(self, obs, ops=TF_OPS):
        """(batch, n_actions) Q-values (in the backend ``ops``)."""
        return self.flat_values(obs, ops)

    def _predict(self, observation, deterministic: bool = True) -> tf.Tensor:
        """SB3's greedy action: the argmax of the Q-values (TF)."""
        return tf.argmax(self.flat_values(observation), axis=1)


class DQNPolicy(QPolicyBase):
    """
    Policy class with Q-Value Net and target net for DQN (SB3's arguments; the learning-rate schedule is the
    model's ``learning_rate``, fed to the optimizer at every training).

    :param observation_space: Observation space
    :param action_space: Action space (Discrete)
    :param net_arch: The specification of the Q-network (hidden layer sizes; default [64, 64], [] behind a NatureCNN)
    :param activation_fn: Activation function (a TF / Keras activation such as ``tf.nn.relu``, or its name)
    :param features_extractor_class: Features extractor to use: a Keras layer class with a ``features_dim``
        (``sbtf.common.extractors``' ``FlattenExtractor``, ``NatureCNN``, ``CombinedExtractor`` or the user's), built as
        ``cls(observation_space, **features_extractor_kwargs)``; the built-in ones may be named by a string
    :param features_extractor_kwargs: Keyword arguments to pass to the features extractor
    :param normalize_images: Whether to normalize images or not, dividing by 255.0 (True by default)
    :param optimizer_class: The optimizer to use (None / ``"Adam"``: PyTorch's Adam, SB3's default)
    :param optimizer_kwargs: Additional keyword arguments of the optimizer (``eps``, ``betas``)
    """

    network_names = ("q_net", "q_net_target")
    algorithm_name = "DQN"

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, net_arch: Optional[List[int]] = None,
                 activation_fn=tf.nn.relu, features_extractor_class=None,
                 features_extractor_kwargs: Optional[Dict[str, Any]] = None, normalize_images: bool = True,
                 optimizer_class=None, optimizer_kwargs: Optional[Dict[str, Any]] = None):
        super().__init__(None, observation_space, action_space)
        self._build(observation_space, action_space, net_arch, activation_fn, features_extractor_class,
                    features_extractor_kwargs, normalize_images, optimizer_class, optimizer_kwargs)

    def _new_network(self, scope, observation_space, net_arch, activation_fn, extractor, normalize_images,
                     features_extractor_kwargs) -> QNetwork:
        return QNetwork(scope, observation_space, self.ac_space, net_arch, activation_fn, extractor,
                        normalize_images, features_extractor_kwargs)

    # ------------------------------------------------------------------ maths
    def q_values(self, obs) -> tf.Tensor:
        """Q-values (batch, n_actions) of the online network, in TF."""
        return self.q_net.q_values(obs)

    def q_values_np(self, obs) -> np.ndarray:
        """Q-values (batch, n_actions) of the online network, as a NumPy array (through the acting path)."""
        return self.flat_values_np(obs)

    def _predict(self, observation, deterministic: bool = True) -> tf.Tensor:
        """SB3's ``DQNPolicy._predict``: the greedy actions (TF)."""
        return self.q_net._predict(observation, deterministic=deterministic)


class MlpPolicy(DQNPolicy):
    """Policy class for DQN on flattened observations (SB3 ``MlpPolicy``)."""


class CnnPolicy(DQNPolicy):
    """Policy class for DQN with the Nature CNN on image observations (SB3 ``CnnPolicy``)."""

    _default_extractor = "NatureCNN"


class MultiInputPolicy(DQNPolicy):
    """Policy class for DQN on Dict observations (SB3 ``MultiInputPolicy``): ``CombinedExtractor`` features."""

    _default_extractor = "CombinedExtractor"


register_policy_base(DQNPolicy, {"MlpPolicy": MlpPolicy, "CnnPolicy": CnnPolicy, "MultiInputPolicy": MultiInputPolicy})

__all__ = ["QNetwork", "DQNPolicy", "MlpPolicy", "CnnPolicy", "MultiInputPolicy"]
