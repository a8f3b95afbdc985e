"""DQN policies (stable-baselines 2.x ``deepq/policies.py``) as Keras models.

The Q-network of ``FeedForwardPolicy`` has SB2's structure and variable names (under ``deepq/model/`` in a DQN
model, see ``DQN.get_parameter_list``):

* ``action_value/``: Mlp: for each hidden size ``fully_connected{_k}`` -> [``LayerNorm{_k}``] -> ``act_fun``, then the
  linear output ``fully_connected_{len(layers)}`` (n_actions). Cnn: the nature CNN (``action_value/c1..c3, fc1``)
  followed directly by the output ``action_value/fully_connected``.
* ``state_value/`` (``dueling=True``, the default): the hidden stack on the same features, then
  ``fully_connected_{len(layers)}`` (1). ``Q = V + (A - mean_a A)``; without dueling ``Q = A``.

Acting with an Mlp Q-network runs in NumPy on a cached copy of the weights (``q_values_np``), which gives the same
Q-values as the Keras model; other policies run a compiled TF function.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Optional

import gymnasium as gym
import numpy as np
import tensorflow as tf

from sbtf.common.distributions import softmax_np
from sbtf.common.input import check_obs_space, preprocess_obs_np
from sbtf.common.policies import BasePolicy, nature_cnn, register_policy_base
from sbtf.common.tf_layers import FullyConnected, SB2Mlp, numpy_activation, sb2_fully_connected_scope


class _NumpyState:
    """Plain holder for NumPy caches (avoids Keras attribute tracking on every update)."""

    def __init__(self):
        self.counter = 0  # bumped when the weights change
        self.version = -1  # the counter value the cache was built at
        self.plan = None
        self.names = None
        self.forward_plan = None
        self.plan_version = -2


class DQNPolicy(BasePolicy):
    """
    Policy object that implements a DQN policy

    :param sess: (None) kept for SB2 compatibility
    :param ob_space: (gymnasium.Space) The observation space of the environment
    :param ac_space: (gymnasium.Space) The action space of the environment (Discrete)
    :param n_env: (int) The number of environments to run
    :param n_steps: (int) The number of steps to run for each environment
    :param n_batch: (int) The number of batch to run (n_envs * n_steps)
    :param reuse: (bool) ignored (TF2)
    :param scale: (bool) whether or not to scale the input
    :param obs_phs: ignored (TF2 has no placeholders)
    :param dueling: (bool) if true double the output MLP to compute a baseline for action scores
    """

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, reuse=False,
                 scale=False, obs_phs=None, dueling=True):
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, reuse=reuse, scale=scale)
        if not isinstance(ac_space, gym.spaces.Discrete):
            raise NotImplementedError(f"Error: DQN policies need a Discrete action space, got {ac_space!r} "
                                      f"({type(ac_space).__name__}).")
        check_obs_space(ob_space, "DQN")
        self.n_actions = int(ac_space.n)
        self.dueling = bool(dueling)
        self._np_state = _NumpyState()
        self._tf_q_fn = None

    def q_values(self, obs) -> tf.Tensor:
        """The Q-values ``(batch, n_actions)`` of a batch of (raw) observations, in TF."""
        raise NotImplementedError

    def mark_weights_changed(self) -> None:
        """Tell the NumPy fast path that the weights changed (a plain counter: no Keras attribute tracking)."""
        self._np_state.counter += 1

    def call(self, inputs, training=None):
        return self.q_values(inputs)

    def _prepare_obs(self, obs) -> np.ndarray:
        return np.asarray(obs).astype(self.obs_dtype, copy=False).reshape((-1,) + self.obs_shape)

    @property
    def has_numpy_path(self) -> bool:
        return False

    def q_values_np(self, obs, weights: Optional[dict] = None) -> np.ndarray:
        """
        Q-values of a batch of observations as a NumPy array (NumPy forward pass when the policy has one).

        :param obs: (np.ndarray) observations
        :param weights: (dict) optional ``{relative SB2 name: array}`` to use instead of the policy's own weights
            (parameter noise); only for policies with a NumPy path
        """
        obs = self._prepare_obs(obs)
        if self.has_numpy_path:
            return self._numpy_q(obs, weights)
        if weights is not None:
            raise ValueError("Error: explicit weights need a policy with a NumPy path (Mlp with a known activation).")
        if self._tf_q_fn is None:
            self._tf_q_fn = tf.function(self.q_values, input_signature=[self.obs_signature()]).get_concrete_function()
        return self._tf_q_fn(tf.constant(obs)).numpy()

    def _numpy_q(self, obs: np.ndarray, weights: Optional[dict]) -> np.ndarray:
        raise NotImplementedError

    def step(self, obs, state=None, mask=None, deterministic=True):
        """
        Returns the q_values for a single step

        :param obs: (np.ndarray float or int) The current observation of the environment
        :param state: (np.ndarray float) The last states (used in recurrent policies)
        :param mask: (np.ndarray float) The last masks (used in recurrent policies)
        :param deterministic: (bool) Whether or not to return deterministic actions (argmax Q), else a sample of
            softmax(Q)
        :return: (np.ndarray int, np.ndarray float, np.ndarray float) actions, q_values, states
        """
        q_values = self.q_values_np(obs)
        if deterministic:
            actions = np.argmax(q_values, axis=1)
        else:
            actions = sample_softmax(q_values, self.np_random)
        return actions, q_values, None

    def proba_step(self, obs, state=None, mask=None):
        """
        Returns the action probability (softmax of the Q-values) for a single step

        :param obs: (np.ndarray float or int) The current observation of the environment
        :param state: (np.ndarray float) The last states (used in recurrent policies)
        :param mask: (np.ndarray float) The last masks (used in recurrent policies)
        :return: (np.ndarray float) the action probability
        """
        return softmax_np(self.q_values_np(obs))


def sample_softmax(logits: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One sample per row of ``softmax(logits)`` (vectorised inverse-CDF sampling)."""
    probs = softmax_np(np.asarray(logits, dtype=np.float64))
    cdf = np.cumsum(probs, axis=1)
    draws = rng.random((probs.shape[0], 1)) * cdf[:, -1:]
    return np.minimum((draws >= cdf).sum(axis=1), probs.shape[1] - 1).astype(np.int64)


