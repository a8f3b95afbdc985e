"""TQC policies (sb3-contrib ``tqc/policies.py``) as Keras models: ``MlpPolicy``, ``CnnPolicy``,
``MultiInputPolicy``.

A ``TQCPolicy`` holds the actor, the critic and the critic's target (sb3-contrib's ``actor``, ``critic``,
``critic_target``):

* actor: features, hidden layers ``actor/fc{i}`` (net_arch ``pi``), then the heads ``actor/mu`` and
  ``actor/log_std`` (log-std clipped to [-20, 2]); actions are ``tanh`` of a Gaussian sample (or of the mean);
* critic: ``n_critics`` networks ``critic/qf{i}`` (net_arch ``qf``) on ``concat[features, action]``, each with
  ``n_quantiles`` outputs, stacked as (batch, n_critics, n_quantiles); ``critic_target`` has the same shape.

Variable names: ``model/actor/fc0/kernel:0``, ..., ``model/critic/qf0/out/bias:0``, ``model/critic_target/...``.
Acting runs the actor through the policy's acting path (NumPy on copies of the weights for Mlp actors).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

import gymnasium as gym
import keras
import numpy as np
import tensorflow as tf

from sbtf.common.input import check_obs_space
from sbtf.common.network_ops import TF_OPS
from sbtf.common.policies import BasePolicy, register_policy_base
from sbtf.common.sde import ExplorationNoise, SDELogStd, sde_log_std, sde_std
from sbtf.contrib.common.networks import (FeaturesExtractor, Mlp, TorchLinear, actor_critic_arch,
                                          resolve_extractor_class)

# CAP the standard deviation of the actor
LOG_STD_MAX = 2
LOG_STD_MIN = -20


class Actor(keras.layers.Layer):
    """
    sb3-contrib's TQC ``Actor``: features, ``latent_pi`` MLP, ``mu`` and ``log_std`` heads; with gSDE
    (``use_sde``) the ``log_std`` head is the free gSDE parameter ``actor/log_std`` (latent_dim, action_dim or 1,
    ``sbtf.common.sde``) and the mean is clipped to [-clip_mean, clip_mean] (sb3's Hardtanh; 0: no clip).
    """

    def __init__(self, observation_space: gym.Space, action_dim: int, net_arch: List[int], activation_fn,
                 extractor: type, normalize_images: bool, features_extractor_kwargs, use_sde: bool = False,
                 log_std_init: float = -3.0, full_std: bool = True, use_expln: bool = False, clip_mean: float = 2.0,
                 **kwargs):
        super().__init__(name=kwargs.pop("name", "actor"), **kwargs)
        self.features_extractor = FeaturesExtractor("actor/features_extractor", observation_space, extractor,
                                                    normalize_images, features_extractor_kwargs)
        self.latent_pi = Mlp("actor", net_arch, activation_fn)
        self.mu = TorchLinear("actor/mu", action_dim)
        self.action_dim = int(action_dim)
        self.use_sde = bool(use_sde)
        self.use_expln = bool(use_expln)
        self.full_std = bool(full_std)
        self.clip_mean = float(clip_mean)
        self.log_std = SDELogStd("actor", action_dim, log_std_init, full_std) if self.use_sde else \
            TorchLinear("actor/log_std", action_dim)

    def build(self, input_shape):
        """The sublayers build themselves on the first call (their shapes follow from the data)."""
        self.built = True

    def mean_log_std(self, obs, ops=TF_OPS):
        """The Gaussian's mean and log-std before the tanh squashing: the log-std head clipped to
        [LOG_STD_MIN, LOG_STD_MAX], or with gSDE ``0.5 * log(latent**2 @ std**2 + 1e-6)``."""
        if self.use_sde:
            mean, latent, std = self.sde(obs, ops)
            return mean, sde_log_std(latent, std, numpy=ops.is_numpy)
        latent = ops.layer(self.latent_pi, self.features_extractor.ops_call(obs, ops))
        return ops.layer(self.mu, latent), ops.clip(ops.layer(self.log_std, latent), LOG_STD_MIN, LOG_STD_MAX)

    def sde(self, obs, ops=TF_OPS):
        """gSDE: (mean clipped to +-clip_mean, latent features, std matrix (latent_dim, action_dim))."""
        latent = ops.layer(self.latent_pi, self.features_extractor.ops_call(obs, ops))
        mean = ops.layer(self.mu, latent)
        if self.clip_mean > 0:
            mean = ops.clip(mean, -self.clip_mean, self.clip_mean)
        std = sde_std(ops.layer(self.log_std, latent), self.action_dim, self.use_expln, self.full_std,
                      numpy=ops.is_numpy)
        return mean, latent, std

    def call(self, obs):
        return self.mean_log_std(obs)

    def named_layers(self) -> list:
        return self.features_extractor.named_layers() + self.latent_pi.named_layers() + [self.mu, self.log_std]


class Critic(keras.layers.Layer):
    """sb3-contrib's TQC ``Critic``: ``n_critics`` quantile networks on ``concat[features, action]``."""

    def __init__(self, scope: str, observation_space: gym.Space, net_arch: List[int], activation_fn, extractor: type,
                 normalize_images: bool, features_extractor_kwargs, n_quantiles: int, n_critics: int,
                 features_extractor: Optional[FeaturesExtractor] = None, **kwargs):
        super().__init__(name=kwargs.pop("name", scope), **kwargs)
        self.scope = scope
        self.n_quantiles = int(n_quantiles)
        self.n_critics = int(n_critics)
        self.quantiles_total = self.n_quantiles * self.n_critics
        #: a features extractor shared with the actor (its variables are the actor's; no critic gradient)
        self.shares_features = features_extractor is not None
        self.features_extractor = features_extractor if features_extractor is not None else FeaturesExtractor(
            f"{scope}/features_extractor", observation_space, extractor, normalize_images, features_extractor_kwargs)
        self.q_networks = [Mlp(f"{scope}/qf{i}", net_arch, activation_fn, self.n_quantiles)
                           for i in range(self.n_critics)]

    def build(self, input_shape):
        """The sublayers build themselves on the first call (their shapes follow from the data)."""
        self.built = True

    def quantiles(self, obs, action) -> tf.Tensor:
        """(batch, n_critics, n_quantiles) quantiles of Q(obs, action), action in [-1, 1]."""
        features = self.features_extractor(obs)
        if self.shares_features:
            features = tf.stop_gradient(features)
        inputs = tf.concat([features, action], axis=-1)
        return tf.stack([qf(inputs) for qf in self.q_networks], axis=1)

    def call(self, inputs):
        return self.quantiles(*inputs)

    def named_layers(self) -> list:
        own = [] if self.shares_features else self.features_extractor.named_layers()
        return own + [layer for qf in self.q_networks for layer in qf.named_layers()]


class TQCPolicy(BasePolicy):
    """
    Policy class (with both actor and critic) for TQC (sb3-contrib's arguments; the learning-rate schedule is the
    model's ``learning_rate``).

    :param observation_space: (gymnasium.Space) Observation space
    :param action_space: (gymnasium.spaces.Box) Action space
    :param net_arch: ([int] or dict) The sizes of the hidden layers of the actor and the critics (default
        [256, 256]), or ``dict(pi=[...], qf=[...])``
    :param activation_fn: (callable or str) Activation function (default ReLU)
    :param use_sde: (bool) gSDE actor (set by ``TQC(use_sde=True)``; see ``sbtf.common.sde`` and docs/gsde.md)
    :param log_std_init: (float) Initial value of gSDE's ``log_std`` (gSDE only)
    :param use_expln: (bool) gSDE: ``expln`` instead of ``exp`` for the std
    :param clip_mean: (float) gSDE: the mean is clipped to [-clip_mean, clip_mean] (sb3's Hardtanh; 0: no clip)
    :param full_std: (bool) gSDE: one std per (latent, action) pair, else one per latent unit (sb3's actor argument)
    :param features_extractor_class: (type) Features extractor to use: any Keras layer class with a ``features_dim``
        (``sbtf.common.extractors``), built as ``cls(observation_space, **features_extractor_kwargs)``, or a built-in
        one by name (``"FlattenExtractor"``, ``"NatureCNN"``, ``"CombinedExtractor"``)
    :param features_extractor_kwargs: (dict) Keyword arguments to pass to the features extractor
    :param normalize_images: (bool) Whether to divide uint8 images by 255
    :param optimizer_class: (None or "Adam") The optimizer (PyTorch's Adam, as sb3-contrib's default)
    :param optimizer_kwargs: (dict) Additional keyword arguments of the optimizer (``eps``, ``betas``)
    :param n_quantiles: (int) Number of quantiles for the critic
    :param n_critics: (int) Number of critic networks to create
    :param share_features_extractor: (bool) Whether the critic uses the actor's features extractor (trained by the
        actor loss only)
    """

    _default_extractor = "FlattenExtractor"

    def __init__(self, observation_space: gym.Space, action_space: gym.Space,
                 net_arch: Union[List[int], Dict[str, List[int]], None] = None, activation_fn=tf.nn.relu,
                 use_sde: bool = False, log_std_init: float = -3, use_expln: bool = False, clip_mean: float = 2.0,
                 features_extractor_class=None, features_extractor_kwargs: Optional[Dict[str, Any]] = None,
                 normalize_images: bool = True, optimizer_class=None, optimizer_kwargs: Optional[Dict[str, Any]] = None,
                 n_quantiles: int = 25, n_critics: int = 2, share_features_extractor: bool = False,
                 full_std: bool = True):
        super().__init__(None, observation_space, action_space)
        if not isinstance(action_space, gym.spaces.Box):
            raise NotImplementedError(f"Error: TQC policies need a Box action space, got {action_space!r}.")
        check_obs_space(observation_space, "TQC", allow_dict=True)
        if int(n_quantiles) < 1 or int(n_critics) < 1:
            raise ValueError(f"Error: n_quantiles and n_critics must be >= 1, got {n_quantiles}, {n_critics}.")
        extractor = resolve_extractor_class(features_extractor_class, self._default_extractor)
        if net_arch is None:
            net_arch = [256, 256]
        actor_arch, critic_arch = actor_critic_arch(net_arch)
        self.net_arch = net_arch
        self.activation_fn = activation_fn
        self.use_sde = bool(use_sde)
        self.log_std_init = log_std_init
        self.use_expln = use_expln
        self.clip_mean = clip_mean
        self.full_std = bool(full_std)
        #: the gSDE exploration matrices (the acting state; None without gSDE)
        self.sde_noise = ExplorationNoise(self.np_random) if self.use_sde else None
        self.features_extractor_class = extractor
        self.features_extractor_kwargs = dict(features_extractor_kwargs or {})
        self.normalize_images = bool(normalize_images)
        self.optimizer_class = optimizer_class
        self.optimizer_kwargs = dict(optimizer_kwargs or {})
        self.n_quantiles = int(n_quantiles)
        self.n_critics = int(n_critics)
        self.share_features_extractor = bool(share_features_extractor)
        self.n_act = int(np.prod(action_space.shape))
        self.layer_sizes = list(actor_arch) + list(critic_arch)

        self.actor = Actor(observation_space, self.n_act, actor_arch, activation_fn, extractor,
                           self.normalize_images, features_extractor_kwargs, use_sde=self.use_sde,
                           log_std_init=float(log_std_init), full_std=self.full_std, use_expln=bool(use_expln),
                           clip_mean=float(clip_mean))
        critic_args = (observation_space, critic_arch, activation_fn, extractor, self.normalize_images,
                       features_extractor_kwargs, self.n_quantiles, self.n_critics)
        #: "mlp" when the extractor is sbtf's flattening (the XLA choice, sbtf's off-policy convention)
        self.feature_extraction = "mlp" if self.actor.features_extractor.xla_friendly else "cnn"
        shared = self.actor.features_extractor if self.share_features_extractor else None
        self.critic = Critic("critic", *critic_args, features_extractor=shared)
        self.critic_target = Critic("critic_target", *critic_args)
        dummy_obs = tf.zeros((1,) + self.obs_shape, tf.as_dtype(self.obs_dtype))
        dummy_act = tf.zeros((1, self.n_act), tf.float32)
        self.actor(dummy_obs)
        self.critic((dummy_obs, dummy_act))
        self.critic_target((dummy_obs, dummy_act))
        for target, source in zip(self.critic_target_variables(), self.critic_variables(with_shared=True)):
            target.assign(source)
        functions = {"mean_log_std": (lambda ops, obs: self.actor.mean_log_std(obs, ops), [self.obs_signature()])}
        if self.use_sde:
            functions["sde"] = (lambda ops, obs: self.actor.sde(obs, ops), [self.obs_signature()])
        self._acting = self._new_acting_path(functions)
        self.weights_changed()

    # ------------------------------------------------------------------ parameters
    def _parameter_layers(self) -> list:
        return self.actor.named_layers() + self.critic.named_layers() + self.critic_target.named_layers()

    @staticmethod
    def _variables(layers) -> list:
        return [var for layer in layers for _, var in layer.named_variables()]

    def actor_variables(self) -> list:
        """The actor's variables (what the actor's optimizer trains)."""
        return self._variables(self.actor.named_layers())

    def critic_variables(self, with_shared: bool = False) -> list:
        """
        The critic's variables (what the critic's optimizer trains).

        :param with_shared: include the features extractor shared with the actor (to pair with the target's)
        """
        layers = self.critic.named_layers()
        if with_shared and self.critic.shares_features:
            layers = self.critic.features_extractor.named_layers() + layers
        return self._variables(layers)

    def critic_target_variables(self) -> list:
        """The target critic's variables, paired with ``critic_variables(with_shared=True)``."""
        return self._variables(self.critic_target.named_layers())

    # ------------------------------------------------------------------ maths
    def call(self, inputs, training=None):
        return tf.tanh(self.actor.mean_log_std(inputs)[0])

    def actor_mean_log_std_np(self, obs):
        """The actor's mean and log-std (NumPy, through the acting path)."""
        return self._acting("mean_log_std", self._prepare_obs(obs))

    def sde_std_matrix(self) -> np.ndarray:
        """The std of the gSDE exploration matrices (latent_dim, n_act), NumPy."""
        return np.asarray(self._acting("sde", np.zeros((1,) + self.obs_shape, self.obs_dtype))[2])

    def reset_noise(self, n_envs: int = 1) -> None:
        """Sample new gSDE exploration matrices (sb3's ``reset_noise``)."""
        self.sde_noise.reset(self.sde_std_matrix(), n_envs)

    def step(self, obs, state=None, mask=None, deterministic=False) -> np.ndarray:
        """Actions in [-1, 1]: ``tanh(mu)`` (deterministic) or ``tanh(mu + std * N(0, 1))``; with gSDE
        ``tanh(mu + latent @ E)`` (``E`` the current exploration matrix, ``sbtf.common.sde.ExplorationNoise``)."""
        if self.use_sde:
            mean, latent, std = self._acting("sde", self._prepare_obs(obs))
            if deterministic:
                return np.tanh(mean)
            self.sde_noise.before_step(lambda: std, len(latent))
            return np.tanh(mean + self.sde_noise.noise(latent))
        mean, log_std = self.actor_mean_log_std_np(obs)
        if deterministic:
            return np.tanh(mean)
        return np.tanh(mean + self.np_random.standard_normal(mean.shape).astype(np.float32) * np.exp(log_std))

    def proba_step(self, obs, state=None, mask=None):
        mean, log_std = self.actor_mean_log_std_np(obs)
        return [mean, np.exp(log_std)]


class MlpPolicy(TQCPolicy):
    """TQC policy on flattened observations (sb3-contrib ``MlpPolicy``)."""


class CnnPolicy(TQCPolicy):
    """TQC policy with the nature CNN (sb3-contrib ``CnnPolicy``)."""

    _default_extractor = "NatureCNN"


class MultiInputPolicy(TQCPolicy):
    """TQC policy for Dict observations (sb3-contrib ``MultiInputPolicy``): ``CombinedExtractor`` features."""

    _default_extractor = "CombinedExtractor"


register_policy_base(TQCPolicy, {"MlpPolicy": MlpPolicy, "CnnPolicy": CnnPolicy,
                                 "MultiInputPolicy": MultiInputPolicy})

__all__ = ["Actor", "Critic", "TQCPolicy", "MlpPolicy", "CnnPolicy", "LOG_STD_MIN", "LOG_STD_MAX"]
