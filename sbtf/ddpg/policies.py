"""DDPG policies (stable-baselines 2.x ``ddpg/policies.py``) as Keras models.

``make_actor()`` creates the deterministic actor ``pi/``: hidden layers ``fc{i}`` [+ ``LayerNorm{_i}``] with the
activation, then the output dense layer named ``pi`` followed by tanh (actions in [-1, 1]). ``make_critic()`` creates
the critic ``qf/``: ``fc0`` [+ LN] + activation, then the action is concatenated, then ``fc1`` ... and the linear
output ``qf_output`` (so ``qf/fc1/kernel`` is ``(l0 + n_act, l1)``). Both output layers start from
``uniform(-3e-3, 3e-3)`` kernels, as SB2.

The networks read *normalised* observations: DDPG computes ``clip((processed_obs - mean) / std, observation_range)``
(``obs_rms`` statistics, or none) and feeds that to ``actor(norm_obs)`` / ``critic(norm_obs, action)``; the policy
gets the normalisation from its model through ``set_obs_normalization`` so that ``step(obs)`` takes raw observations
like SB2's ``policy.step``. The actor and the critic are written once (``actor_network`` / ``critic_network``, against a
backend ``ops``); acting (``step``, ``value``) runs them through the policy's acting paths: in NumPy on copies of the
weights for Mlp policies (``actor_np`` / ``critic_np`` on normalised observations), else through one compiled TF call.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import tensorflow as tf

from sbtf.common.nn.box_actor_critic_policy import BoxActorCriticPolicy, make_actor_critic_policies
from sbtf.common.input import preprocess_obs_np
from sbtf.common.policies import nature_cnn, register_policy_base
from sbtf.common.nn.network_ops import TF_OPS, NumpyOps
from sbtf.common.nn.off_policy_networks import (ActorCriticLayers, image_scaling, init_sb3_settings, multi_input_kwargs,
                                             preprocess_ops, resolve_off_policy_arch)
from sbtf.common.tf_layers import Dense, LayerNorm, sb2_layer_norm_scope


def _uniform_init(limit: float) -> Callable:
    """``tf.random_uniform_initializer(-limit, limit)`` drawn with NumPy's global RNG (seeded by set_global_seeds)."""

    def _init(shape: Sequence[int], dtype=None, **_kwargs) -> np.ndarray:
        return np.random.uniform(-limit, limit, tuple(int(s) for s in shape)).astype(np.float32)

    return _init


class DDPGPolicy(BoxActorCriticPolicy):
    """
    Policy object that implements a DDPG-like actor critic (the arguments of ``BoxActorCriticPolicy``; its
    networks read normalised observations)
    """

    algo_name = "DDPG"

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, reuse=False,
                 scale=False):
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, reuse=reuse, scale=scale)
        self.qvalue_fn = None
        self.policy = None

    def make_critic(self, obs=None, action=None, reuse=False, scope="qf"):
        """
        Creates a critic object

        :param obs: (TensorFlow Tensor) a batch of normalised observations (None: only create the variables)
        :param action: (TensorFlow Tensor) a batch of actions in [-1, 1]
        :param reuse: (bool) ignored (TF2)
        :param scope: (str) the scope name of the critic
        :return: (TensorFlow Tensor) the output tensor
        """
        raise NotImplementedError

    def value(self, obs, action, state=None, mask=None):
        """
        Returns the value for a single step

        :param obs: ([float] or [int]) The current observation of the environment
        :param action: ([float]) The taken action (in [-1, 1])
        :param state: ([float]) The last states (used in recurrent policies)
        :param mask: ([float]) The last masks (used in recurrent policies)
        :return: ([float]) The associated value of the action
        """
        raise NotImplementedError


