"""QR-DQN policies (sb3-contrib ``qrdqn/policies.py``) as Keras models: ``MlpPolicy``, ``CnnPolicy``,
``MultiInputPolicy``.

A ``QRDQNPolicy`` holds the quantile network and its target (sb3-contrib's ``quantile_net`` and
``quantile_net_target``): features (``sbtf.common.extractors``' ``FlattenExtractor``, ``NatureCNN``, ``CombinedExtractor`` or a user's Keras
layer), then sb3's ``create_mlp`` to
``n_actions * n_quantiles`` outputs, viewed as (batch, n_quantiles, n_actions). Variable names:
``model/quantile_net/fc{i}/kernel:0``, ``model/quantile_net/out/bias:0``, ``model/quantile_net_target/...`` (and
``<net>/features_extractor/c1..c3, fc1`` for the CNN, ``<net>/features_extractor/0_kernel`` ... for a user's layer). Acting runs the online network through the policy's acting
path: in NumPy on copies of the weights for Mlp networks, else one compiled TF call.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import gymnasium as gym
import keras
import numpy as np
import tensorflow as tf

from sbtf.common.input import check_obs_space
from sbtf.common.network_ops import TF_OPS
from sbtf.common.policies import BasePolicy, register_policy_base
from sbtf.common.extractors import NatureCNN
from sbtf.contrib.common.networks import FeaturesExtractor, Mlp, resolve_extractor_class


class QuantileNetwork(keras.layers.Layer):
    """
    sb3-contrib's ``QuantileNetwork``: features, then an MLP to ``n_actions * n_quantiles`` quantiles.

    :param scope: the scope of its variable names (``quantile_net`` or ``quantile_net_target``)
    """

    def __init__(self, scope: str, observation_space: gym.Space, n_actions: int, n_quantiles: int,
                 net_arch: List[int], activation_fn, extractor: type, normalize_images: bool,
                 features_extractor_kwargs: Optional[Dict[str, Any]], **kwargs):
        super().__init__(name=kwargs.pop("name", scope), **kwargs)
        self.scope = scope
        self.n_actions = int(n_actions)
        self.n_quantiles = int(n_quantiles)
        self.features_extractor = FeaturesExtractor(f"{scope}/features_extractor", observation_space, extractor,
                                                    normalize_images, features_extractor_kwargs)
        self.quantile_net = Mlp(scope, net_arch, activation_fn, self.n_actions * self.n_quantiles)

    def build(self, input_shape):
        """The sublayers build themselves on the first call (their shapes follow from the data)."""
        self.built = True

    def flat_quantiles(self, obs, ops=TF_OPS):
        """(batch, n_quantiles * n_actions) quantiles, quantile-major (in the backend ``ops``)."""
        return ops.layer(self.quantile_net, self.features_extractor.ops_call(obs, ops))

    def quantiles(self, obs) -> tf.Tensor:
        """(batch, n_quantiles, n_actions) quantiles in TF."""
        return tf.reshape(self.flat_quantiles(obs), (-1, self.n_quantiles, self.n_actions))

    def call(self, obs):
        return self.quantiles(obs)

    def named_layers(self) -> list:
        return self.features_extractor.named_layers() + self.quantile_net.named_layers()


class QRDQNPolicy(BasePolicy):
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

    _default_extractor = "FlattenExtractor"

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, n_quantiles: int = 200,
                 net_arch: Optional[List[int]] = None, activation_fn=tf.nn.relu, features_extractor_class=None,
                 features_extractor_kwargs: Optional[Dict[str, Any]] = None, normalize_images: bool = True,
                 optimizer_class=None, optimizer_kwargs: Optional[Dict[str, Any]] = None):
        super().__init__(None, observation_space, action_space)
        if not isinstance(action_space, gym.spaces.Discrete):
            raise NotImplementedError(f"Error: QR-DQN policies need a Discrete action space, got {action_space!r}.")
        check_obs_space(observation_space, "QRDQN", allow_dict=True)
        extractor = resolve_extractor_class(features_extractor_class, self._default_extractor)
        if net_arch is None:
            net_arch = [] if extractor is NatureCNN else [64, 64]
        if int(n_quantiles) < 1:
            raise ValueError(f"Error: n_quantiles must be >= 1, got {n_quantiles}.")
        self.n_quantiles = int(n_quantiles)
        self.net_arch = [int(n) for n in net_arch]
        self.activation_fn = activation_fn
        self.features_extractor_class = extractor
        self.features_extractor_kwargs = dict(features_extractor_kwargs or {})
        self.normalize_images = bool(normalize_images)
        self.optimizer_class = optimizer_class
        self.optimizer_kwargs = dict(optimizer_kwargs or {})
        self.n_actions = int(action_space.n)
        # what the model's XLA choice reads (sbtf's off-policy convention)
        self.layer_sizes = list(self.net_arch)
        args = (observation_space, self.n_actions, self.n_quantiles, self.net_arch, activation_fn, extractor,
                self.normalize_images, features_extractor_kwargs)
        self.quantile_net = QuantileNetwork("quantile_net", *args)
        self.quantile_net_target = QuantileNetwork("quantile_net_target", *args)
        self.feature_extraction = "mlp" if self.quantile_net.features_extractor.xla_friendly else "cnn"
        dummy = tf.zeros((1,) + self.obs_shape, tf.as_dtype(self.obs_dtype))
        self.quantile_net(dummy)
        self.quantile_net_target(dummy)
        for target, source in zip(self.target_variables(), self.online_variables()):
            target.assign(source)
        self._acting = self._new_acting_path(
            {"quantiles": (lambda ops, obs: self.quantile_net.flat_quantiles(obs, ops), [self.obs_signature()])})
        self.weights_changed()

    # ------------------------------------------------------------------ parameters
    def _parameter_layers(self) -> list:
        return self.quantile_net.named_layers() + self.quantile_net_target.named_layers()

    def online_variables(self) -> list:
        """The quantile network's variables (what the optimizer trains), in parameter order."""
        return [var for layer in self.quantile_net.named_layers() for _, var in layer.named_variables()]

    def target_variables(self) -> list:
        """The target network's variables, paired with ``online_variables``."""
        return [var for layer in self.quantile_net_target.named_layers() for _, var in layer.named_variables()]

    # ------------------------------------------------------------------ maths
    def call(self, inputs, training=None):
        return tf.reduce_mean(self.quantile_net.quantiles(inputs), axis=1)

    def q_values(self, obs) -> tf.Tensor:
        """Q-values (mean of the quantiles), (batch, n_actions), in TF."""
        return tf.reduce_mean(self.quantile_net.quantiles(obs), axis=1)

    def quantiles_np(self, obs) -> np.ndarray:
        """(batch, n_quantiles, n_actions) quantiles of the online network (NumPy, through the acting path)."""
        flat = self._acting("quantiles", self._prepare_obs(obs))
        return np.asarray(flat).reshape(-1, self.n_quantiles, self.n_actions)

    def q_values_np(self, obs) -> np.ndarray:
        """Q-values (batch, n_actions) as a NumPy array."""
        return self.quantiles_np(obs).mean(axis=1)

    def predict_actions(self, obs) -> np.ndarray:
        """The greedy actions (batch,) of a batch of observations (sb3-contrib's ``_predict``)."""
        return np.argmax(self.q_values_np(obs), axis=1)

    def step(self, obs, state=None, mask=None, deterministic=True):
        """The greedy actions, the Q-values and None (SB2's ``step`` shape)."""
        q_values = self.q_values_np(obs)
        return np.argmax(q_values, axis=1), q_values, None

    def proba_step(self, obs, state=None, mask=None):
        raise NotImplementedError("QR-DQN policies have no action probabilities.")


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
