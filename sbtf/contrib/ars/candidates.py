"""The NumPy forward pass of ARS's candidate weight vectors (:class:`CandidateActor`), without the Keras policy.

A :class:`CandidateActor` is plain data (spaces, layer shapes, activation, squashing), so it pickles into the worker
processes of :class:`sbtf.contrib.common.vec_env.async_eval.AsyncEval`; :class:`sbtf.contrib.ars.policies.ARSPolicy`
runs its side-by-side evaluations through the same object (one forward pass, written once).
"""
from __future__ import annotations

from typing import Any, Sequence, Tuple

import gymnasium as gym
import numpy as np

from sbtf.common.input import obs_input_dtype, obs_input_shape, preprocess_obs_np
from sbtf.common.math_util import unscale_action
from sbtf.common.nn.network_ops import numpy_activation

__all__ = ["CandidateActor"]


class CandidateActor:
    """
    ARS's policy as a function of a flat weight vector (NumPy): ``outputs(weights, obs)`` and env ``actions``.

    :param observation_space: (gymnasium.Space) the observation space
    :param action_space: (gymnasium.Space) Box or Discrete
    :param layers: ([(n_in, n_out, use_bias)]) the dense layers, in the order of the flat weight vector
    :param activation_fn: (str or function) the activation of the hidden layers (one with a NumPy form)
    :param squash_output: (bool) Box: tanh on the outputs, rescaled to the bounds (else clipped)
    :param scale: (bool) image observations divided by 255
    """

    def __init__(self, observation_space: gym.Space, action_space: gym.Space,
                 layers: Sequence[Tuple[int, int, bool]], activation_fn: Any, squash_output: bool, scale: bool):
        self.observation_space = observation_space
        self.action_space = action_space
        self.layers = [(int(n_in), int(n_out), bool(bias)) for n_in, n_out, bias in layers]
        self.activation_fn = activation_fn
        self.is_box = isinstance(action_space, gym.spaces.Box)
        self.squash_output = bool(squash_output) and self.is_box
        self.scale = bool(scale)
        self.n_params = sum(n_in * n_out + (n_out if bias else 0) for n_in, n_out, bias in self.layers)
        self._act = numpy_activation(activation_fn) if len(self.layers) > 1 else None

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_act")  # found again from activation_fn in the process that unpickles it
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._act = numpy_activation(self.activation_fn) if len(self.layers) > 1 else None

    def outputs(self, flat_weights: np.ndarray, obs: np.ndarray) -> np.ndarray:
        """
        The network's outputs, one weight vector per observation.

        :param flat_weights: (n, n_params) or (n_params,) (the same weights for every observation)
        :param obs: (n, ...) observations
        :return: (n, n_out) outputs (squashed for Box when ``squash_output``)
        """
        space = self.observation_space
        obs = np.asarray(obs).astype(obs_input_dtype(space), copy=False).reshape((-1,) + obs_input_shape(space))
        x = preprocess_obs_np(obs, space, self.scale)
        x = x.reshape(x.shape[0], -1).astype(np.float32, copy=False)
        flat_weights = np.asarray(flat_weights, np.float32)
        if flat_weights.ndim == 1:
            flat_weights = np.broadcast_to(flat_weights, (x.shape[0], flat_weights.size))
        offset = 0
        for idx, (n_in, n_out, bias) in enumerate(self.layers):
            kernel = flat_weights[:, offset:offset + n_in * n_out].reshape(-1, n_in, n_out)
            offset += n_in * n_out
            x = np.einsum("ni,nio->no", x, kernel)
            if bias:
                x = x + flat_weights[:, offset:offset + n_out]
                offset += n_out
            if idx < len(self.layers) - 1:
                x = self._act(x)
        return np.tanh(x) if self.squash_output else x

    def actions_from_outputs(self, outputs: np.ndarray) -> np.ndarray:
        """Env actions from network outputs: rescaled or clipped Box actions, or the argmax (Discrete)."""
        if not self.is_box:
            return outputs.argmax(axis=-1)
        space = self.action_space
        if self.squash_output:
            actions = unscale_action(space, outputs)
        else:
            actions = np.clip(outputs, space.low.reshape(-1), space.high.reshape(-1))
        return actions.reshape((-1,) + space.shape).astype(space.dtype, copy=False)

    def actions(self, flat_weights: np.ndarray, obs: np.ndarray) -> np.ndarray:
        """Env actions of ``obs`` under ``flat_weights`` (see :meth:`outputs`)."""
        return self.actions_from_outputs(self.outputs(flat_weights, obs))
