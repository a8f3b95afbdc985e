"""DDPG policies (stable-baselines 2.x ``ddpg/policies.py``) as Keras models.

``make_actor()`` creates the deterministic actor ``pi/``: hidden layers ``fc{i}`` [+ ``LayerNorm{_i}``] with the
activation, then the output dense layer named ``pi`` followed by tanh (actions in [-1, 1]). ``make_critic()`` creates
the critic ``qf/``: ``fc0`` [+ LN] + activation, then the action is concatenated, then ``fc1`` ... and the linear
output ``qf_output`` (so ``qf/fc1/kernel`` is ``(l0 + n_act, l1)``). Both output layers start from
``uniform(-3e-3, 3e-3)`` kernels, as SB2.

The networks read *normalised* observations: DDPG computes ``clip((processed_obs - mean) / std, observation_range)``
(``obs_rms`` statistics, or none) and feeds that to ``actor(norm_obs)`` / ``critic(norm_obs, action)``; the policy
gets the normalisation from its model through ``set_obs_normalization`` so that ``step(obs)`` takes raw observations
like SB2's ``policy.step``. With an Mlp policy and a NumPy activation, acting and critic evaluation run in NumPy on
cached weights (``actor_np`` / ``critic_np``), with the same maths as the Keras layers.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Optional, Sequence

import gymnasium as gym
import numpy as np
import tensorflow as tf

from sbtf.common.input import check_obs_space, preprocess_obs_np
from sbtf.common.policies import BasePolicy, make_actor_critic_policies, nature_cnn, register_policy_base
from sbtf.common.tf_layers import (Dense, LayerNorm, get_activation, layer_norm_np, numpy_activation,
                                   sb2_layer_norm_scope)


def _uniform_init(limit: float) -> Callable:
    """``tf.random_uniform_initializer(-limit, limit)`` drawn with NumPy's global RNG (seeded by set_global_seeds)."""

    def _init(shape: Sequence[int], dtype=None, **_kwargs) -> np.ndarray:
        return np.random.uniform(-limit, limit, tuple(int(s) for s in shape)).astype(np.float32)

    return _init


class DDPGPolicy(BasePolicy):
    """
    Policy object that implements a DDPG-like actor critic

    :param sess: (None) kept for SB2 compatibility
    :param ob_space: (gymnasium.Space) The observation space of the environment
    :param ac_space: (gymnasium.Space) The action space of the environment (Box)
    :param n_env: (int) The number of environments to run
    :param n_steps: (int) The number of steps to run for each environment
    :param n_batch: (int) The number of batch to run (n_envs * n_steps)
    :param reuse: (bool) ignored (TF2)
    :param scale: (bool) whether or not to scale the input
    """

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, reuse=False,
                 scale=False):
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, reuse=reuse, scale=scale,
                         add_action_ph=True)
        if not isinstance(ac_space, gym.spaces.Box):
            raise NotImplementedError(f"Error: DDPG policies need a Box action space, got {ac_space!r} "
                                      f"({type(ac_space).__name__}).")
        check_obs_space(ob_space, "DDPG")
        self.qvalue_fn = None
        self.policy = None

    def make_actor(self, obs=None, reuse=False, scope="pi"):
        """
        Creates an actor object

        :param obs: (TensorFlow Tensor) a batch of normalised observations (None: only create the variables)
        :param reuse: (bool) ignored (TF2)
        :param scope: (str) the scope name of the actor
        :return: (TensorFlow Tensor) the output tensor
        """
        raise NotImplementedError

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

    def step(self, obs, state=None, mask=None):
        """
        Returns the policy for a single step

        :param obs: ([float] or [int]) The current observation of the environment
        :param state: ([float]) The last states (used in recurrent policies)
        :param mask: ([float]) The last masks (used in recurrent policies)
        :return: ([float]) actions
        """
        raise NotImplementedError

    def proba_step(self, obs, state=None, mask=None):
        """
        Returns the action probability for a single step (DDPG has none: the actions)

        :param obs: ([float] or [int]) The current observation of the environment
        :param state: ([float]) The last states (used in recurrent policies)
        :param mask: ([float]) The last masks (used in recurrent policies)
        :return: ([float]) actions
        """
        return self.step(obs, state, mask)

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


