"""What stable-baselines3's DQN and sb3-contrib's QR-DQN share (sb3-contrib's ``QRDQN`` mirrors SB3's ``DQN``, and
``sbtf.contrib`` builds on ``sbtf.sb3`` as sb3-contrib builds on stable-baselines3).

* :class:`QValueNetwork`: features (``FeaturesExtractor``: a built-in extractor or a user's Keras layer), then sb3's
  ``create_mlp`` to ``n_outputs`` values: SB3's ``QNetwork`` (``n_actions`` Q-values) and sb3-contrib's
  ``QuantileNetwork`` (``n_actions * n_quantiles`` quantiles) are this layer;
* :class:`QPolicyBase`: the online network and its target (built from the same arguments, the target a copy),
  Adam on the online variables, acting through the policy's acting path (NumPy for Mlp networks);
* :class:`QLearningAlgorithm`: the algorithm part: SB3's linear exploration schedule (``exploration_rate`` updated
  after every env step), epsilon-greedy actions (``predict(deterministic=False)`` and collection), the target
  network's Polyak update every ``max(target_update_interval // n_envs, 1)`` env steps (SB3 counts ``_n_calls``), and
  the gradient step: a TD target without gradient, a loss, gradients clipped to ``max_grad_norm`` as
  ``torch.nn.utils.clip_grad_norm_`` does, Adam. The ``gradient_steps`` steps of a training run in one compiled call.

A subclass gives the target (``_td_target``) and the loss (``_td_loss``) of one minibatch, and its policy class.
"""
from __future__ import annotations

import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple

import gymnasium as gym
import keras
import numpy as np
import tensorflow as tf

from sbtf.common.fileio import model_schema as ms
from sbtf.common.extractors import NatureCNN
from sbtf.common.compile.fast_call import TrainStep
from sbtf.common.input import check_obs_space
from sbtf.common.nn.network_ops import TF_OPS
from sbtf.common.algo.off_policy_ops import polyak_update
from sbtf.common.policies import BasePolicy
from sbtf.sb3.common.networks import FeaturesExtractor, Mlp, resolve_extractor_class
from sbtf.sb3.common.off_policy_algorithm import ContribOffPolicyAlgorithm, contrib_save_schema
from sbtf.sb3.common.policies import make_policy_optimizer


# ------------------------------------------------------------------------------------------------ schedules and maths
def exploration_rate(progress_remaining: float, initial_eps: float, final_eps: float, fraction: float) -> float:
    """sb3's ``get_linear_fn(initial_eps, final_eps, fraction)`` (``LinearSchedule``) at ``progress_remaining``:
    linear from ``initial_eps`` to ``final_eps`` over the first ``fraction`` of the training, then ``final_eps``."""
    progress = 1.0 - progress_remaining
    if progress > fraction:
        return final_eps
    return initial_eps + progress * (final_eps - initial_eps) / fraction


class LinearSchedule:
    """
    sb3's ``LinearSchedule(start, end, end_fraction)`` (``get_linear_fn``): ``progress_remaining -> value``.

    :param start: value at the start of the training (progress remaining 1)
    :param end: value from ``end_fraction`` of the training on
    :param end_fraction: fraction of the training over which the value goes from ``start`` to ``end``
    """

    def __init__(self, start: float, end: float, end_fraction: float):
        self.start = float(start)
        self.end = float(end)
        self.end_fraction = float(end_fraction)

    def __call__(self, progress_remaining: float) -> float:
        return exploration_rate(progress_remaining, self.start, self.end, self.end_fraction)

    def __repr__(self) -> str:
        return f"LinearSchedule(start={self.start}, end={self.end}, end_fraction={self.end_fraction})"


def get_linear_fn(start: float, end: float, end_fraction: float) -> LinearSchedule:
    """sb3's ``get_linear_fn``: the :class:`LinearSchedule` from ``start`` to ``end`` over ``end_fraction``."""
    return LinearSchedule(start, end, end_fraction)


def clip_grad_norm(grads: Sequence[Optional[tf.Tensor]], max_norm: float) -> List[Optional[tf.Tensor]]:
    """``torch.nn.utils.clip_grad_norm_``: every gradient times ``min(1, max_norm / (global_norm + 1e-6))``."""
    present = [g for g in grads if g is not None]
    coef = tf.minimum(tf.constant(float(max_norm), tf.float32) / (tf.linalg.global_norm(present) + 1e-6), 1.0)
    return [None if g is None else g * coef for g in grads]


