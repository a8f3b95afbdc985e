"""DQN policies (stable-baselines 2.x ``deepq/policies.py``) as Keras models.

The Q-network of ``FeedForwardPolicy`` has SB2's structure and variable names (under ``deepq/model/`` in a DQN
model, see ``DQN.get_parameter_list``):

* ``action_value/``: Mlp: for each hidden size ``fully_connected{_k}`` -> [``LayerNorm{_k}``] -> ``act_fun``, then the
  linear output ``fully_connected_{len(layers)}`` (n_actions). Cnn: the nature CNN (``action_value/c1..c3, fc1``)
  followed directly by the output ``action_value/fully_connected``.
* ``state_value/`` (``dueling=True``, the default): the hidden stack on the same features, then
  ``fully_connected_{len(layers)}`` (1). ``Q = V + (A - mean_a A)``; without dueling ``Q = A``.

The Q-network is written once (``q_network``, against a backend ``ops``): ``q_values`` is its TF maths for training;
``q_values_np`` runs it through the policy's acting path, in NumPy on copies of the weights for Mlp Q-networks, else
through one compiled TF call.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Optional

import gymnasium as gym
import numpy as np
import tensorflow as tf

from sbtf.common.distributions import softmax_np
from sbtf.common.input import check_obs_space
from sbtf.common.policies import BasePolicy, nature_cnn, register_policy_base
from sbtf.common.nn.network_ops import TF_OPS, NumpyOps
from sbtf.common.nn.off_policy_networks import (feed_forward_layer_sizes, image_scaling, init_sb3_settings,
                                             make_features_extractor, multi_input_kwargs, preprocess_ops,
                                             resolve_activation, scoped_cnn)
from sbtf.common.tf_layers import FullyConnected, SB2Mlp, sb2_fully_connected_scope


class _PerturbedOps:
    """The NumPy backend of the last explicit weights passed to ``q_values_np`` (a plain holder: no Keras tracking)."""

    def __init__(self):
        self.weights: Optional[dict] = None
        self.ops: Optional[NumpyOps] = None


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
        check_obs_space(ob_space, "DQN", allow_dict=True)  # Dict: MultiInputPolicy
        self.n_actions = int(ac_space.n)
        self.dueling = bool(dueling)
        self._perturbed = _PerturbedOps()
        # acting runs ``q_values``, through one compiled TF call (subclasses with a NumPy form replace the path)
        self._acting = self._new_acting_path({"q": (lambda ops, obs: self.q_values(obs), [self.obs_signature()])},
                                             numpy_allowed=False)

    def q_values(self, obs) -> tf.Tensor:
        """The Q-values ``(batch, n_actions)`` of a batch of (raw) observations, in TF."""
        raise NotImplementedError

    def call(self, inputs, training=None):
        return self.q_values(inputs)

    def q_values_np(self, obs, weights: Optional[dict] = None) -> np.ndarray:
        """
        Q-values of a batch of observations as a NumPy array (through the acting path: NumPy or one TF call).

        :param obs: (np.ndarray) observations
        :param weights: (dict) optional ``{relative SB2 name: array}`` (as ``numpy_weights()``) to use instead of the
            policy's own weights (parameter noise); only for policies that act in NumPy
        """
        obs = self._prepare_obs(obs)
        if weights is not None:
            return self._acting_network(self._ops_for_weights(weights), obs)
        ops = self._acting.numpy_ops()
        if ops is not None:
            return self._acting_network(ops, obs)
        return self._acting("q", obs)

    def _acting_network(self, ops, obs):
        """The Q-values in the backend ``ops`` (the function the acting path runs)."""
        return self.q_values(obs)

    def _ops_for_weights(self, weights: dict) -> NumpyOps:
        if not self.acts_in_numpy:
            raise ValueError("Error: explicit weights need a policy that acts in NumPy (Mlp with a known activation).")
        cache = self._perturbed
        if cache.weights is not weights:
            names = self._acting_names()
            cache.ops = self._acting.ops_for([weights[name] for name in names])
            cache.weights = weights
        return cache.ops

    def _acting_names(self) -> list:
        """Relative SB2 names (no prefix, no ``:0``) of the acting path's variables, in its order."""
        by_id = {id(var): name[1:-2] for name, var in self.named_parameters(prefix="").items()}
        return [by_id[id(var)] for var in self._acting.variables]

    def numpy_weights(self) -> "OrderedDict[str, np.ndarray]":
        """``{relative SB2 name: array}`` of the current weights the NumPy acting path uses (fresh)."""
        return OrderedDict(zip(self._acting_names(), self._acting.current_weights()))

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
    :param net_arch: ([int]) SB3's name of ``layers``: the hidden layer sizes of the Q-network (give one of them)
    :param activation_fn: SB3's name of ``act_fun`` (a TF/Keras function, a name, or a Keras layer class)
    :param normalize_images: (bool) rescale image observations to [0, 1] (None: SB2's rule, CNN policies do)
    :param features_extractor_class: (type) SB3's feature extractor: a Keras layer class with a ``features_dim``,
        built as ``features_extractor_class(ob_space, **features_extractor_kwargs)`` (variables
        ``action_value/features_extractor/...``) and followed by the ``net_arch`` layers; replaces SB2's CNN
    :param features_extractor_kwargs: (dict) its keyword arguments
    :param kwargs: (dict) Extra keyword arguments for the nature CNN feature extraction
    """

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, reuse=False,
                 layers=None, cnn_extractor=nature_cnn, feature_extraction="cnn", obs_phs=None, layer_norm=False,
                 dueling=True, act_fun=tf.nn.relu, net_arch=None, activation_fn=None, normalize_images=None,
                 features_extractor_class=None, features_extractor_kwargs=None, **kwargs):
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, reuse=reuse,
                         scale=image_scaling(ob_space, feature_extraction, normalize_images, features_extractor_class),
                         obs_phs=obs_phs, dueling=dueling)
        init_sb3_settings(self, "DQN", net_arch, normalize_images, features_extractor_class, features_extractor_kwargs)
        self.layer_sizes = feed_forward_layer_sizes(self.obs_shape, layers, feature_extraction, kwargs, min_layers=0,
                                                    algo="DQN", policy_cls=type(self), cnn_extractor=cnn_extractor,
                                                    net_arch=net_arch,
                                                    features_extractor_class=features_extractor_class)
        self.feature_extraction = feature_extraction
        self.layer_norm = bool(layer_norm)
        act_fun = resolve_activation(act_fun, activation_fn)
        self.act_fun = act_fun
        self.cnn_kwargs = kwargs

        self.cnn = None
        if features_extractor_class is not None:
            # SB3's Q-network: the extractor, then the net_arch layers
            self.cnn, scoped = make_features_extractor(self, features_extractor_class, self.features_extractor_kwargs,
                                                       "action_value/features_extractor")
            self._register(scoped)
            feature_extraction = "mlp"
        if feature_extraction == "cnn":
            self.cnn, cnn_layers = scoped_cnn(cnn_extractor, kwargs, "action_value")
            self._register(*cnn_layers)
            self.action_hidden = None
            self.action_out = FullyConnected("action_value/fully_connected", self.n_actions)
        else:
            self.action_hidden = SB2Mlp("action_value", self.layer_sizes, act_fun, layer_norm=self.layer_norm,
                                        style="fully_connected")
            self._register(*self.action_hidden.sb2_layers())
            self.action_out = FullyConnected(f"action_value/{sb2_fully_connected_scope(len(self.layer_sizes))}",
                                             self.n_actions)
        self._register(self.action_out)
        self.state_hidden = None
        self.state_out = None
        if self.dueling:
            self.state_hidden = SB2Mlp("state_value", self.layer_sizes, act_fun, layer_norm=self.layer_norm,
                                       style="fully_connected")
            self.state_out = FullyConnected(f"state_value/{sb2_fully_connected_scope(len(self.layer_sizes))}", 1)
            self._register(*self.state_hidden.sb2_layers(), self.state_out)
        # create the variables
        self(tf.zeros((1,) + self.obs_shape, tf.as_dtype(self.obs_dtype)))
        # NumPy acting runs ``q_network``; a subclass that replaces the TF maths (``q_values``) acts through TF
        self._acting = self._new_acting_path({"q": (self.q_network, [self.obs_signature()])},
                                             numpy_allowed=type(self).q_values is FeedForwardPolicy.q_values)

    # ------------------------------------------------------------------ TF
    def q_network(self, ops, obs):
        """The Q-values ``(batch, n_actions)`` of a batch of raw observations in the backend ``ops``."""
        x = preprocess_ops(self, obs, ops)
        features = ops.layer(self.cnn, x) if self.cnn is not None else ops.flatten(x)
        action_out = features if self.action_hidden is None else ops.layer(self.action_hidden, features)
        action_scores = ops.layer(self.action_out, action_out)
        if not self.dueling:
            return action_scores
        state_score = ops.layer(self.state_out, ops.layer(self.state_hidden, features))
        return state_score + action_scores - ops.mean_last(action_scores)

    def q_values(self, obs) -> tf.Tensor:
        return self.q_network(TF_OPS, obs)

    _acting_network = q_network

    def perturbable_variable_names(self) -> list:
        """Relative SB2 names of the variables parameter noise perturbs (the ``fully_connected`` layers, as SB2)."""
        return [name for name in self.numpy_weights() if "fully_connected" in name]

    # ------------------------------------------------------------------ acting copies
    def acting_variables(self) -> list:
        """The variables the NumPy acting copies mirror, in ``numpy_weights`` order (every tracked write of them
        refreshes the copies, see ``sbtf.common.compile.weight_tracking``)."""
        if self._acting.uses_numpy:
            return list(self._acting.variables)
        return list(self.named_parameters().values())


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


class MultiInputPolicy(FeedForwardPolicy):
    """
    DQN policy for Dict observations (SB3's ``MultiInputPolicy``): a ``CombinedExtractor`` (a NatureCNN per image
    key, the other keys flattened), then ``net_arch`` (default [64, 64]) and the (dueling) Q heads.

    :param dueling: (bool) if true double the output MLP to compute a baseline for action scores
    :param _kwargs: (dict) the policy_kwargs (SB3's and SB2's, see ``FeedForwardPolicy``)
    """

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, reuse=False,
                 obs_phs=None, dueling=True, **_kwargs):
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, reuse, feature_extraction="mlp",
                         obs_phs=obs_phs, dueling=dueling, **multi_input_kwargs("DQN", _kwargs))


register_policy_base(DQNPolicy, {
    "CnnPolicy": CnnPolicy,
    "LnCnnPolicy": LnCnnPolicy,
    "MlpPolicy": MlpPolicy,
    "LnMlpPolicy": LnMlpPolicy,
    "MultiInputPolicy": MultiInputPolicy,
})

__all__ = ["DQNPolicy", "FeedForwardPolicy", "CnnPolicy", "LnCnnPolicy", "MlpPolicy", "LnMlpPolicy",
           "MultiInputPolicy"]