class FeedForwardPolicy(DDPGPolicy):
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
    :param kwargs: (dict) Extra keyword arguments for the nature CNN feature extraction
    """

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, reuse=False,
                 layers=None, cnn_extractor=nature_cnn, feature_extraction="cnn", layer_norm=False,
                 act_fun=tf.nn.relu, **kwargs):
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, reuse=reuse,
                         scale=(feature_extraction == "cnn"))
        if feature_extraction not in ("cnn", "mlp"):
            raise ValueError(f"Error: feature_extraction must be 'cnn' or 'mlp', got {feature_extraction!r}")
        if feature_extraction == "mlp" and kwargs:
            raise ValueError(f"Unknown keywords for policy: {kwargs}")
        if layers is None:
            layers = [64, 64]
        if len(layers) < 1:
            raise ValueError("Error: must have at least one hidden layer for the policy.")
        if feature_extraction == "cnn" and len(self.obs_shape) != 3:
            raise ValueError(f"Error: CnnPolicy needs image observations (H, W, C), got shape {self.obs_shape}; use "
                             "MlpPolicy for vector observations.")
        self.layer_sizes = [int(n) for n in layers]
        self.feature_extraction = feature_extraction
        self.cnn_kwargs = kwargs
        self.cnn_extractor = cnn_extractor
        self.layer_norm = bool(layer_norm)
        self.activ = act_fun
        self.act_fun = act_fun
        self.n_act = int(np.prod(self.ac_space.shape))
        self._np_act = numpy_activation(act_fun) if feature_extraction == "mlp" else None
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
        self._np_cache = _NumpyWeights()
        self.__dict__["_tf_fns"] = {}
        self._activation = get_activation(act_fun)

    # ------------------------------------------------------------------ construction
    def _make_cnn(self, scope: str, named: list):
        if self.feature_extraction != "cnn":
            return None
        cnn = self.cnn_extractor(**self.cnn_kwargs)
        layers = cnn.sb2_layers() if hasattr(cnn, "sb2_layers") else []
        for layer in layers:
            layer.scope = f"{scope}/{layer.scope}"
        named.extend(layers)
        return cnn

    def _dummy_input(self):
        return self.preprocess(tf.zeros((1,) + self.obs_shape, tf.as_dtype(self.obs_dtype)))

    def _features(self, norm_obs, cnn):
        if cnn is not None:
            return cnn(norm_obs)
        return tf.reshape(norm_obs, (-1, int(np.prod(norm_obs.shape[1:]))))

    def make_actor(self, obs=None, reuse=False, scope="pi"):
        if self.actor_out is None:
            self.actor_scope = scope
            self.actor_cnn = self._make_cnn(scope, self._actor_named)
            for i, size in enumerate(self.layer_sizes):
                dense = Dense(f"{scope}/fc{i}", size)
                self.actor_dense.append(dense)
                self._actor_named.append(dense)
                if self.layer_norm:
                    norm = LayerNorm(f"{scope}/{sb2_layer_norm_scope(i)}")
                    self.actor_norms.append(norm)
                    self._actor_named.append(norm)
            self.actor_out = Dense(f"{scope}/{scope}", self.n_act, kernel_initializer=_uniform_init(3e-3))
            self._actor_named.append(self.actor_out)
            self.actor(self._dummy_input())
            self.mark_weights_changed()
        if obs is None:
            return None
        self.policy = self.actor(obs)
        return self.policy

    def make_critic(self, obs=None, action=None, reuse=False, scope="qf"):
        if self.critic_out is None:
            self.critic_scope = scope
            self.critic_cnn = self._make_cnn(scope, self._critic_named)
            for i, size in enumerate(self.layer_sizes):
                dense = Dense(f"{scope}/fc{i}", size)
                self.critic_dense.append(dense)
                self._critic_named.append(dense)
                if self.layer_norm:
                    norm = LayerNorm(f"{scope}/{sb2_layer_norm_scope(i)}")
                    self.critic_norms.append(norm)
                    self._critic_named.append(norm)
            self.critic_out = Dense(f"{scope}/qf_output", 1, kernel_initializer=_uniform_init(3e-3))
            self._critic_named.append(self.critic_out)
            self.critic(self._dummy_input(), tf.zeros((1, self.n_act), tf.float32))
            self.mark_weights_changed()
        if obs is None or action is None:
            return None
        self.qvalue_fn = self.critic(obs, action)
        return self.qvalue_fn

    # ------------------------------------------------------------------ TF maths (normalised observations in)
    def actor(self, norm_obs):
        """The deterministic action in [-1, 1] for a batch of normalised observations (TF)."""
        x = self._features(norm_obs, self.actor_cnn)
        for i, dense in enumerate(self.actor_dense):
            x = dense(x)
            if self.layer_norm:
                x = self.actor_norms[i](x)
            x = self._activation(x)
        return tf.tanh(self.actor_out(x))

    def critic(self, norm_obs, action):
        """The critic's (normalised) Q-value, shape (batch, 1), of normalised observations and [-1, 1] actions."""
        x = self._features(norm_obs, self.critic_cnn)
        for i, dense in enumerate(self.critic_dense):
            x = dense(x)
            if self.layer_norm:
                x = self.critic_norms[i](x)
            x = self._activation(x)
            if i == 0:
                x = tf.concat([x, tf.cast(action, tf.float32)], axis=-1)
        return self.critic_out(x)

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
        self._tf_fns.clear()

    def normalize_obs_tf(self, obs):
        """``clip((preprocess(obs) - mean) / std, observation_range)`` in TF."""
        x = self.preprocess(obs)
        if self._norm is not None:
            x = (x - self._norm.mean) / self._norm.std
        return tf.clip_by_value(x, self._obs_range[0], self._obs_range[1])

    def normalize_obs_np(self, obs: np.ndarray) -> np.ndarray:
        """``normalize_obs_tf`` in NumPy (float32)."""
        x = preprocess_obs_np(obs, self.ob_space, self.scale)
        if self._norm is not None:
            x = (x - self._norm.mean_np()) / self._norm.std_np()
        return np.clip(x, np.float32(self._obs_range[0]), np.float32(self._obs_range[1])).astype(np.float32,
                                                                                                  copy=False)

    # ------------------------------------------------------------------ parameters
    def named_parameters(self, prefix: str = "model") -> "OrderedDict[str, tf.Variable]":
        params = OrderedDict()
        for layer in list(self._actor_named) + list(self._critic_named):
            for name, var in layer.named_variables():
                params[f"{prefix}/{name}:0"] = var
        return params

    def actor_variables(self) -> list:
        return [var for layer in self._actor_named for _, var in layer.named_variables()]

    def critic_variables(self) -> list:
        return [var for layer in self._critic_named for _, var in layer.named_variables()]

    def perturbable_mask(self) -> list:
        """For each actor variable: whether parameter noise perturbs it (SB2: all trainable ones but LayerNorm)."""
        return [not isinstance(layer, LayerNorm) for layer in self._actor_named for _ in layer.named_variables()]

    def qf_output_variables(self) -> tuple:
        """(kernel, bias) of ``qf_output`` (Pop-Art rescales them)."""
        return self.critic_out.kernel, self.critic_out.bias

    # ------------------------------------------------------------------ NumPy twins
    @property
    def has_numpy_path(self) -> bool:
        return self._np_act is not None

    def mark_weights_changed(self) -> None:
        self._np_cache.counter += 1
        super().mark_weights_changed()

    def acting_weights_tf(self) -> list:
        return [tf.identity(v) for v in self.actor_variables()] if self.has_numpy_path else []

    def install_acting_weights(self, arrays) -> None:
        self.mark_weights_changed()
        if self.has_numpy_path:
            self.set_numpy_actor_weights(list(arrays))

    def set_numpy_actor_weights(self, arrays: Sequence[np.ndarray]) -> None:
        """Install fresh NumPy copies of ``actor_variables()`` (e.g. returned by a train or perturbation call)."""
        self._np_cache.actor = self._plan(list(arrays), self.actor_dense, self.actor_out)
        self._np_cache.actor_version = self._np_cache.counter

    def _plan(self, arrays: list, dense_layers: list, out_layer) -> tuple:
        it = iter(arrays)
        plan = []
        for _ in dense_layers:
            kernel, bias = next(it), next(it)
            norm = None
            if self.layer_norm:
                beta, gamma = next(it), next(it)
                norm = (gamma, beta, 1e-12)
            plan.append((kernel, bias, norm))
        return plan, (next(it), next(it))

    def _actor_plan(self):
        cache = self._np_cache
        if cache.actor_version != cache.counter:
            self.set_numpy_actor_weights([v.numpy() for v in self.actor_variables()])
        return cache.actor

    def _critic_plan(self):
        cache = self._np_cache
        if cache.critic_version != cache.counter:
            cache.critic = self._plan([v.numpy() for v in self.critic_variables()], self.critic_dense,
                                      self.critic_out)
            cache.critic_version = cache.counter
        return cache.critic

    def _mlp_np(self, x: np.ndarray, plan: list, action: Optional[np.ndarray] = None) -> np.ndarray:
        act = self._np_act
        for i, (kernel, bias, norm) in enumerate(plan):
            x = x @ kernel + bias
            if norm is not None:
                x = layer_norm_np(x, norm[0], norm[1], norm[2])
            x = act(x)
            if i == 0 and action is not None:
                x = np.concatenate([x, action], axis=-1)
        return x

    def actor_np(self, norm_obs: np.ndarray) -> np.ndarray:
        """``actor`` in NumPy (Mlp policies): actions in [-1, 1] for a batch of normalised observations."""
        plan, (kernel, bias) = self._actor_plan()
        x = self._mlp_np(norm_obs.reshape(norm_obs.shape[0], -1), plan)
        return np.tanh(x @ kernel + bias)

    def critic_np(self, norm_obs: np.ndarray, action: np.ndarray) -> np.ndarray:
        """``critic`` in NumPy (Mlp policies): normalised Q-values, shape (batch, 1)."""
        plan, (kernel, bias) = self._critic_plan()
        x = self._mlp_np(norm_obs.reshape(norm_obs.shape[0], -1), plan, np.asarray(action, np.float32))
        return x @ kernel + bias

    def _tf_fn(self, key: str, fn, signature):
        if key not in self._tf_fns:
            from sbtf.common.off_policy import FastFunction
            self._tf_fns[key] = FastFunction(tf.function(fn, input_signature=signature).get_concrete_function())
        return self._tf_fns[key]

    def _prepare_obs(self, obs) -> np.ndarray:
        return np.asarray(obs).astype(self.obs_dtype, copy=False).reshape((-1,) + self.obs_shape)

    def actor_from_obs(self, obs) -> np.ndarray:
        """Actions in [-1, 1] for a batch of raw observations (normalisation included), NumPy or one TF call."""
        obs = self._prepare_obs(obs)
        if self.has_numpy_path:
            return self.actor_np(self.normalize_obs_np(obs))
        fn = self._tf_fn("actor", lambda o: self.actor(self.normalize_obs_tf(o)), [self.obs_signature()])
        return fn(obs).numpy()

    def step(self, obs, state=None, mask=None):
        return self.actor_from_obs(obs)

    def value(self, obs, action, state=None, mask=None):
        obs = self._prepare_obs(obs)
        action = np.asarray(action, np.float32).reshape((-1, self.n_act))
        if self.has_numpy_path:
            return self.critic_np(self.normalize_obs_np(obs), action)[:, 0]
        fn = self._tf_fn("critic", lambda o, a: self.critic(self.normalize_obs_tf(o), a)[:, 0],
                         [self.obs_signature(), tf.TensorSpec((None, self.n_act), tf.float32)])
        return fn(obs, action).numpy()


class _NumpyWeights:
    """Plain holder of the NumPy weight caches (not tracked by Keras)."""

    def __init__(self):
        self.counter = 0
        self.actor = None
        self.actor_version = -1
        self.critic = None
        self.critic_version = -1


CnnPolicy, LnCnnPolicy, MlpPolicy, LnMlpPolicy = make_actor_critic_policies(FeedForwardPolicy, __name__)

register_policy_base(DDPGPolicy, {
    "CnnPolicy": CnnPolicy,
    "LnCnnPolicy": LnCnnPolicy,
    "MlpPolicy": MlpPolicy,
    "LnMlpPolicy": LnMlpPolicy,
})

__all__ = ["DDPGPolicy", "FeedForwardPolicy", "CnnPolicy", "LnCnnPolicy", "MlpPolicy", "LnMlpPolicy"]
