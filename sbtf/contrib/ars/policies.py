"""ARS policies (sb3-contrib ``ars/policies.py``): a deterministic MLP (``MlpPolicy``) or linear map
(``LinearPolicy``) from flattened observations to actions.

``MlpPolicy``: hidden layers ``net_arch`` (default ``[64, 64]``) with ``activation_fn`` (ReLU), biases, and for Box
actions a tanh on the output rescaled to the action bounds (``squash_output``). ``LinearPolicy``: no hidden layer, no
bias, the output clipped to the bounds. Discrete actions are the argmax of the outputs.

ARS moves the weights as one flat vector (``flat_layout``); :meth:`ARSPolicy.batched_outputs` runs many weight
vectors at once (one per environment of a VecEnv: the candidates of an update evaluated side by side).
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import gymnasium as gym
import keras
import numpy as np
import tensorflow as tf

from sbtf.common.input import preprocess_obs_np
from sbtf.common.nn.network_ops import TF_OPS, numpy_activation
from sbtf.common.policies import BasePolicy, register_policy_base
from sbtf.common.tf_layers import SB2Layer
from sbtf.common.compile.weight_tracking import assign_variables
from sbtf.contrib.ars.candidates import CandidateActor

__all__ = ["ARSPolicy", "ARSLinearPolicy", "MlpPolicy", "LinearPolicy"]


class ArsDense(SB2Layer):
    """``x @ w (+ b)`` with PyTorch's default ``nn.Linear`` initialisation (uniform in +-1/sqrt(fan_in))."""

    def __init__(self, scope: str, units: int, use_bias: bool = True, **kwargs):
        super().__init__(scope, **kwargs)
        self.units = int(units)
        self.use_bias = bool(use_bias)

    def build(self, input_shape):
        n_input = int(input_shape[-1])
        limit = 1.0 / np.sqrt(max(n_input, 1))
        init = keras.initializers.RandomUniform(-limit, limit, seed=int(np.random.randint(2 ** 31 - 1)))
        self.w = self.add_weight(name="w", shape=(n_input, self.units), initializer=init)
        if self.use_bias:
            self.b = self.add_weight(name="b", shape=(self.units,), initializer=init)

    def call(self, inputs):
        out = tf.matmul(inputs, self.w)
        return out + self.b if self.use_bias else out

    def numpy_call(self, weights: Sequence[np.ndarray], x: np.ndarray) -> np.ndarray:
        out = np.dot(x, weights[0])
        if self.use_bias:
            out += weights[1]
        return out


