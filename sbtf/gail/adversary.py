"""GAIL's discriminator (stable-baselines 2.x ``gail/adversary.py``; architecture of openai/imitation).

``TransitionClassifier`` scores (observation, action) pairs: observations are normalised by the classifier's own
running statistics (``adversary/obfilter/``: float64 sums shared over MPI ranks, not saved), concatenated with the
action (one-hot for Discrete), then ``tanh(fc(hidden)) -> tanh(fc(hidden)) -> fc(1)`` gives a logit. Expert pairs
are labelled 1, generator pairs 0; the loss is the two sigmoid cross-entropies minus ``entcoeff`` times the mean
Bernoulli entropy of the logits. The policy's reward is ``-log(1 - sigmoid(logit) + 1e-8)``.

Variables carry SB2's names: ``adversary/fully_connected/weights:0`` (obs_dim + act_dim, H), ``/biases:0`` (H,),
``adversary/fully_connected_1/...`` (H, H), ``adversary/fully_connected_2/...`` (H, 1).
The network is written once, as a function of a backend ``ops`` (:meth:`TransitionClassifier.logits`): in TF for the
losses, and through an ``ActingPath`` (``sbtf.common.compile.acting``) for the reward used during rollouts, which then
runs in NumPy on copies of the weights (no TensorFlow call per step). The copies carry the classifier's weight version:
every tracked write of the weights (``apply_gradient``'s ``MpiAdam`` step, ``load``, MPI syncs; see
``sbtf.common.compile.weight_tracking``) marks them stale, and the next ``get_reward`` refreshes them with one compiled
read. The observation statistics are read by the backend itself (``ops.standardize``), so they need no
version of their own.
"""
from __future__ import annotations

from collections import OrderedDict

import gymnasium as gym
import numpy as np
import tensorflow as tf

from sbtf.common.compile.acting import ActingPath, WeightVersion
from sbtf.common.mpi_running_mean_std import RunningMeanStd
from sbtf.common.nn.network_ops import TF_OPS
from sbtf.common.tf_layers import FullyConnected, sb2_fully_connected_scope
from sbtf.common.tf_util import flatgrad


def logsigmoid(input_tensor):
    """
    Equivalent to tf.log(tf.sigmoid(a))

    :param input_tensor: (tf.Tensor)
    :return: (tf.Tensor)
    """
    return -tf.nn.softplus(-input_tensor)


def logit_bernoulli_entropy(logits):
    """
    Reference:
    https://github.com/openai/imitation/blob/99fbccf3e060b6e6c739bdf209758620fcdefd3c/policyopt/thutil.py#L48-L51

    :param logits: (tf.Tensor) the logits
    :return: (tf.Tensor) the Bernoulli entropy
    """
    return (1. - tf.nn.sigmoid(logits)) * logits - logsigmoid(logits)


