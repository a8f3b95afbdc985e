"""stable-baselines3's continuous actor-critic policies for off-policy learning, written once for SAC, TD3, DDPG
(``sbtf.sb3``) and TQC (``sbtf.contrib``).

* ``SquashedGaussianActor`` (SAC, TQC): features, ``latent_pi`` MLP, ``mu`` and ``log_std`` heads (log-std clipped to
  [-20, 2]); actions are ``tanh`` of a Gaussian sample, or with gSDE of ``mean + latent @ E``;
* ``DeterministicActor`` (TD3, DDPG): features, MLP, ``tanh`` output;
* ``ContinuousCritic``: ``n_critics`` networks on ``concat[features, action]`` with ``n_outputs`` outputs each
  (1: Q-values; TQC: quantiles), stacked as (batch, n_critics, n_outputs);
* ``OffPolicyActorCriticPolicy``: the policy object holding ``actor``, ``critic``, ``critic_target`` (and
  ``actor_target`` for TD3), their variable lists and the NumPy acting path; actions are in [-1, 1] and the model
  rescales them to the action space (``sbtf.common.math_util.unscale_action``);
* ``EntropyCoefficient``: SAC's / TQC's ``ent_coef`` (a number, or ``"auto"`` / ``"auto_<init>"`` learnt as
  ``log_ent_coef`` towards ``target_entropy``) and its update.

Variable names: ``model/actor/fc0/kernel:0``, ``model/actor/mu/...``, ``model/critic/qf0/fc0/...``,
``model/critic_target/...``, ``model/actor_target/...``.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

import gymnasium as gym
import keras
import numpy as np
import tensorflow as tf

from sbtf.common.input import check_obs_space
from sbtf.common.nn.network_ops import TF_OPS
from sbtf.common.optimizers import TorchAdam
from sbtf.common.policies import BasePolicy
from sbtf.common.nn.sde import SDE_EPSILON, ExplorationNoise, SDELogStd, gaussian_log_prob, sde_log_std, sde_std
from sbtf.sb3.common.networks import (FeaturesExtractor, Mlp, TorchLinear, actor_critic_arch,
                                          resolve_extractor_class)

# CAP the standard deviation of the actor
LOG_STD_MAX = 2
LOG_STD_MIN = -20

_HALF_LOG_2PI = 0.5 * np.log(2.0 * np.pi)


def squashed_gaussian_sample(mean, log_std, noise):
    """
    sb3's ``SquashedDiagGaussianDistribution``: ``action = tanh(mean + std * noise)`` and its log-probability
    ``sum(log N(x; mean, std)) - sum(log(1 - action^2 + 1e-6))`` (TF).

    :return: (action (batch, n), log_prob (batch,))
    """
    gaussian = mean + tf.exp(log_std) * noise
    action = tf.tanh(gaussian)
    log_prob = tf.reduce_sum(-0.5 * tf.square(noise) - log_std - _HALF_LOG_2PI, axis=-1)
    log_prob -= tf.reduce_sum(tf.math.log(1.0 - tf.square(action) + 1e-6), axis=-1)
    return action, log_prob


def squashed_sde_sample(mean, latent, std, noise):
    """
    sb3's gSDE ``StateDependentNoiseDistribution`` with ``squash_output=True, learn_features=True``: the exploration
    matrix ``E = std * noise`` (differentiable in ``log_std``, sb3's ``rsample``), the action
    ``tanh(mean + latent @ E)`` and its log-probability under ``N(mean, sqrt(latent**2 @ std**2 + 1e-6))`` with the
    tanh correction ``- sum(log(1 - action^2 + 1e-6))`` (TF).

    :param noise: (latent_dim, action_dim) standard normal draws (one matrix for the whole batch, as sb3 in training)
    :return: (action (batch, n), log_prob (batch,))
    """
    gaussian = mean + tf.matmul(latent, std * noise)
    action = tf.tanh(gaussian)
    log_prob = gaussian_log_prob(gaussian, mean, sde_log_std(latent, std))
    log_prob -= tf.reduce_sum(tf.math.log(1.0 - tf.square(action) + SDE_EPSILON), axis=-1)
    return action, log_prob


class SquashedGaussianActor(keras.layers.Layer):
    """
    sb3's SAC ``Actor`` (and sb3-contrib's TQC one): features, ``latent_pi`` MLP, ``mu`` and ``log_std`` heads; with
    gSDE (``use_sde``) the ``log_std`` head is the free gSDE parameter ``actor/log_std`` (latent_dim, action_dim or 1,
    ``sbtf.common.nn.sde``) and the mean is clipped to [-clip_mean, clip_mean] (sb3's Hardtanh; 0: no clip).
    """

    def __init__(self, observation_space: gym.Space, action_dim: int, net_arch: List[int], activation_fn,
                 extractor: type, normalize_images: bool, features_extractor_kwargs, use_sde: bool = False,
                 log_std_init: float = -3.0, full_std: bool = True, use_expln: bool = False, clip_mean: float = 2.0,
                 features_extractor: Optional[FeaturesExtractor] = None, **kwargs):
        super().__init__(name=kwargs.pop("name", "actor"), **kwargs)
        self.features_extractor = features_extractor or FeaturesExtractor(
            "actor/features_extractor", observation_space, extractor, normalize_images, features_extractor_kwargs)
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

    def sample(self, obs, noise):
        """A squashed sample for the standard normal draws ``noise`` (batch x action_dim; gSDE: one matrix
        latent_dim x action_dim) and its log-probability (TF): sb3's ``action_log_prob``."""
        if self.use_sde:
            return squashed_sde_sample(*self.sde(obs), noise)
        return squashed_gaussian_sample(*self.mean_log_std(obs), noise)

    def noise_shape(self, obs):
        """The shape of the standard normal draws ``sample`` takes for ``obs``."""
        if self.use_sde:
            return tf.shape(self.sde(obs)[2])
        return tf.shape(self.mean_log_std(obs)[0])

    def deterministic(self, obs):
        """``tanh(mu)`` (TF)."""
        return tf.tanh(self.mean_log_std(obs)[0])

    def call(self, obs):
        return self.mean_log_std(obs)

    def named_layers(self) -> list:
        return self.features_extractor.named_layers() + self.latent_pi.named_layers() + [self.mu, self.log_std]


class DeterministicActor(keras.layers.Layer):
    """sb3's TD3 ``Actor``: features, MLP ``<scope>/fc{i}``, linear ``<scope>/out`` of ``action_dim`` units, tanh."""

    def __init__(self, scope: str, observation_space: gym.Space, action_dim: int, net_arch: List[int],
                 activation_fn, extractor: type, normalize_images: bool, features_extractor_kwargs, **kwargs):
        super().__init__(name=kwargs.pop("name", scope), **kwargs)
        self.scope = scope
        self.features_extractor = FeaturesExtractor(f"{scope}/features_extractor", observation_space, extractor,
                                                    normalize_images, features_extractor_kwargs)
        self.mu = Mlp(scope, net_arch, activation_fn, int(action_dim))

    def build(self, input_shape):
        """The sublayers build themselves on the first call (their shapes follow from the data)."""
        self.built = True

    def pre_tanh(self, obs, ops=TF_OPS):
        """The output before the tanh (in ``ops``)."""
        return ops.layer(self.mu, self.features_extractor.ops_call(obs, ops))

    def call(self, obs):
        return tf.tanh(self.pre_tanh(obs))

    def named_layers(self) -> list:
        return self.features_extractor.named_layers() + self.mu.named_layers()


class ContinuousCritic(keras.layers.Layer):
    """
    sb3's ``ContinuousCritic``: ``n_critics`` networks ``<scope>/qf{i}`` on ``concat[features, action]`` with
    ``n_outputs`` outputs each (1: Q-values; TQC: its quantiles).

    :param features_extractor: the actor's features extractor to share (its variables are the actor's: the critic's
        gradient does not reach them, as sb3's ``share_features_extractor=True``); None: its own
    """

    def __init__(self, scope: str, observation_space: gym.Space, net_arch: List[int], activation_fn, extractor: type,
                 normalize_images: bool, features_extractor_kwargs, n_outputs: int, n_critics: int,
                 features_extractor: Optional[FeaturesExtractor] = None, **kwargs):
        super().__init__(name=kwargs.pop("name", scope), **kwargs)
        self.scope = scope
        self.n_outputs = int(n_outputs)
        self.n_critics = int(n_critics)
        self.shares_features = features_extractor is not None
        self.features_extractor = features_extractor if features_extractor is not None else FeaturesExtractor(
            f"{scope}/features_extractor", observation_space, extractor, normalize_images, features_extractor_kwargs)
        self.q_networks = [Mlp(f"{scope}/qf{i}", net_arch, activation_fn, self.n_outputs)
                           for i in range(self.n_critics)]

    def build(self, input_shape):
        """The sublayers build themselves on the first call (their shapes follow from the data)."""
        self.built = True

    def _inputs(self, obs, action):
        features = self.features_extractor(obs)
        if self.shares_features:
            features = tf.stop_gradient(features)
        return tf.concat([features, action], axis=-1)

    def outputs(self, obs, action) -> tf.Tensor:
        """(batch, n_critics, n_outputs): every network's outputs for (obs, action), action in [-1, 1]."""
        inputs = self._inputs(obs, action)
        return tf.stack([qf(inputs) for qf in self.q_networks], axis=1)

    def q_values(self, obs, action) -> tf.Tensor:
        """(batch, n_critics): the Q-values of single-output critics."""
        return self.outputs(obs, action)[..., 0]

    def q1_forward(self, obs, action) -> tf.Tensor:
        """(batch,): the first network's Q-value (sb3's ``q1_forward``, TD3's actor loss)."""
        return self.q_networks[0](self._inputs(obs, action))[..., 0]

    def call(self, inputs):
        return self.outputs(*inputs)

    def named_layers(self) -> list:
        own = [] if self.shares_features else self.features_extractor.named_layers()
        return own + [layer for qf in self.q_networks for layer in qf.named_layers()]


def _variables(layers) -> list:
    return [var for layer in layers for _, var in layer.named_variables()]


class OffPolicyActorCriticPolicy(BasePolicy):
    """
    The policy object of sb3's continuous off-policy algorithms (``SACPolicy``, ``TD3Policy``, TQC's
    ``TQCPolicy``): ``actor``, ``critic``, ``critic_target`` (and ``actor_target`` with ``_actor_kind =
    "deterministic"``). Subclasses set ``_actor_kind``, ``_default_net_arch`` and ``_critic_outputs``.

    :param observation_space: (gymnasium.Space) Observation space
    :param action_space: (gymnasium.spaces.Box) Action space
    :param net_arch: ([int] or dict) hidden layers of the actor and the critics, or ``dict(pi=[...], qf=[...])``
    :param activation_fn: (callable or str) activation of the hidden layers (a TF / Keras activation; default ReLU)
    :param features_extractor_class: (type) a Keras layer class with a ``features_dim`` (``sbtf.common.extractors``)
        or a built-in one's name
    :param features_extractor_kwargs: (dict) its keyword arguments
    :param normalize_images: (bool) divide uint8 images by 255
    :param optimizer_class: (None or "Adam") PyTorch's Adam (sb3's default)
    :param optimizer_kwargs: (dict) the optimizer's ``eps`` / ``betas``
    :param n_critics: (int) number of critic networks
    :param share_features_extractor: (bool) the critic uses the actor's features extractor (trained by the actor)
    :param actor_kwargs: the squashed Gaussian actor's gSDE options (``use_sde``, ``log_std_init``, ``use_expln``,
        ``clip_mean``, ``full_std``)
    """

    #: "squashed_gaussian" (SAC, TQC) or "deterministic" (TD3, DDPG: with ``actor_target``)
    _actor_kind = "squashed_gaussian"
    _default_extractor = "FlattenExtractor"
    #: the hidden layers when ``net_arch`` is None
    _default_net_arch: List[int] = [256, 256]
    #: the algorithm's name in error messages
    _algo_name = "SAC"

    def __init__(self, observation_space: gym.Space, action_space: gym.Space,
                 net_arch: Union[List[int], Dict[str, List[int]], None] = None, activation_fn=tf.nn.relu,
                 features_extractor_class=None, features_extractor_kwargs: Optional[Dict[str, Any]] = None,
                 normalize_images: bool = True, optimizer_class=None, optimizer_kwargs: Optional[Dict[str, Any]] = None,
                 n_critics: int = 2, share_features_extractor: bool = False, critic_outputs: int = 1,
                 **actor_kwargs):
        super().__init__(None, observation_space, action_space)
        if not isinstance(action_space, gym.spaces.Box):
            raise NotImplementedError(f"Error: {self._algo_name} policies need a Box action space, got "
                                      f"{action_space!r}.")
        check_obs_space(observation_space, self._algo_name, allow_dict=True)
        if int(n_critics) < 1:
            raise ValueError(f"Error: n_critics must be >= 1, got {n_critics}.")
        extractor = resolve_extractor_class(features_extractor_class, self._default_extractor)
        if net_arch is None:
            net_arch = list(self._default_net_arch) if extractor.__name__ != "NatureCNN" else [256, 256]
        actor_arch, critic_arch = actor_critic_arch(net_arch)
        self.net_arch = net_arch
        self.activation_fn = activation_fn
        self.features_extractor_class = extractor
        self.features_extractor_kwargs = dict(features_extractor_kwargs or {})
        self.normalize_images = bool(normalize_images)
        self.optimizer_class = optimizer_class
        self.optimizer_kwargs = dict(optimizer_kwargs or {})
        self.n_critics = int(n_critics)
        self.share_features_extractor = bool(share_features_extractor)
        self.n_act = int(np.prod(action_space.shape))
        self.layer_sizes = list(actor_arch) + list(critic_arch)
        self.use_sde = bool(actor_kwargs.get("use_sde", False))
        #: the gSDE exploration matrices (the acting state; None without gSDE)
        self.sde_noise = ExplorationNoise(self.np_random) if self.use_sde else None
        ext_args = (extractor, self.normalize_images, features_extractor_kwargs)

        self.actor_target = None
        if self._actor_kind == "deterministic":
            if actor_kwargs:
                raise ValueError(f"Error: {self._algo_name} policies do not take {sorted(actor_kwargs)}.")
            self.actor = DeterministicActor("actor", observation_space, self.n_act, actor_arch, activation_fn,
                                            *ext_args)
            self.actor_target = DeterministicActor("actor_target", observation_space, self.n_act, actor_arch,
                                                   activation_fn, *ext_args)
        else:
            self.actor = SquashedGaussianActor(observation_space, self.n_act, actor_arch, activation_fn, *ext_args,
                                               **actor_kwargs)
        critic_args = (observation_space, critic_arch, activation_fn, *ext_args, int(critic_outputs), self.n_critics)
        #: "mlp" when the extractor is sbtf's flattening (the XLA choice, sbtf's off-policy convention)
        self.feature_extraction = "mlp" if self.actor.features_extractor.xla_friendly else "cnn"
        shared = self.actor.features_extractor if self.share_features_extractor else None
        self.critic = self._make_critic("critic", critic_args, shared)
        self.critic_target = self._make_critic("critic_target", critic_args, None)
        dummy_obs = tf.zeros((1,) + self.obs_shape, tf.as_dtype(self.obs_dtype))
        dummy_act = tf.zeros((1, self.n_act), tf.float32)
        self.actor(dummy_obs)
        self.critic((dummy_obs, dummy_act))
        self.critic_target((dummy_obs, dummy_act))
        for target, source in zip(self.critic_target_variables(), self.critic_variables(with_shared=True)):
            target.assign(source)
        if self.actor_target is not None:
            self.actor_target(dummy_obs)
            for target, source in zip(self.actor_target_variables(), self.actor_variables()):
                target.assign(source)
        self._acting = self._new_acting_path(self._acting_functions())  # new: reads the weights when first used

    def _make_critic(self, scope: str, critic_args: tuple, shared) -> ContinuousCritic:
        return ContinuousCritic(scope, *critic_args, features_extractor=shared)

    def _acting_functions(self) -> dict:
        signature = [self.obs_signature()]
        if self._actor_kind == "deterministic":
            return {"pre_tanh": (lambda ops, obs: self.actor.pre_tanh(obs, ops), signature)}
        functions = {"mean_log_std": (lambda ops, obs: self.actor.mean_log_std(obs, ops), signature)}
        if self.use_sde:
            functions["sde"] = (lambda ops, obs: self.actor.sde(obs, ops), signature)
        return functions

    # ------------------------------------------------------------------ parameters
    def _parameter_layers(self) -> list:
        layers = self.actor.named_layers() + self.critic.named_layers() + self.critic_target.named_layers()
        if self.actor_target is not None:
            layers += self.actor_target.named_layers()
        return layers

    def actor_variables(self) -> list:
        """The actor's variables (what the actor's optimizer trains)."""
        return _variables(self.actor.named_layers())

    def actor_target_variables(self) -> list:
        """The target actor's variables, paired with ``actor_variables()`` (TD3 / DDPG)."""
        return [] if self.actor_target is None else _variables(self.actor_target.named_layers())

    def critic_variables(self, with_shared: bool = False) -> list:
        """
        The critic's variables (what the critic's optimizer trains).

        :param with_shared: include the features extractor shared with the actor (to pair with the target's)
        """
        layers = self.critic.named_layers()
        if with_shared and self.critic.shares_features:
            layers = self.critic.features_extractor.named_layers() + layers
        return _variables(layers)

    def critic_target_variables(self) -> list:
        """The target critic's variables, paired with ``critic_variables(with_shared=True)``."""
        return _variables(self.critic_target.named_layers())

    # ------------------------------------------------------------------ maths
    def call(self, inputs, training=None):
        if self._actor_kind == "deterministic":
            return self.actor(inputs)
        return tf.tanh(self.actor.mean_log_std(inputs)[0])

    def actor_mean_log_std_np(self, obs):
        """The squashed Gaussian actor's mean and log-std (NumPy, through the acting path)."""
        return self._acting("mean_log_std", self._prepare_obs(obs))

    def sde_std_matrix(self) -> np.ndarray:
        """The std of the gSDE exploration matrices (latent_dim, n_act), NumPy."""
        return np.asarray(self._acting("sde", np.zeros((1,) + self.obs_shape, self.obs_dtype))[2])

    def reset_noise(self, n_envs: int = 1) -> None:
        """Sample new gSDE exploration matrices (sb3's ``reset_noise``)."""
        if self.sde_noise is None:
            raise ValueError("Error: reset_noise() is only available when using gSDE (use_sde=True).")
        self.sde_noise.reset(self.sde_std_matrix(), n_envs)

    def step(self, obs, state=None, mask=None, deterministic=False) -> np.ndarray:
        """
        Actions in [-1, 1]. Squashed Gaussian actor: ``tanh(mu)`` (deterministic) or ``tanh(mu + std * N(0, 1))``;
        with gSDE ``tanh(mu + latent @ E)`` (``E`` the current exploration matrix,
        ``sbtf.common.nn.sde.ExplorationNoise``). Deterministic actor: its output (exploration noise is the model's).
        """
        if self._actor_kind == "deterministic":
            return np.tanh(self._acting("pre_tanh", self._prepare_obs(obs)))
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
        if self._actor_kind == "deterministic":
            raise NotImplementedError(f"{self._algo_name}'s deterministic actor has no action distribution.")
        mean, log_std = self.actor_mean_log_std_np(obs)
        return [mean, np.exp(log_std)]

    def squashed_action_tf(self, obs) -> tf.Tensor:
        """The deterministic action in [-1, 1] (TF): export and behaviour cloning."""
        if self._actor_kind == "deterministic":
            return self.actor(obs)
        return self.actor.deterministic(obs)


class EntropyCoefficient:
    """
    SAC's and TQC's entropy coefficient (sb3's ``ent_coef`` / ``target_entropy`` arguments).

    :param ent_coef: a number (fixed), ``"auto"`` (learnt, initial value 1) or ``"auto_<init>"`` (e.g.
        ``"auto_0.1"``)
    :param target_entropy: ``"auto"`` (``-dim(action space)``) or a number
    :param action_space: the Box action space
    """

    def __init__(self, ent_coef: Union[str, float], target_entropy: Union[str, float], action_space: gym.Space):
        if isinstance(target_entropy, str):
            if target_entropy != "auto":
                raise ValueError(f"Error: target_entropy must be 'auto' or a number, got {target_entropy!r}.")
            self.target_entropy = float(-np.prod(action_space.shape).astype(np.float32))
        else:
            self.target_entropy = float(target_entropy)
        self.log_ent_coef: Optional[tf.Variable] = None
        self.optimizer: Optional[TorchAdam] = None
        self.fixed: Optional[float] = None
        if isinstance(ent_coef, str):
            if not ent_coef.startswith("auto"):
                raise ValueError(f"Error: ent_coef must be a number, 'auto' or 'auto_<initial value>', got "
                                 f"{ent_coef!r}.")
            init_value = 1.0
            if "_" in ent_coef:
                try:
                    init_value = float(ent_coef.split("_")[1])
                except ValueError:
                    raise ValueError(f"Error: ent_coef {ent_coef!r}: the initial value after 'auto_' must be a "
                                     "number.") from None
                if not init_value > 0.0:
                    raise ValueError("Error: the initial value of ent_coef must be greater than 0")
            self.log_ent_coef = tf.Variable(np.float32(np.log(init_value)), name="log_ent_coef")
            self.optimizer = TorchAdam([self.log_ent_coef], name="ent_coef_adam")
        else:
            self.fixed = float(ent_coef)

    @property
    def learnt(self) -> bool:
        """Whether the coefficient is learnt (``ent_coef="auto..."``)."""
        return self.log_ent_coef is not None

    def update(self, log_prob, lr):
        """
        One step of sb3's entropy update (TF, inside a train step): the loss
        ``-mean(log_ent_coef * stop_gradient(log_prob + target_entropy))`` minimised with ``lr``.

        :return: (the coefficient for this gradient step: the value before the update, as sb3; the loss, or None
            when the coefficient is fixed)
        """
        if self.log_ent_coef is None:
            return tf.constant(self.fixed, tf.float32), None
        ent_coef = tf.stop_gradient(tf.exp(self.log_ent_coef))
        with tf.GradientTape() as tape:
            loss = -tf.reduce_mean(self.log_ent_coef * tf.stop_gradient(log_prob + self.target_entropy))
        self.optimizer.apply(tape.gradient(loss, [self.log_ent_coef]), lr)
        return ent_coef, loss


def draw_actor_noise(actor: SquashedGaussianActor, obs, seeds):
    """
    The standard normal draws of one gradient step (stateless, from the step's ``seeds`` pair): for the state and
    for the next state; with gSDE one exploration matrix for both (sb3's ``reset_noise`` per gradient step).
    """
    seed = tf.cast(seeds, tf.int32)
    noise = tf.random.stateless_normal(actor.noise_shape(obs), seed=seed)
    if actor.use_sde:
        return noise, noise
    return noise, tf.random.stateless_normal(tf.shape(noise), seed=seed + 1)


def entropy_regularised_update(actor: SquashedGaussianActor, entropy: "EntropyCoefficient", batch: dict,
                               target_fn, critic_loss_fn, actor_value_fn, critic_optimizer, critic_vars: list,
                               actor_optimizer, actor_vars: list) -> list:
    """
    One gradient step of SAC and TQC (TF, inside a train step), in sb3's order: the entropy coefficient update (its
    value before the update is used below), the critic update towards ``target_fn(batch, next_actions,
    ent_coef * next_log_prob)`` (no gradient), the actor update ``mean(ent_coef * log_prob - actor_value_fn(obs,
    actions_pi))`` against the updated critic. The target networks are the caller's.

    :param batch: the step's tensors: obs, next_obs, actions, rewards, dones, learning_rate, seeds
    :param target_fn: (batch, next_actions, entropy_term) -> the critic's regression target
    :param critic_loss_fn: (obs, actions, target) -> the critic loss
    :param actor_value_fn: (obs, actions) -> (batch,) the value the actor maximises
    :return: [actor_loss, critic_loss, ent_coef] (+ ent_coef_loss when the coefficient is learnt)
    """
    obs, next_obs, lr = batch["obs"], batch["next_obs"], batch["learning_rate"]
    noise, next_noise = draw_actor_noise(actor, obs, batch["seeds"])
    # one forward pass of the actor on obs serves the entropy update and the actor loss (as sb3): the actor does not
    # change in between, only the entropy coefficient and the critic, whose updates the actor's tape does not record
    with tf.GradientTape() as actor_tape:
        actions_pi, log_prob = actor.sample(obs, noise)
        with actor_tape.stop_recording():
            ent_coef, ent_coef_loss = entropy.update(log_prob, lr)
            next_actions, next_log_prob = actor.sample(next_obs, next_noise)
            target = tf.stop_gradient(target_fn(batch, next_actions, ent_coef * next_log_prob))
            with tf.GradientTape() as tape:
                critic_loss = critic_loss_fn(obs, batch["actions"], target)
            critic_optimizer.apply(tape.gradient(critic_loss, critic_vars), lr)
        actor_loss = tf.reduce_mean(ent_coef * log_prob - actor_value_fn(obs, actions_pi))
    actor_optimizer.apply(actor_tape.gradient(actor_loss, actor_vars), lr)
    stats = [actor_loss, critic_loss, ent_coef]
    if ent_coef_loss is not None:
        stats.append(ent_coef_loss)
    return stats


__all__ = ["LOG_STD_MIN", "LOG_STD_MAX", "squashed_gaussian_sample", "squashed_sde_sample", "SquashedGaussianActor",
           "DeterministicActor", "ContinuousCritic", "OffPolicyActorCriticPolicy", "EntropyCoefficient",
           "draw_actor_noise", "entropy_regularised_update"]