class ARSPolicy(BasePolicy):
    """
    Policy network for ARS.

    :param observation_space: (gymnasium.Space) the observation space
    :param action_space: (gymnasium.Space) the action space (Box or Discrete)
    :param net_arch: ([int]) the hidden layer sizes (default ``[64, 64]``)
    :param activation_fn: (str or function) the activation of the hidden layers (default ReLU)
    :param with_bias: (bool) the layers have biases
    :param squash_output: (bool) Box actions: tanh on the output, rescaled to the bounds (else clipped)
    """

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, net_arch: Optional[List[int]] = None,
                 activation_fn="relu", with_bias: bool = True, squash_output: bool = True):
        super().__init__(None, observation_space, action_space)
        if not isinstance(action_space, (gym.spaces.Box, gym.spaces.Discrete)):
            raise NotImplementedError(f"Error: ARS policy not implemented for action space of type "
                                      f"{type(action_space)}.")
        self.net_arch = [64, 64] if net_arch is None else [int(s) for s in net_arch]
        self.activation_fn = activation_fn
        self.with_bias = bool(with_bias)
        self.is_box = isinstance(action_space, gym.spaces.Box)
        self.squash_output = bool(squash_output) and self.is_box
        n_out = int(np.prod(action_space.shape)) if self.is_box else int(action_space.n)
        n_in = int(np.prod(preprocess_obs_np(np.zeros((1,) + self.obs_shape, self.obs_dtype),
                                             observation_space).shape[1:]))
        self.layers_: List[ArsDense] = []
        sizes = self.net_arch + [n_out]
        for idx, size in enumerate(sizes):
            layer = ArsDense("action" if idx == len(sizes) - 1 else f"fc{idx}", size, use_bias=self.with_bias)
            layer.build((None, n_in))
            n_in = size
            self.layers_.append(layer)
            self._register(layer)
        self._np_act = numpy_activation(activation_fn)
        if self.net_arch and self._np_act is None:
            raise ValueError(f"ARS evaluates its candidates in NumPy: the activation {activation_fn!r} has no NumPy "
                             "form; use 'relu', 'tanh', 'elu', 'sigmoid', 'softplus', 'selu' or 'leaky_relu'")
        #: the NumPy forward pass of flat weight vectors (picklable: AsyncEval's workers act with it)
        self.candidate_actor = CandidateActor(observation_space, action_space,
                                              [(int(layer.w.shape[0]), layer.units, layer.use_bias)
                                               for layer in self.layers_], activation_fn, self.squash_output,
                                              self.scale)
        self._acting = self._new_acting_path({"outputs": (self.outputs, [self.obs_signature()])})

    # ------------------------------------------------------------------ the network, written once
    def outputs(self, ops, obs):
        """The network's outputs (squashed for Box when ``squash_output``), in the backend ``ops``."""
        x = ops.flatten(ops.preprocess(obs, self.ob_space, self.scale))
        act = ops.activation(self.activation_fn)
        for layer in self.layers_[:-1]:
            x = act(ops.layer(layer, x))
        out = ops.layer(self.layers_[-1], x)
        return ops.tanh(out) if self.squash_output else out

    def call(self, inputs, training=None):
        return self.outputs(TF_OPS, inputs)

    def actions_from_outputs(self, outputs: np.ndarray) -> np.ndarray:
        """Env actions from network outputs (NumPy): rescaled or clipped Box actions, or the argmax."""
        return self.candidate_actor.actions_from_outputs(outputs)

    def actions_tf(self, obs):
        """``actions_from_outputs`` in TF (export)."""
        out = self.outputs(TF_OPS, obs)
        if not self.is_box:
            return tf.argmax(out, axis=-1)
        low = tf.constant(np.asarray(self.ac_space.low, np.float32).reshape(-1))
        high = tf.constant(np.asarray(self.ac_space.high, np.float32).reshape(-1))
        if self.squash_output:
            return low + 0.5 * (out + 1.0) * (high - low)
        return tf.clip_by_value(out, low, high)

    def predict_actions(self, obs) -> np.ndarray:
        """Env actions for a batch of observations (NumPy acting path)."""
        return self.actions_from_outputs(self._acting("outputs", self._prepare_obs(obs)))

    # ------------------------------------------------------------------ flat weights and batched candidates
    def flat_layout(self) -> List[Tuple[str, tuple]]:
        """(name, shape) of every parameter, in the order of the flat weight vector."""
        return [(name, tuple(int(d) for d in var.shape)) for name, var in self.named_parameters().items()]

    def get_flat_weights(self) -> np.ndarray:
        """The weights as one float32 vector."""
        return np.concatenate([v.numpy().ravel() for v in self.parameter_list()]).astype(np.float32)

    def set_flat_weights(self, flat: np.ndarray) -> None:
        """Assign the weights from one vector laid out as ``get_flat_weights``."""
        pairs, offset = [], 0
        for var in self.parameter_list():
            size = int(np.prod(var.shape))
            pairs.append((var, np.asarray(flat[offset:offset + size], np.float32).reshape(var.shape)))
            offset += size
        assign_variables(pairs)  # a tracked write: acting re-reads the new weights

    def batched_outputs(self, flat_weights: np.ndarray, obs: np.ndarray) -> np.ndarray:
        """
        The outputs of one weight vector per observation (NumPy).

        :param flat_weights: (n, n_params) one weight vector per row of ``obs``
        :param obs: (n, ...) observations
        :return: (n, n_out) outputs (squashed for Box when ``squash_output``)
        """
        return self.candidate_actor.outputs(flat_weights, self._prepare_obs(obs))


class ARSLinearPolicy(ARSPolicy):
    """
    Linear policy network for ARS: no hidden layer.

    :param observation_space: (gymnasium.Space) the observation space
    :param action_space: (gymnasium.Space) the action space (Box or Discrete)
    :param with_bias: (bool) a bias on the output
    :param squash_output: (bool) Box actions: tanh on the output, rescaled to the bounds (else clipped)
    """

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, with_bias: bool = False,
                 squash_output: bool = False):
        super().__init__(observation_space, action_space, net_arch=[], with_bias=with_bias,
                         squash_output=squash_output)


MlpPolicy = ARSPolicy
LinearPolicy = ARSLinearPolicy

register_policy_base(ARSPolicy, {"MlpPolicy": ARSPolicy, "LinearPolicy": ARSLinearPolicy})