# ------------------------------------------------------------------------------------------------ networks
class QValueNetwork(keras.layers.Layer):
    """
    Features, then an MLP (sb3's ``create_mlp``) to ``n_outputs`` values per observation.

    Variables: ``<scope>/fc{i}/kernel``, ``<scope>/out/bias``, ``<scope>/features_extractor/...``.

    :param scope: the scope of its variable names (``q_net``, ``q_net_target``, ``quantile_net``, ...)
    :param observation_space: the observation space
    :param n_outputs: the values per observation
    :param net_arch: hidden layer sizes
    :param activation_fn: activation of the hidden layers (a TF / Keras function or its name)
    :param extractor: the features extractor class (see ``resolve_extractor_class``)
    :param normalize_images: divide uint8 images by 255
    :param features_extractor_kwargs: the extractor's keyword arguments
    """

    def __init__(self, scope: str, observation_space: gym.Space, n_outputs: int, net_arch: List[int], activation_fn,
                 extractor: type, normalize_images: bool, features_extractor_kwargs: Optional[Dict[str, Any]],
                 **kwargs):
        super().__init__(name=kwargs.pop("name", scope), **kwargs)
        self.scope = scope
        self.n_outputs = int(n_outputs)
        self.features_extractor = FeaturesExtractor(f"{scope}/features_extractor", observation_space, extractor,
                                                    normalize_images, features_extractor_kwargs)
        self.mlp = Mlp(scope, net_arch, activation_fn, self.n_outputs)

    def build(self, input_shape):
        """The sublayers build themselves on the first call (their shapes follow from the data)."""
        self.built = True

    def flat_values(self, obs, ops=TF_OPS):
        """(batch, n_outputs) values in the backend ``ops`` (TF or NumPy)."""
        return ops.layer(self.mlp, self.features_extractor.ops_call(obs, ops))

    def call(self, obs):
        return self.flat_values(obs)

    def named_layers(self) -> list:
        return self.features_extractor.named_layers() + self.mlp.named_layers()


