"""QR-DQN policies (sb3-contrib ``qrdqn/policies.py``) as Keras models: ``MlpPolicy``, ``CnnPolicy``,
``MultiInputPolicy``.

A ``QRDQNPolicy`` holds the quantile network and its target (sb3-contrib's ``quantile_net`` and
``quantile_net_target``), built as SB3's DQN builds its Q-networks (``sbtf.sb3.dqn.q_learning``): features
(``sbtf.common.extractors``' ``FlattenExtractor``, ``NatureCNN``, ``CombinedExtractor`` or a user's Keras layer), then
sb3's ``create_mlp`` to ``n_actions * n_quantiles`` outputs, viewed as (batch, n_quantiles, n_actions). Variable
names: ``model/quantile_net/fc{i}/kernel:0``, ``model/quantile_net/out/bias:0``, ``model/quantile_net_target/...``
(and ``<net>/features_extractor/c1..c3, fc1`` for the CNN, ``<net>/features_extractor/0_kernel`` ... for a user's
layer). Acting runs the online network through the policy's acting path: in NumPy on copies of the weights for Mlp
networks, else one compiled TF call.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import gymnasium as gym
import numpy as np
import tensorflow as tf

from sbtf.common.nn.network_ops import TF_OPS
from sbtf.common.policies import register_policy_base
from sbtf.sb3.dqn.q_learning import QPolicyBase, QValueNetwork


class QuantileNetwork(QValueNetwork):
    """
    sb3-contrib's ``QuantileNetwork``: features, then an MLP to ``n_actions * n_quantiles`` quantiles.

    :param scope: the scope of its variable names (``quantile_net`` or ``quantile_net_target``)
    """

    def __init__(self, scope: str, observation_space: gym.Space, n_actions: int, n_quantiles: int,
                 net_arch: List[int], activation_fn, extractor: type, normalize_images: bool,
                 features_extractor_kwargs: Optional[Dict[str, Any]], **kwargs):
        self.n_actions = int(n_actions)
        self.n_quantiles = int(n_quantiles)
        super().__init__(scope, observation_space, self.n_actions * self.n_quantiles, net_arch, activation_fn,
                         extractor, normalize_images, features_extractor_kwargs, **kwargs)

    @property
    def quantile_net(self):
        """sb3-contrib's name of the MLP (``create_mlp``) behind the features."""
        return self.mlp

    def flat_quantiles(self, obs, ops=TF_OPS):
        """(batch, n_quantiles * n_actions) quantiles, quantile-major (in the backend ``ops``)."""
        return self.flat_values(obs, ops)

    def quantiles(self, obs) -> tf.Tensor:
        """(batch, n_quantiles, n_actions) quantiles in TF."""
        return tf.reshape(self.flat_values(obs), (-1, self.n_quantiles, self.n_actions))

    def call(self, obs):
        return self.quantiles(obs)


class QRDQNPolicy(QPolicyBase):
    """
    Policy class with quantile and target networks for QR-DQN (sb3-contrib's arguments; the learning-rate
    schedule is the model's ``learning_rate``).

    :param observation_space: (gymnasium.Space) Observation space
    :param action_space: (gymnasium.spaces.Discrete) Action space
    :param n_quantiles: (int) Number of quantiles
    :param net_arch: ([int]) The sizes of the hidden layers (default [64, 64]; [] with the NatureCNN)
    :param activation_fn: (callable or str) Activation function (default ReLU)
    :param features_extractor_class: (type) Features extractor to use: any Keras layer class with a ``features_dim``
        (``sbtf.common.extractors``), built as ``cls(observation_space, **features_extractor_kwargs)``, or a built-in
        one by name (``"FlattenExtractor"``, ``"NatureCNN"``, ``"CombinedExtractor"``)
    :param features_extractor_kwargs: (dict) Keyword arguments to pass to the features extractor
    :param normalize_images: (bool) Whether to divide uint8 images by 255
    :param optimizer_class: (None or "Adam") The optimizer (PyTorch's Adam, as sb3-contrib's default)
    :param optimizer_kwargs: (dict) Additional keyword arguments of the optimizer (``eps``, ``betas``)
    """

    network_names = ("quantile_net", "quantile_net_target")
    algorithm_name = "QR-DQN"

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, n_quantiles: int = 200,
                 net_arch: Optional[List[int]] = None, activation_fn=tf.nn.relu, features_extractor_class=None,
                 features_extractor_kwargs: Optional[Dict[str, Any]] = None, normalize_images: bool = True,
                 optimizer_class=None, optimizer_kwargs: Optional[Dict[str, Any]] = None):
        super().__init__(None, observation_space, action_space)
        if int(n_quantiles) < 1:
            raise ValueError(f"Error: n_quantiles must be >= 1, got {n_quantiles}.")
        self.n_quantiles = int(n_quantiles)
        self._build(observation_space, action_space, net_arch, activation_fn, features_extractor_class,
                    features_extractor_kwargs, normalize_images, optimizer_class, optimizer_kwargs)

    def _new_network(self, scope, observation_space, net_arch, activation_fn, extractor, normalize_images,
                     features_extractor_kwargs) -> QuantileNetwork:
        return QuantileNetwork(scope, observation_space, self.n_actions, self.n_quantiles, net_arch, activation_fn,
                               extractor, normalize_images, features_extractor_kwargs)

    # ------------------------------------------------------------------ maths
    def q_values(self, obs) -> tf.Tensor:
        """Q-values (mean of the quantiles), (batch, n_actions), in TF."""
        return tf.reduce_mean(self.quantile_net.quantiles(obs), axis=1)

    def quantiles_np(self, obs) -> np.ndarray:
        """(batch, n_quantiles, n_actions) quantiles of the online network (NumPy, through the acting path)."""
        return self.flat_values_np(obs).reshape(-1, self.n_quantiles, self.n_actions)

    def q_values_np(self, obs) -> np.ndarray:
        """Q-values (batch, n_actions) as a NumPy array."""
        return self.quantiles_np(obs).mean(axis=1)


class MlpPolicy(QRDQNPolicy):
    """QR-DQN policy on flattened observations (sb3-contrib ``MlpPolicy``)."""


class CnnPolicy(QRDQNPolicy):
    """QR-DQN policy with the nature CNN (sb3-contrib ``CnnPolicy``)."""

    _default_extractor = "NatureCNN"


class MultiInputPolicy(QRDQNPolicy):
    """QRDQN policy for Dict observations (sb3-contrib ``MultiInputPolicy``): ``CombinedExtractor`` features."""

    _default_extractor = "CombinedExtractor"


register_policy_base(QRDQNPolicy, {"MlpPolicy": MlpPolicy, "CnnPolicy": CnnPolicy,
                                   "MultiInputPolicy": MultiInputPolicy})

__all__ = ["QuantileNetwork", "QRDQNPolicy", "MlpPolicy", "CnnPolicy", "MultiInputPolicy"]