class FeedForwardPolicy(DQNPolicy):
    """
    Policy object that implements a DQN policy, using a feed forward neural network.

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
    :param obs_phs: ignored (TF2 has no placeholders)
    :param layer_norm: (bool) enable layer normalisation
    :param dueling: (bool) if true double the output MLP to compute a baseline for action scores
    :param act_fun: (tf.func) the activation function to use in the neural network.
    :param kwargs: (dict) Extra keyword arguments for the nature CNN feature extraction
    """

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, reuse=False,
                 layers=None, cnn_extractor=nature_cnn, feature_extraction="cnn", obs_phs=None, layer_norm=False,
                 dueling=True, act_fun=tf.nn.relu, **kwargs):
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, reuse=reuse,
                         scale=(feature_extraction == "cnn"), obs_phs=obs_phs, dueling=dueling)
        if feature_extraction not in ("cnn", "mlp"):
            raise ValueError(f"Error: feature_extraction must be 'cnn' or 'mlp', got {feature_extraction!r}")
        if feature_extraction == "mlp" and kwargs:
            raise ValueError(f"Unknown keywords for policy: {kwargs}")
        if layers is None:
            layers = [64, 64]
        self.layer_sizes = [int(n) for n in layers]
        self.feature_extraction = feature_extraction
        self.layer_norm = bool(layer_norm)
        self.act_fun = act_fun
        self.cnn_kwargs = kwargs
        self._named_layers: list = []

        self.cnn = None
        if feature_extraction == "cnn":
            if len(self.obs_shape) != 3:
                raise ValueError(f"Error: CnnPolicy needs image observations (H, W, C), got shape {self.obs_shape}; "
                                 "use MlpPolicy for vector observations.")
            self.cnn = cnn_extractor(**kwargs)
            cnn_layers = self.cnn.sb2_layers() if hasattr(self.cnn, "sb2_layers") else []
            for layer in cnn_layers:
                layer.scope = f"action_value/{layer.scope}"
            self._named_layers.extend(cnn_layers)
            self.action_hidden = None
            self.action_out = FullyConnected("action_value/fully_connected", self.n_actions)
        else:
            self.action_hidden = SB2Mlp("action_value", self.layer_sizes, act_fun, layer_norm=self.layer_norm,
                                        style="fully_connected")
            self._named_layers.extend(self.action_hidden.sb2_layers())
            self.action_out = FullyConnected(f"action_value/{sb2_fully_connected_scope(len(self.layer_sizes))}",
                                             self.n_actions)
        self._named_layers.append(self.action_out)
        self.state_hidden = None
        self.state_out = None
        if self.dueling:
            self.state_hidden = SB2Mlp("state_value", self.layer_sizes, act_fun, layer_norm=self.layer_norm,
                                       style="fully_connected")
            self.state_out = FullyConnected(f"state_value/{sb2_fully_connected_scope(len(self.layer_sizes))}", 1)
            self._named_layers.extend(self.state_hidden.sb2_layers())
            self._named_layers.append(self.state_out)
        # create the variables
        self(tf.zeros((1,) + self.obs_shape, tf.as_dtype(self.obs_dtype)))
        self._np_act = numpy_activation(act_fun) if feature_extraction == "mlp" else None
        self.mark_weights_changed()

    # ------------------------------------------------------------------ TF
    def named_parameters(self, prefix: str = "model") -> "OrderedDict[str, tf.Variable]":
        """Ordered ``{SB2 name: variable}``, e.g. ``model/action_value/fully_connected/weights:0``."""
        params: OrderedDict = OrderedDict()
        for layer in self._named_layers:
            for name, var in layer.named_variables():
                params[f"{prefix}/{name}:0"] = var
        return params

    def _features(self, obs):
        x = self.preprocess(obs)
        if self.cnn is not None:
            return self.cnn(x)
        return tf.reshape(x, (-1, int(np.prod(x.shape[1:]))))

    def q_values(self, obs) -> tf.Tensor:
        features = self._features(obs)
        action_out = features if self.action_hidden is None else self.action_hidden(features)
        action_scores = self.action_out(action_out)
        if not self.dueling:
            return action_scores
        state_score = self.state_out(self.state_hidden(features))
        return state_score + action_scores - tf.reduce_mean(action_scores, axis=1, keepdims=True)

    def perturbable_variable_names(self) -> list:
        """Relative SB2 names of the variables parameter noise perturbs (the ``fully_connected`` layers, as SB2)."""
        return [name for name in self.numpy_weights() if "fully_connected" in name]

    # ------------------------------------------------------------------ NumPy
    @property
    def has_numpy_path(self) -> bool:
        return self._np_act is not None

    def numpy_weights(self) -> "OrderedDict[str, np.ndarray]":
        """``{relative SB2 name (no prefix, no ':0'): array}`` of the current weights (cached until they change)."""
        state = self._np_state
        if state.version != state.counter:
            self.set_numpy_weights([var.numpy() for var in self.acting_variables()])
        return state.plan

    def acting_variables(self) -> list:
        """The variables the NumPy forward pass reads, in ``numpy_weights`` order."""
        return [var for layer in self._named_layers for _, var in layer.named_variables()]

    def acting_weights_tf(self) -> list:
        return [tf.identity(v) for v in self.acting_variables()] if self.has_numpy_path else []

    def install_acting_weights(self, arrays) -> None:
        self.mark_weights_changed()
        if self.has_numpy_path:
            self.set_numpy_weights(list(arrays))

    def set_numpy_weights(self, arrays: list) -> None:
        """Install fresh NumPy copies of ``acting_variables()`` (e.g. returned by a train step) as the cache."""
        state = self._np_state
        if state.names is None:
            state.names = [name for layer in self._named_layers for name, _ in layer.named_variables()]
        state.plan = OrderedDict(zip(state.names, arrays))
        state.version = state.counter

    def _plan(self, w: dict) -> tuple:
        """The weights of ``w`` arranged for the forward pass: per stream [(W, b, (gamma, beta) or None)], (W, b)."""
        n_hidden = len(self.layer_sizes)

        def stream(scope: str):
            hidden = []
            for i in range(n_hidden):
                fc = f"{scope}/{sb2_fully_connected_scope(i)}"
                norm = None
                if self.layer_norm:
                    ln = f"{scope}/{'LayerNorm' if i == 0 else f'LayerNorm_{i}'}"
                    norm = (w[f"{ln}/gamma"], w[f"{ln}/beta"])
                hidden.append((w[f"{fc}/weights"], w[f"{fc}/biases"], norm))
            out = f"{scope}/{sb2_fully_connected_scope(n_hidden)}"
            return hidden, (w[f"{out}/weights"], w[f"{out}/biases"])

        return stream("action_value"), (stream("state_value") if self.dueling else None)

    def _numpy_q(self, obs: np.ndarray, weights: Optional[dict]) -> np.ndarray:
        if weights is None:
            state = self._np_state
            w = self.numpy_weights()
            if state.plan_version != state.version:
                state.forward_plan = self._plan(w)
                state.plan_version = state.version
            action_stream, state_stream = state.forward_plan
        else:
            action_stream, state_stream = self._plan(weights)
        act = self._np_act
        x = preprocess_obs_np(obs, self.ob_space, self.scale)
        features = x.reshape(x.shape[0], -1)

        def run(stream, h: np.ndarray) -> np.ndarray:
            hidden, (w_out, b_out) = stream
            for w_, b_, norm in hidden:
                h = h @ w_ + b_
                if norm is not None:
                    mean = h.mean(axis=-1, keepdims=True)
                    var = h.var(axis=-1, keepdims=True)
                    h = (h - mean) / np.sqrt(var + 1e-12) * norm[0] + norm[1]
                h = act(h)
            return h @ w_out + b_out

        action_scores = run(action_stream, features)
        if state_stream is None:
            return action_scores
        state_score = run(state_stream, features)
        return state_score + action_scores - action_scores.mean(axis=1, keepdims=True)