class QPolicyBase(BasePolicy):
    """
    An online value network and its target network (``network_names``), with Adam on the online one.

    Subclasses set ``network_names`` and ``algorithm_name``, implement ``_new_network(scope, ...)`` and call
    ``_build(...)`` from their constructor.
    """

    #: the built-in extractor of the policy (``MlpPolicy``: flatten, ``CnnPolicy``: NatureCNN, ...)
    _default_extractor = "FlattenExtractor"
    #: the attribute names of the online and the target networks
    network_names: Tuple[str, str] = ("q_net", "q_net_target")
    #: the algorithm named in errors
    algorithm_name = "DQN"

    def _build(self, observation_space: gym.Space, action_space: gym.Space, net_arch: Optional[List[int]],
               activation_fn, features_extractor_class, features_extractor_kwargs: Optional[Dict[str, Any]],
               normalize_images: bool, optimizer_class, optimizer_kwargs: Optional[Dict[str, Any]]) -> None:
        """Check the spaces, keep the arguments (SB3's attribute names), build both networks and the optimizer."""
        if not isinstance(action_space, gym.spaces.Discrete):
            raise NotImplementedError(f"Error: {self.algorithm_name} policies need a Discrete action space, got "
                                      f"{action_space!r}.")
        check_obs_space(observation_space, self.algorithm_name, allow_dict=True)
        extractor = resolve_extractor_class(features_extractor_class, self._default_extractor)
        if net_arch is None:
            net_arch = [] if extractor is NatureCNN else [64, 64]
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
        args = (observation_space, self.net_arch, activation_fn, extractor, self.normalize_images,
                features_extractor_kwargs)
        online_name, target_name = self.network_names
        online, target = self._new_network(online_name, *args), self._new_network(target_name, *args)
        setattr(self, online_name, online)
        setattr(self, target_name, target)
        self.feature_extraction = "mlp" if online.features_extractor.xla_friendly else "cnn"
        dummy = tf.zeros((1,) + self.obs_shape, tf.as_dtype(self.obs_dtype))
        online(dummy)
        target(dummy)
        for target_var, source in zip(self.target_variables(), self.online_variables()):
            target_var.assign(source)
        # SB3's optimizer_class(params, **optimizer_kwargs), PyTorch's Adam by default; the learning rate comes with
        # every training
        self.optimizer = make_policy_optimizer(self.online_variables(), optimizer_class or "Adam",
                                               self.optimizer_kwargs)
        self._acting = self._new_acting_path(
            {"values": (lambda ops, obs: online.flat_values(obs, ops), [self.obs_signature()])})  # read when first used

    def _new_network(self, scope: str, observation_space: gym.Space, net_arch: List[int], activation_fn,
                     extractor: type, normalize_images: bool,
                     features_extractor_kwargs: Optional[Dict[str, Any]]) -> QValueNetwork:
        raise NotImplementedError

    # ------------------------------------------------------------------ parameters
    @property
    def online_network(self) -> QValueNetwork:
        """The network the optimizer trains (``q_net``, ``quantile_net``)."""
        return getattr(self, self.network_names[0])

    @property
    def target_network(self) -> QValueNetwork:
        """The target network (``q_net_target``, ``quantile_net_target``)."""
        return getattr(self, self.network_names[1])

    def _parameter_layers(self) -> list:
        return self.online_network.named_layers() + self.target_network.named_layers()

    def online_variables(self) -> list:
        """The online network's variables (what the optimizer trains), in parameter order."""
        return [var for layer in self.online_network.named_layers() for _, var in layer.named_variables()]

    def target_variables(self) -> list:
        """The target network's variables, paired with ``online_variables``."""
        return [var for layer in self.target_network.named_layers() for _, var in layer.named_variables()]

    # ------------------------------------------------------------------ maths
    def flat_values_np(self, obs) -> np.ndarray:
        """The online network's (batch, n_outputs) values, as a NumPy array (through the acting path)."""
        return np.asarray(self._acting("values", self._prepare_obs(obs)))

    def q_values(self, obs) -> tf.Tensor:
        """Q-values (batch, n_actions) of the online network, in TF."""
        raise NotImplementedError

    def q_values_np(self, obs) -> np.ndarray:
        """Q-values (batch, n_actions) of the online network, as a NumPy array."""
        raise NotImplementedError

    def call(self, inputs, training=None):
        return self.q_values(inputs)

    def predict_actions(self, obs) -> np.ndarray:
        """The greedy actions (batch,) of a batch of observations (SB3's ``_predict``)."""
        return np.argmax(self.q_values_np(obs), axis=1)

    def step(self, obs, state=None, mask=None, deterministic=True):
        """The greedy actions, the Q-values and None (SB2's ``step`` shape)."""
        q_values = self.q_values_np(obs)
        return np.argmax(q_values, axis=1), q_values, None

    def proba_step(self, obs, state=None, mask=None):
        raise NotImplementedError(f"{self.algorithm_name} policies have no action probabilities.")


# ------------------------------------------------------------------------------------------------ the algorithm
def q_learning_save_schema(**fields: ms.Field) -> Dict[str, ms.Field]:
    """The stored hyperparameters of DQN and QR-DQN, plus ``fields``."""
    return contrib_save_schema(
        target_update_interval=ms.Integer(1), exploration_fraction=ms.Real(), exploration_initial_eps=ms.Real(),
        exploration_final_eps=ms.Real(), max_grad_norm=ms.Nullable(ms.Real()), exploration_rate=ms.Real(),
        _n_calls=ms.Integer(0), **fields)