class FeedForwardPolicy(ActorCriticLayers, DDPGPolicy):
    """
    Policy object that implements a DDPG-like actor critic, using a feed forward neural network.

    :param sess: (None) kept for SB2 compatibility
    :param ob_space: (gymnasium.Space) The observation space of the environment
    :param ac_space: (gymnasium.Space) The action space of the environment
    :param n_env: (int) The number of environments to run
    :param n_steps: (int) The number of steps to run for each environment
    :param n_batch: (int) The number of batch to run (n_envs * n_steps)
    :param reuse: (bool) ignored (TF2)
    :param layers: ([int]) The size of the Neural network for the policy (if None, default to [64, 64])
    :param cnn_extractor: (callable) the CNN feature extraction (returns a Keras layer, see ``nature_cnn``)
    :param feature_extraction: (str) The feature extraction type ("cnn" or "mlp")
    :param layer_norm: (bool) enable layer normalisation
    :param act_fun: (tf.func) the activation function to use in the neural network.
    :param net_arch: ([int] or dict) SB3's layer sizes: ``[400, 300]`` for the actor and the critic, or
        ``dict(pi=[...], qf=[...])``; instead of ``layers`` (the critic needs one hidden layer: the action joins after
        it, as in SB2)
    :param activation_fn: SB3's name of ``act_fun`` (a TF/Keras function, a name, or a Keras layer class)
    :param n_critics: (int) DDPG has one critic (SB3 passes ``n_critics=1``); only 1 is accepted
    :param share_features_extractor: (bool) the critic uses the actor's feature extractor (SB3's default False)
    :param normalize_images: (bool) rescale image observations to [0, 1] (None: SB2's rule, CNN policies do)
    :param features_extractor_class: (type) SB3's feature extractor: a Keras layer class with a ``features_dim``,
        built as ``features_extractor_class(ob_space, **features_extractor_kwargs)`` for the actor and (unless
        shared) the critics, variables ``<scope>/features_extractor/...``; replaces SB2's CNN / flattening
    :param features_extractor_kwargs: (dict) its keyword arguments
    :param kwargs: (dict) Extra keyword arguments for the nature CNN feature extraction
    """

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, reuse=False,
                 layers=None, cnn_extractor=nature_cnn, feature_extraction="cnn", layer_norm=False,
                 act_fun=tf.nn.relu, net_arch=None, activation_fn=None, n_critics=1, share_features_extractor=False,
                 normalize_images=None, features_extractor_class=None, features_extractor_kwargs=None, **kwargs):
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, reuse=reuse,
                         scale=image_scaling(ob_space, feature_extraction, normalize_images,
                                             features_extractor_class))
        init_sb3_settings(self, "DDPG", net_arch, normalize_images, features_extractor_class,
                          features_extractor_kwargs)
        if n_critics != 1:
            raise ValueError(f"Error: DDPG has one critic; n_critics={n_critics!r} needs TD3 (or SAC).")
        arch = resolve_off_policy_arch(
            "DDPG", type(self), self.obs_shape, layers=layers, net_arch=net_arch,
            feature_extraction=feature_extraction, act_fun=act_fun, activation_fn=activation_fn, n_critics=1,
            share_features_extractor=share_features_extractor, cnn_extractor=cnn_extractor, cnn_kwargs=kwargs,
            features_extractor_class=features_extractor_class)
        if not arch.critic_sizes:
            raise ValueError("Error: DDPG's critic needs at least one hidden layer (the action joins after the first).")
        self.layer_sizes = arch.actor_sizes
        self.qf_layer_sizes = arch.critic_sizes
        self.share_features_extractor = arch.share_features_extractor
        self.feature_extraction = feature_extraction
        self.cnn_kwargs = kwargs
        self.cnn_extractor = cnn_extractor
        self.layer_norm = bool(layer_norm)
        self.activ = arch.act_fun
        self.act_fun = arch.act_fun
        self.n_act = int(np.prod(self.ac_space.shape))
        # the observation normalisation of the owning model (set_obs_normalization); kept out of Keras tracking
        self.__dict__["_norm"] = None
        self.__dict__["_obs_range"] = (-5.0, 5.0)
        # networks (created by make_actor / make_critic)
        self.actor_scope = None
        self.critic_scope = None
        self._actor_named: list = []
        self._critic_named: list = []
        self.actor_cnn = None
        self.actor_dense: list = []
        self.actor_norms: list = []
        self.actor_out = None
        self.critic_cnn = None
        self.critic_dense: list = []
        self.critic_norms: list = []
        self.critic_out = None
        self._actor_path = None
        self._critic_path = None

    # ------------------------------------------------------------------ construction
    def _dummy_input(self):
        return self.preprocess(tf.zeros((1,) + self.obs_shape, tf.as_dtype(self.obs_dtype)))

    @staticmethod
    def _features(ops, norm_obs, cnn):
        if cnn is not None:
            return ops.layer(cnn, norm_obs)
        return ops.flatten(norm_obs)

    def _make_hidden(self, scope: str, dense_layers: list, norms: list, named: list, sizes: Sequence[int]) -> None:
        """Create the hidden stack ``<scope>/fc{i}`` [+ ``<scope>/LayerNorm{_i}``] into the given lists."""
        for i, size in enumerate(sizes):
            dense = Dense(f"{scope}/fc{i}", size)
            dense_layers.append(dense)
            named.append(dense)
            if self.layer_norm:
                norm = LayerNorm(f"{scope}/{sb2_layer_norm_scope(i)}")
                norms.append(norm)
                named.append(norm)

    def make_actor(self, obs=None, reuse=False, scope="pi"):
        if self.actor_out is None:
            self.actor_scope = scope
            self._actor_extractor(scope)
            self._make_hidden(scope, self.actor_dense, self.actor_norms, self._actor_named, self.layer_sizes)
            self.actor_out = Dense(f"{scope}/{scope}", self.n_act, kernel_initializer=_uniform_init(3e-3))
            self._actor_named.append(self.actor_out)
            self.actor(self._dummy_input())
            self._make_acting_paths()
        if obs is None:
            return None
        self.policy = self.actor(obs)
        return self.policy

    def make_critic(self, obs=None, action=None, reuse=False, scope="qf"):
        if self.critic_out is None:
            self.critic_scope = scope
            self.critic_cnn = self._critic_extractor(scope)
            self._make_hidden(scope, self.critic_dense, self.critic_norms, self._critic_named, self.qf_layer_sizes)
            self.critic_out = Dense(f"{scope}/qf_output", 1, kernel_initializer=_uniform_init(3e-3))
            self._critic_named.append(self.critic_out)
            self.critic(self._dummy_input(), tf.zeros((1, self.n_act), tf.float32))
            self._make_acting_paths()
        if obs is None or action is None:
            return None
        self.qvalue_fn = self.critic(obs, action)
        return self.qvalue_fn

    # ------------------------------------------------------------------ maths (normalised observations in)
    def _hidden(self, ops, x, dense_layers: list, norms: list, action=None):
        """The hidden stack (dense [+ LayerNorm] + activation); ``action`` is concatenated after the first layer."""
        act = ops.activation(self.act_fun)
        for i, dense in enumerate(dense_layers):
            x = ops.layer(dense, x)
            if self.layer_norm:
                x = ops.layer(norms[i], x)
            x = act(x)
            if i == 0 and action is not None:
                x = ops.concat([x, ops.as_float(action)])
        return x

    def actor_network(self, ops, norm_obs):
        """The deterministic action in [-1, 1] for a batch of normalised observations, in the backend ``ops``."""
        x = self._hidden(ops, self._features(ops, norm_obs, self.actor_cnn), self.actor_dense, self.actor_norms)
        return ops.tanh(ops.layer(self.actor_out, x))

    def critic_network(self, ops, norm_obs, action):
        """The critic's (normalised) Q-value, shape (batch, 1), of normalised observations and [-1, 1] actions."""
        features = self._features(ops, norm_obs, self.critic_cnn)
        if self.share_features_extractor and self.critic_cnn is not None and not ops.is_numpy:
            features = tf.stop_gradient(features)  # the actor's extractor, trained by the actor's loss only
        x = self._hidden(ops, features, self.critic_dense, self.critic_norms, action)
        return ops.layer(self.critic_out, x)

    def actor(self, norm_obs):
        """The deterministic action in [-1, 1] for a batch of normalised observations (TF)."""
        return self.actor_network(TF_OPS, norm_obs)

    def critic(self, norm_obs, action):
        """The critic's (normalised) Q-value, shape (batch, 1), of normalised observations and [-1, 1] actions (TF)."""
        return self.critic_network(TF_OPS, norm_obs, action)

    def call(self, inputs, training=None):
        return self.actor(self.normalize_obs_tf(inputs))

    # ------------------------------------------------------------------ observation normalisation
    def set_obs_normalization(self, stats, observation_range=(-5.0, 5.0)) -> None:
        """
        Use ``stats`` (an object with TF ``mean``/``std`` and NumPy ``mean_np()``/``std_np()``, or None) and the clip
        range for the observations the networks read (SB2: ``clip(normalize(processed_obs), observation_range)``).
        """
        self.__dict__["_norm"] = stats
        self.__dict__["_obs_range"] = (float(observation_range[0]), float(observation_range[1]))
        self._make_acting_paths()  # the compiled TF calls read the new statistics

    def normalize_obs_tf(self, obs):
        """``clip((preprocess(obs) - mean) / std, observation_range)`` in TF."""
        x = self.preprocess(obs)
        if self.dict_layout is not None:  # Dict observations: clipped key by key (no statistics: they need a Box)
            return {key: tf.clip_by_value(value, self._obs_range[0], self._obs_range[1]) for key, value in x.items()}
        if self._norm is not None:
            x = (x - self._norm.mean) / self._norm.std
        return tf.clip_by_value(x, self._obs_range[0], self._obs_range[1])

    def normalize_obs(self, ops, obs):
        """``normalize_obs_tf`` or ``normalize_obs_np``, by backend."""
        return self.normalize_obs_np(obs) if ops.is_numpy else self.normalize_obs_tf(obs)

    def normalize_obs_np(self, obs: np.ndarray) -> np.ndarray:
        """``normalize_obs_tf`` in NumPy (float32)."""
        if self.dict_layout is not None:
            low, high = np.float32(self._obs_range[0]), np.float32(self._obs_range[1])
            return {key: np.clip(value, low, high).astype(np.float32, copy=False)
                    for key, value in preprocess_ops(self, obs, NumpyOps({}, {})).items()}
        x = preprocess_obs_np(obs, self.ob_space, self.scale)
        if self._norm is not None:
            x = (x - self._norm.mean_np()) / self._norm.std_np()
        return np.clip(x, np.float32(self._obs_range[0]), np.float32(self._obs_range[1])).astype(np.float32,
                                                                                                  copy=False)

    # ------------------------------------------------------------------ parameters
    def perturbable_mask(self) -> list:
        """For each actor variable: whether parameter noise perturbs it (SB2: all trainable ones but LayerNorm)."""
        return [not isinstance(layer, LayerNorm) for layer in self._actor_named for _ in layer.named_variables()]

    def qf_output_variables(self) -> tuple:
        """(kernel, bias) of ``qf_output`` (Pop-Art rescales them)."""
        return self.critic_out.kernel, self.critic_out.bias

    # ------------------------------------------------------------------ acting paths
    def _make_acting_paths(self) -> None:
        """The actor's acting path (``step``), carried by train steps, and the critic's (``value``), which refreshes
        itself when used; both on raw observations (the normalisation is part of the acting functions)."""
        obs_spec = self.obs_signature()
        if self.actor_out is not None:
            self._actor_path = self._new_acting_path(
                {"actor": (lambda ops, obs: self.actor_network(ops, self.normalize_obs(ops, obs)), [obs_spec])})
        if self.critic_out is not None:
            action_spec = tf.TensorSpec((None, self.n_act), tf.float32)
            self._critic_path = self._new_acting_path(
                {"value": (lambda ops, obs, action:
                           self.critic_network(ops, self.normalize_obs(ops, obs), action)[:, 0],
                           [obs_spec, action_spec])},
                install_from_train_steps=False)

    def acting_paths(self) -> list:
        return [path for path in (self._actor_path, self._critic_path) if path is not None]

    @property
    def acts_in_numpy(self) -> bool:
        return self._actor_path is not None and self._actor_path.uses_numpy

    def actor_np(self, norm_obs: np.ndarray) -> np.ndarray:
        """``actor`` in NumPy (policies that act in NumPy): actions in [-1, 1] for normalised observations."""
        return self.actor_network(self._numpy_ops(self._actor_path), norm_obs)

    def critic_np(self, norm_obs: np.ndarray, action: np.ndarray) -> np.ndarray:
        """``critic`` in NumPy (policies that act in NumPy): normalised Q-values, shape (batch, 1)."""
        return self.critic_network(self._numpy_ops(self._critic_path), norm_obs, np.asarray(action, np.float32))

    @staticmethod
    def _numpy_ops(path):
        ops = path.numpy_ops()
        if ops is None:
            raise ValueError("Error: this policy acts through TF (no NumPy form of its layers)")
        return ops

    def actor_from_obs(self, obs) -> np.ndarray:
        """Actions in [-1, 1] for a batch of raw observations (normalisation included), NumPy or one TF call."""
        return self._actor_path("actor", self._prepare_obs(obs))

    def step(self, obs, state=None, mask=None):
        return self.actor_from_obs(obs)

    def value(self, obs, action, state=None, mask=None):
        obs = self._prepare_obs(obs)
        action = np.asarray(action, np.float32).reshape((-1, self.n_act))
        return self._critic_path("value", obs, action)


CnnPolicy, LnCnnPolicy, MlpPolicy, LnMlpPolicy = make_actor_critic_policies(FeedForwardPolicy, __name__)


class MultiInputPolicy(FeedForwardPolicy):
    """
    DDPG policy for Dict observations (SB3's ``MultiInputPolicy``): a ``CombinedExtractor`` (a NatureCNN per image
    key, the other keys flattened) for the actor and for the critic, then ``net_arch`` (SB3's default [400, 300]).

    :param _kwargs: (dict) the policy_kwargs (SB3's and SB2's, see ``FeedForwardPolicy``)
    """

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, reuse=False,
                 **_kwargs):
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, reuse, feature_extraction="mlp",
                         **multi_input_kwargs("DDPG", _kwargs))

register_policy_base(DDPGPolicy, {
    "CnnPolicy": CnnPolicy,
    "LnCnnPolicy": LnCnnPolicy,
    "MlpPolicy": MlpPolicy,
    "LnMlpPolicy": LnMlpPolicy,
    "MultiInputPolicy": MultiInputPolicy,
})

__all__ = ["DDPGPolicy", "FeedForwardPolicy", "CnnPolicy", "LnCnnPolicy", "MlpPolicy", "LnMlpPolicy",
           "MultiInputPolicy"]