class CnnPolicy(FeedForwardPolicy):
    """
    Policy object that implements DQN policy, using a CNN (the nature CNN)

    :param dueling: (bool) if true double the output MLP to compute a baseline for action scores
    :param _kwargs: (dict) Extra keyword arguments for the nature CNN feature extraction
    """

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, reuse=False,
                 obs_phs=None, dueling=True, **_kwargs):
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, reuse, feature_extraction="cnn",
                         obs_phs=obs_phs, dueling=dueling, layer_norm=False, **_kwargs)


class LnCnnPolicy(FeedForwardPolicy):
    """
    Policy object that implements DQN policy, using a CNN (the nature CNN), with layer normalisation

    :param dueling: (bool) if true double the output MLP to compute a baseline for action scores
    :param _kwargs: (dict) Extra keyword arguments for the nature CNN feature extraction
    """

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, reuse=False,
                 obs_phs=None, dueling=True, **_kwargs):
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, reuse, feature_extraction="cnn",
                         obs_phs=obs_phs, dueling=dueling, layer_norm=True, **_kwargs)


class MlpPolicy(FeedForwardPolicy):
    """
    Policy object that implements DQN policy, using a MLP (2 layers of 64)

    :param dueling: (bool) if true double the output MLP to compute a baseline for action scores
    :param _kwargs: (dict) Extra keyword arguments (``layers``, ``act_fun``, ...)
    """

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, reuse=False,
                 obs_phs=None, dueling=True, **_kwargs):
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, reuse, feature_extraction="mlp",
                         obs_phs=obs_phs, dueling=dueling, layer_norm=False, **_kwargs)


class LnMlpPolicy(FeedForwardPolicy):
    """
    Policy object that implements DQN policy, using a MLP (2 layers of 64), with layer normalisation.
    As in SB2, this policy is always dueling (its ``dueling`` argument is ignored).

    :param _kwargs: (dict) Extra keyword arguments (``layers``, ``act_fun``, ...)
    """

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, reuse=False,
                 obs_phs=None, dueling=True, **_kwargs):
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, reuse, feature_extraction="mlp",
                         obs_phs=obs_phs, layer_norm=True, dueling=True, **_kwargs)


register_policy_base(DQNPolicy, {
    "CnnPolicy": CnnPolicy,
    "LnCnnPolicy": LnCnnPolicy,
    "MlpPolicy": MlpPolicy,
    "LnMlpPolicy": LnMlpPolicy,
})

__all__ = ["DQNPolicy", "FeedForwardPolicy", "CnnPolicy", "LnCnnPolicy", "MlpPolicy", "LnMlpPolicy"]