class QLearningAlgorithm(ContribOffPolicyAlgorithm):
    """
    SB3's DQN without its loss: exploration, target network and the compiled gradient steps (see the module).

    Subclasses give ``_td_target(batch)`` (no gradient is taken through it), ``_td_loss(batch, target)`` and
    ``_create_aliases()`` (SB3's ``q_net`` / ``q_net_target`` attributes).
    """

    _supported_action_spaces = (gym.spaces.Discrete,)
    #: ``model.policy`` is the policy object (SB3's convention; the class is ``policy_class``)
    _policy_is_object = True

    def __init__(self, policy, env, policy_base: type, *, learning_rate, buffer_size: int, learning_starts: int,
                 batch_size: int, tau: float, gamma: float, train_freq, gradient_steps: int, replay_buffer_class,
                 replay_buffer_kwargs: Optional[Dict[str, Any]], optimize_memory_usage: bool, n_steps: int,
                 target_update_interval: int, exploration_fraction: float, exploration_initial_eps: float,
                 exploration_final_eps: float, max_grad_norm: Optional[float], stats_window_size: int,
                 tensorboard_log: Optional[str], policy_kwargs: Optional[Dict[str, Any]], verbose: int,
                 seed: Optional[int], device: str):
        super().__init__(policy, env, policy_base, learning_rate=learning_rate, buffer_size=buffer_size,
                         learning_starts=learning_starts, batch_size=batch_size, tau=tau, gamma=gamma,
                         train_freq=train_freq, gradient_steps=gradient_steps, action_noise=None,
                         replay_buffer_class=replay_buffer_class, replay_buffer_kwargs=replay_buffer_kwargs,
                         optimize_memory_usage=optimize_memory_usage, n_steps=n_steps,
                         stats_window_size=stats_window_size, tensorboard_log=tensorboard_log,
                         policy_kwargs=policy_kwargs, verbose=verbose, seed=seed, device=device)
        self._policy_base = policy_base
        self.exploration_initial_eps = exploration_initial_eps
        self.exploration_final_eps = exploration_final_eps
        self.exploration_fraction = exploration_fraction
        self.target_update_interval = target_update_interval
        # SB3 counts the VecEnv steps to update the target network with several envs
        self._n_calls = 0
        self.max_grad_norm = max_grad_norm
        # "epsilon" of the epsilon-greedy exploration
        self.exploration_rate = 0.0
        self.exploration_schedule: Optional[LinearSchedule] = None
        self.optimizer = None
        self._target_update_step: Optional[TrainStep] = None
        self._target_synced_at: Optional[int] = None

    # ------------------------------------------------------------------ setup
    def setup_model(self) -> None:
        """
        Build the networks, optimizers and compiled train steps for the model's spaces (the constructor calls it
        unless ``_init_setup_model=False``; ``load`` calls it before restoring the parameters).
        """
        policy = self._build_policy(self._policy_base)
        self.optimizer = policy.optimizer
        self._online_vars = policy.online_variables()
        self._target_vars = policy.target_variables()
        self._create_aliases()
        self.exploration_schedule = get_linear_fn(self.exploration_initial_eps, self.exploration_final_eps,
                                                  self.exploration_fraction)
        self._target_update_step = None
        self._target_synced_at = self._n_updates  # the policy built its target network as a copy
        if self.n_envs is not None and self.n_envs > self.target_update_interval:
            warnings.warn("The number of environments used is greater than the target network update interval "
                          f"({self.n_envs} > {self.target_update_interval}), therefore the target network will be "
                          f"updated after each call to env.step() which corresponds to {self.n_envs} steps.")
        self._finish_setup()

    def _create_aliases(self) -> None:
        """The model's attributes for the policy's networks (SB3's ``q_net`` and ``q_net_target``)."""

    def _on_parameters_loaded(self) -> None:
        super()._on_parameters_loaded()
        self._target_synced_at = None  # the online and target weights may differ now

    # ------------------------------------------------------------------ the gradient step
    def _td_target(self, batch: Dict[str, tf.Tensor]) -> tf.Tensor:
        """The regression target of a minibatch (from the target network; no gradient goes through it)."""
        raise NotImplementedError

    def _td_loss(self, batch: Dict[str, tf.Tensor], target: tf.Tensor) -> tf.Tensor:
        """The loss of the online network on a minibatch against ``target`` (a scalar)."""
        raise NotImplementedError

    @property
    def stats_names(self) -> List[str]:
        return ["loss"]

    def _train_step_name(self) -> str:
        return f"{type(self).__name__.lower()}_train"

    def _build_train_step(self, n_steps: int, variant) -> TrainStep:
        online_vars = self._online_vars
        optimizer = self.optimizer
        max_grad_norm = None if self.max_grad_norm is None else float(self.max_grad_norm)

        def one_step(k, batch):
            target = tf.stop_gradient(self._td_target(batch))
            with tf.GradientTape() as tape:
                loss = self._td_loss(batch, target)
            grads = tape.gradient(loss, online_vars)
            if max_grad_norm is not None:
                grads = clip_grad_norm(grads, max_grad_norm)
            optimizer.apply(grads, batch["learning_rate"])
            return tf.stack([loss])

        return self._k_step_train_step(one_step, n_steps, {}, name=self._train_step_name())

    def _one_hot_actions(self, batch: Dict[str, tf.Tensor]) -> tf.Tensor:
        """The stored actions of a minibatch, one-hot (batch, n_actions)."""
        return tf.one_hot(tf.cast(batch["actions"][:, 0], tf.int32), self.policy_tf.n_actions)

    def _train(self, plan, state, writer) -> np.ndarray:
        stats = super()._train(plan, state, writer)
        if writer is not None:
            writer.add_scalar("rollout/exploration_rate", self.exploration_rate, self.num_timesteps)
        return stats

    # ------------------------------------------------------------------ target network
    def update_target(self) -> None:
        """``target = tau * online + (1 - tau) * target`` (one compiled call)."""
        if self._target_update_step is None:
            online_vars, target_vars, tau = self._online_vars, self._target_vars, float(self.tau)

            def update():
                polyak_update(target_vars, online_vars, tau)
                return {}

            self._target_update_step = TrainStep(update, {}, name=f"{type(self).__name__.lower()}_update_target")
        self._target_update_step()

    def _on_env_step(self) -> None:
        """SB3's ``_on_step``: the target update every ``max(target_update_interval // n_envs, 1)`` VecEnv steps,
        then the exploration rate at the current progress."""
        self._n_calls += 1
        if self._n_calls % max(int(self.target_update_interval) // self.n_envs, 1) == 0:
            # with tau = 1 the update is a copy: skipped while the online network has not trained since the last one
            if self.tau != 1.0 or self._target_synced_at != self._n_updates:
                self.update_target()
                self._target_synced_at = self._n_updates
        self.exploration_rate = self.exploration_schedule(self._current_progress_remaining)

    # ------------------------------------------------------------------ acting
    def _policy_actions(self, obs: np.ndarray, deterministic: bool) -> np.ndarray:
        """SB3's epsilon-greedy ``predict``: with probability ``exploration_rate`` (one draw for the batch) every env
        gets a uniformly sampled action, else the greedy ones."""
        if not deterministic and np.random.rand() < self.exploration_rate:
            return np.array([self.action_space.sample() for _ in range(obs.shape[0])])
        return self.policy_tf.predict_actions(obs)

    def predict(self, observation, state=None, episode_start=None, deterministic: bool = False, mask=None):
        """
        The greedy action(s) or, with ``deterministic=False``, with probability ``exploration_rate`` random actions
        (SB3's ``DQN.predict``; one draw decides for the whole batch).

        :param observation: (np.ndarray or dict) the input observation (single or batch)
        :param state: unused (no recurrent policy); returned as is
        :param episode_start: unused
        :param deterministic: whether to return the greedy action(s)
        :param mask: unused (stable-baselines 2's name of episode_start)
        :return: (np.ndarray, None) the action(s) and the state
        """
        self._check_predict_args(mask, episode_start)
        observation, vectorized = self._check_obs(observation)
        actions = self._policy_actions(observation, deterministic)
        if not vectorized:
            actions = np.asarray(actions[0])  # a 0-d array for one observation, as SB3's
        return actions, state

    # ------------------------------------------------------------------ logging
    def _log_values(self):
        return [("rollout/exploration_rate", self.exploration_rate), ("train/learning_rate", self._current_lr),
                ("train/n_updates", self._n_updates)]

    def _stats_names(self) -> List[str]:
        return [f"train/{name}" for name in self.stats_names]

    # ------------------------------------------------------------------ export and behaviour cloning
    def _pretrain_output(self, obs):
        return self.policy_tf.q_values(obs)

    def _pretrain_variables(self) -> list:
        return list(self._online_vars)


__all__ = ["exploration_rate", "LinearSchedule", "get_linear_fn", "clip_grad_norm", "QValueNetwork", "QPolicyBase",
           "q_learning_save_schema", "QLearningAlgorithm"]