class TransitionClassifier(tf.Module):
    """
    Reward regression from observations and transitions.

    :param observation_space: (gym.spaces.Box) the observation space
    :param action_space: (gym.spaces.Box or gym.spaces.Discrete) the action space
    :param hidden_size: (int) the hidden dimension for the MLP
    :param entcoeff: (float) the entropy loss weight
    :param scope: (str) the scope of the variable names
    :param normalize: (bool) normalise observations with running statistics
    :param comm: (MPI Communicator) for the running statistics (default: MPI.COMM_WORLD or one process)
    """

    def __init__(self, observation_space, action_space, hidden_size, entcoeff=0.001, scope="adversary",
                 normalize=True, comm=None):
        super().__init__(name=scope)
        if not isinstance(observation_space, gym.spaces.Box):
            raise NotImplementedError(f"Error: GAIL's discriminator needs a Box observation space, got "
                                      f"{observation_space!r}.")
        if isinstance(action_space, gym.spaces.Box):
            self.discrete_actions = False
            self.n_actions = int(np.prod(action_space.shape))
        elif isinstance(action_space, gym.spaces.Discrete):
            self.discrete_actions = True
            self.n_actions = int(action_space.n)
        else:
            raise NotImplementedError(f"Error: GAIL supports Box and Discrete action spaces, got {action_space!r}.")
        self.scope = scope
        self.observation_shape = tuple(observation_space.shape)
        self.actions_shape = tuple(action_space.shape)
        self.obs_dim = int(np.prod(self.observation_shape))
        self.hidden_size = int(hidden_size)
        self.entcoeff = float(entcoeff)
        self.normalize = bool(normalize)
        self.obs_rms = RunningMeanStd(shape=self.observation_shape, comm=comm, name="obfilter") if normalize \
            else None
        self.loss_name = ["generator_loss", "expert_loss", "entropy", "entropy_loss", "generator_acc", "expert_acc"]

        in_dim = self.obs_dim + self.n_actions
        self.layers_ = []
        for i, units in enumerate((self.hidden_size, self.hidden_size, 1)):
            layer = FullyConnected(sb2_fully_connected_scope(i), units)
            layer.build((None, in_dim))
            in_dim = units
            self.layers_.append(layer)

        obs_spec = tf.TensorSpec((None,) + self.observation_shape, tf.float32)
        act_spec = tf.TensorSpec((None,), tf.int64) if self.discrete_actions else \
            tf.TensorSpec((None, self.n_actions), tf.float32)
        self._lossandgrad_fn = tf.function(self._lossandgrad, input_signature=[obs_spec, act_spec, obs_spec,
                                                                                act_spec])
        self._reward_fn = tf.function(lambda obs, actions: self.reward(TF_OPS, obs, actions),
                                      input_signature=[obs_spec, act_spec])
        # the rollout reward: NumPy on copies of the weights, refreshed (one compiled read) after they changed
        self._weight_version = WeightVersion()
        self.reward_path = ActingPath({"reward": (self.reward, [obs_spec, act_spec])}, self._weight_version,
                                      parameter_order=self.get_trainable_variables, install_from_train_steps=False)

    # ------------------------------------------------------------------ variables
    def get_trainable_variables(self) -> list:
        """The discriminator's weights and biases, in SB2 order."""
        return [var for layer in self.layers_ for _, var in layer.named_variables()]

    def named_parameters(self) -> "OrderedDict[str, tf.Variable]":
        """``{SB2 name: variable}``, e.g. ``adversary/fully_connected/weights:0``."""
        return OrderedDict((f"{self.scope}/{name}:0", var) for layer in self.layers_
                           for name, var in layer.named_variables())

    def weights_changed(self) -> None:
        """The weights were written by a route sbtf does not track (a raw ``assign`` in your code): ``get_reward``
        re-reads them. ``apply_gradient``, ``load`` and MPI syncs are tracked writes and need no such call."""
        self._weight_version.bump()

    def apply_gradient(self, optimizer, flat_grad: np.ndarray, learning_rate: float) -> None:
        """
        One step of ``optimizer`` (an ``MpiAdam`` over :meth:`get_trainable_variables`: the gradient is averaged
        over the MPI ranks) with this rank's flat gradient; the next ``get_reward`` reads the new weights (once,
        however many steps were applied since).
        """
        optimizer.update(flat_grad, learning_rate)  # a tracked write (``MpiAdam.update``)

    # ------------------------------------------------------------------ maths (written once, backend ``ops``)
    def logits(self, ops, obs, actions):
        """
        The logits of (observation, action) pairs in the backend ``ops`` (``TF_OPS`` or a ``NumpyOps``).

        :param obs: observations, shape ``(n,) + obs_shape``
        :param actions: actions: indices, shape ``(n,)`` (Discrete), or vectors, shape ``(n, act_dim)`` (Box)
        :return: logits, shape ``(n, 1)``
        """
        obs = ops.as_float(obs)
        if self.normalize:
            obs = ops.standardize(obs, self.obs_rms)
        obs = ops.flatten(obs)
        if self.discrete_actions:
            actions = ops.one_hot(actions, self.n_actions)
        else:
            actions = ops.flatten(ops.as_float(actions))
        hidden = ops.concat([obs, actions])  # concatenate the two inputs -> form a transition
        fc0, fc1, fc2 = self.layers_
        hidden = ops.tanh(ops.layer(fc0, hidden))
        hidden = ops.tanh(ops.layer(fc1, hidden))
        return ops.layer(fc2, hidden)

    def reward(self, ops, obs, actions):
        """The policy's reward ``-log(1 - sigmoid(logits) + 1e-8)``, shape ``(n, 1)``, in the backend ``ops``."""
        return -ops.log(1 - ops.activation("sigmoid")(self.logits(ops, obs, actions)) + 1e-8)

    def build_graph(self, obs, actions):
        """
        The logits of (observation, action) pairs in TF (SB2's name for :meth:`logits` with ``TF_OPS``).

        :param obs: (tf.Tensor) observations, shape ``(n,) + obs_shape``
        :param actions: (tf.Tensor) actions: indices (Discrete) or vectors (Box)
        :return: (tf.Tensor) logits, shape ``(n, 1)``
        """
        return self.logits(TF_OPS, obs, actions)

    def _losses(self, generator_obs, generator_acs, expert_obs, expert_acs):
        generator_logits = self.build_graph(generator_obs, generator_acs)
        expert_logits = self.build_graph(expert_obs, expert_acs)
        generator_acc = tf.reduce_mean(tf.cast(tf.nn.sigmoid(generator_logits) < 0.5, tf.float32))
        expert_acc = tf.reduce_mean(tf.cast(tf.nn.sigmoid(expert_logits) > 0.5, tf.float32))
        # z * -log(sigmoid(x)) + (1 - z) * -log(1 - sigmoid(x)) with x = logits, z = targets
        generator_loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(
            logits=generator_logits, labels=tf.zeros_like(generator_logits)))
        expert_loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(
            logits=expert_logits, labels=tf.ones_like(expert_logits)))
        logits = tf.concat([generator_logits, expert_logits], 0)
        entropy = tf.reduce_mean(logit_bernoulli_entropy(logits))
        entropy_loss = -self.entcoeff * entropy
        total_loss = generator_loss + expert_loss + entropy_loss
        return total_loss, tf.stack([generator_loss, expert_loss, entropy, entropy_loss, generator_acc, expert_acc])

    def _lossandgrad(self, generator_obs, generator_acs, expert_obs, expert_acs):
        variables = self.get_trainable_variables()
        with tf.GradientTape() as tape:
            total_loss, losses = self._losses(generator_obs, generator_acs, expert_obs, expert_acs)
        return losses, flatgrad(tape.gradient(total_loss, variables), variables)

    # ------------------------------------------------------------------ NumPy API
    def _prepare(self, obs, actions):
        obs = np.asarray(obs, np.float32).reshape((-1,) + self.observation_shape)
        if self.discrete_actions:
            actions = np.asarray(actions).astype(np.int64).reshape(-1)
        else:
            actions = np.asarray(actions, np.float32).reshape(-1, self.n_actions)
        if len(obs) != len(actions):
            raise ValueError(f"Error: {len(obs)} observations but {len(actions)} actions given to the discriminator")
        return obs, actions

    def lossandgrad(self, generator_obs, generator_acs, expert_obs, expert_acs) -> list:
        """``[generator_loss, expert_loss, entropy, entropy_loss, generator_acc, expert_acc, flat_grad]`` (NumPy)."""
        generator_obs, generator_acs = self._prepare(generator_obs, generator_acs)
        expert_obs, expert_acs = self._prepare(expert_obs, expert_acs)
        losses, grad = self._lossandgrad_fn(generator_obs, generator_acs, expert_obs, expert_acs)
        return list(losses.numpy()) + [grad.numpy()]

    def reward_tf(self, obs, actions) -> np.ndarray:
        """The reward computed by TensorFlow (same as ``get_reward``; used to check the NumPy path)."""
        obs, actions = self._prepare(obs, actions)
        return self._reward_fn(obs, actions).numpy()

    def get_reward(self, obs, actions) -> np.ndarray:
        """
        Predict the reward using the observation and action: ``-log(1 - sigmoid(logit) + 1e-8)``, shape (n, 1).

        :param obs: (np.ndarray) the observation(s)
        :param actions: (np.ndarray) the action(s)
        :return: (np.ndarray) the reward
        """
        obs, actions = self._prepare(obs, actions)
        return self.reward_path("reward", obs, actions)


__all__ = ["TransitionClassifier", "logsigmoid", "logit_bernoulli_entropy"]
