"""Deep Q-Network (stable-baselines 2.x ``DQN``): double-Q, dueling, prioritized replay, parameter noise.

One gradient step (Q-network forward on the minibatch, double-Q target from the online and target networks,
Huber loss weighted by the importance weights, per-variable gradient-norm clipping at 10, TF1 Adam) and, when due,
the target copy run in one compiled ``tf.function`` call with a fixed input signature (XLA-compiled). Acting with
an Mlp Q-network is a NumPy forward pass on cached weights (refreshed after each train call), so collecting a
transition costs no TensorFlow call.
"""
from __future__ import annotations

import warnings
from collections import OrderedDict
from typing import Optional

import gymnasium as gym
import numpy as np
import tensorflow as tf

from sbtf.common.buffers import PrioritizedReplayBuffer, ReplayBuffer  # ReplayBuffer: SB2's path, in __all__
from sbtf.common.distributions import softmax_np
from sbtf.common.compile.fast_call import TrainStep
from sbtf.common.algo.off_policy_algorithm import REPLAY_BUFFER_SCHEMA, OffPolicyAlgorithm, learn_doc
from sbtf.common.algo.off_policy_ops import copy_variables, huber_loss, stateless_seed
from sbtf.common.algo.off_policy_train import TrainStepCache
from sbtf.common.optimizers import Adam
from sbtf.common.schedules import LinearSchedule, get_schedule_fn
from sbtf.common.tf_util import repeat_steps
from sbtf.common.compile.weight_tracking import assign_variables
from sbtf.deepq.policies import DQNPolicy
from sbtf.common.fileio import model_schema as ms
from sbtf.common.arg_checks import check_hyperparameters

STATS_NAMES = ["loss", "td_error"]


class DQN(OffPolicyAlgorithm):
    """
    The DQN model class.
    DQN paper: https://arxiv.org/abs/1312.5602
    Dueling DQN: https://arxiv.org/abs/1511.06581
    Double-Q Learning: https://arxiv.org/abs/1509.06461
    Prioritized Experience Replay: https://arxiv.org/abs/1511.05952

    :param policy: (DQNPolicy or str) The policy model to use (MlpPolicy, CnnPolicy, LnMlpPolicy, ...)
    :param env: (Gym environment or str) The environment to learn from (if registered in Gym, can be str)
    :param gamma: (float) discount factor
    :param learning_rate: (float) learning rate for adam optimizer
    :param buffer_size: (int) size of the replay buffer
    :param exploration_fraction: (float) fraction of entire training period over which the exploration rate is
            annealed
    :param exploration_final_eps: (float) final value of random action probability
    :param exploration_initial_eps: (float) initial value of random action probability
    :param train_freq: (int) update the model every `train_freq` steps.
    :param batch_size: (int) size of a batched sampled from replay buffer for training
    :param double_q: (bool) Whether to enable Double-Q learning or not.
    :param learning_starts: (int) how many steps of the model to collect transitions for before learning starts
    :param target_network_update_freq: (int) update the target network every `target_network_update_freq` steps.
    :param prioritized_replay: (bool) if True prioritized replay buffer will be used.
    :param prioritized_replay_alpha: (float)alpha parameter for prioritized replay buffer.
        It determines how much prioritization is used, with alpha=0 corresponding to the uniform case.
    :param prioritized_replay_beta0: (float) initial value of beta for prioritized replay buffer
    :param prioritized_replay_beta_iters: (int) number of iterations over which beta will be annealed from initial
            value to 1.0. If set to None equals to max_timesteps.
    :param prioritized_replay_eps: (float) epsilon to add to the TD errors when updating priorities.
    :param param_noise: (bool) Whether or not to apply noise to the parameters of the policy.
    :param n_cpu_tf_sess: (int) The number of threads for TensorFlow operations (set once per process)
    :param verbose: (int) the verbosity level: 0 none, 1 training information, 2 tensorflow debug
    :param tensorboard_log: (str) the log location for tensorboard (if None, no logging)
    :param _init_setup_model: (bool) Whether or not to build the network at the creation of the instance
    :param policy_kwargs: (dict) additional arguments to be passed to the policy on creation
    :param full_tensorboard_log: (bool) enable additional logging when using tensorboard (TD-error histograms)
    :param seed: (int) Seed for the pseudo-random generators (python, numpy, tensorflow, env).
    :param replay_buffer_class: (type) Replay buffer class to use (e.g. ``HerReplayBuffer``; default
        ``ReplayBuffer``, or ``PrioritizedReplayBuffer`` with ``prioritized_replay``)
    :param replay_buffer_kwargs: (dict) Keyword arguments of the replay buffer (e.g. ``n_sampled_goal``)
    :param optimize_memory_usage: (bool) Enable a memory efficient variant of the replay buffer (each observation is
        stored once)
    """

    _save_schema = dict(
        double_q=ms.Flag(), param_noise=ms.Flag(), learning_starts=ms.Integer(0), train_freq=ms.Integer(1),
        prioritized_replay=ms.Flag(), prioritized_replay_eps=ms.Real(), batch_size=ms.Integer(1),
        target_network_update_freq=ms.Integer(1), prioritized_replay_alpha=ms.Real(),
        prioritized_replay_beta0=ms.Real(), prioritized_replay_beta_iters=ms.Nullable(ms.Integer(1)),
        exploration_final_eps=ms.Real(), exploration_fraction=ms.Real(), learning_rate=ms.Schedule(),
        gamma=ms.Real(), buffer_size=ms.Integer(1), exploration_initial_eps=ms.Real(), **REPLAY_BUFFER_SCHEMA)
    _supported_action_spaces = (gym.spaces.Discrete,)
    #: no XLA by default: measured on CPU (docs/benchmarks.md, "When sbtf uses XLA"), DQN's small train steps gain
    #: nothing steady from it and pay 2.5-9 s of compilation (one per number of grouped gradient steps); True forces it
    jit_compile = False

    def __init__(self, policy, env, gamma=0.99, learning_rate=5e-4, buffer_size=50000, exploration_fraction=0.1,
                 exploration_final_eps=0.02, exploration_initial_eps=1.0, train_freq=1, batch_size=32, double_q=True,
                 learning_starts=1000, target_network_update_freq=500, prioritized_replay=False,
                 prioritized_replay_alpha=0.6, prioritized_replay_beta0=0.4, prioritized_replay_beta_iters=None,
                 prioritized_replay_eps=1e-6, param_noise=False, n_cpu_tf_sess=None, verbose=0, tensorboard_log=None,
                 _init_setup_model=True, policy_kwargs=None, full_tensorboard_log=False, seed=None,
                 replay_buffer_class=None, replay_buffer_kwargs=None, optimize_memory_usage=False):
        check_hyperparameters(type(self).__name__, locals())
        super().__init__(policy=policy, env=env, replay_buffer=None, verbose=verbose, policy_base=DQNPolicy,
                         requires_vec_env=False, policy_kwargs=policy_kwargs, seed=seed, n_cpu_tf_sess=n_cpu_tf_sess)
        self._set_replay_buffer_options(replay_buffer_class, replay_buffer_kwargs, optimize_memory_usage)
        if prioritized_replay and (self.replay_buffer_class is not None or self.optimize_memory_usage):
            raise ValueError("Error: DQN's prioritized_replay uses its PrioritizedReplayBuffer; it cannot be combined "
                             "with replay_buffer_class or optimize_memory_usage.")
        self.param_noise = param_noise
        self.learning_starts = learning_starts
        self.train_freq = train_freq
        self.prioritized_replay = prioritized_replay
        self.prioritized_replay_eps = prioritized_replay_eps
        self.batch_size = batch_size
        self.target_network_update_freq = target_network_update_freq
        self.prioritized_replay_alpha = prioritized_replay_alpha
        self.prioritized_replay_beta0 = prioritized_replay_beta0
        self.prioritized_replay_beta_iters = prioritized_replay_beta_iters
        self.exploration_final_eps = exploration_final_eps
        self.exploration_initial_eps = exploration_initial_eps
        self.exploration_fraction = exploration_fraction
        self.buffer_size = buffer_size
        self.learning_rate = learning_rate
        self.gamma = gamma
        self.tensorboard_log = tensorboard_log
        self.full_tensorboard_log = full_tensorboard_log
        self.double_q = double_q

        self.q_net: Optional[DQNPolicy] = None
        self.target_q_net: Optional[DQNPolicy] = None
        self.perturbed_q_net: Optional[DQNPolicy] = None
        self.adaptive_q_net: Optional[DQNPolicy] = None
        self.step_model = None
        self.proba_step = None
        self.exploration = None
        self.beta_schedule = None
        self.params = None
        self.param_noise_scale = 0.01
        self.param_noise_threshold = 0.05
        self._train_steps: Optional[TrainStepCache] = None
        self._current_eps = 0.0
        self._perturbed_weights = None
        self._adaptive_weights = None
        self._pn_steps = None
        self._reset_perturbation = True
        self._last_stats = None

        if _init_setup_model:
            self.setup_model()

    # ------------------------------------------------------------------ setup
    def setup_model(self):
        """
        Build the networks, optimizers and compiled train steps for the model's spaces (the constructor calls it
        unless ``_init_setup_model=False``; ``load`` calls it before restoring the parameters).
        """
        self._check_policy_class(DQNPolicy, "MlpPolicy", needs_spaces=True)
        policy = self.policy_class
        if not isinstance(self.action_space, gym.spaces.Discrete):
            raise NotImplementedError(f"Error: DQN does not support action space {self.action_space!r}; supported "
                                      "action spaces: Discrete.")
        self.set_random_seed(self.seed)

        def make():
            return policy(None, self.observation_space, self.action_space, 1, 1, None, **self.policy_kwargs)

        self.q_net = make()
        if self.param_noise:
            self.perturbed_q_net = make()
            self.adaptive_q_net = make()
        self.target_q_net = make()
        self.eps_var = tf.Variable(0.0, dtype=tf.float32, name="eps")
        self._q_vars = list(self.q_net.named_parameters().values())
        self._target_vars = list(self.target_q_net.named_parameters().values())
        self.optimizer = Adam(self._q_vars)
        self._train_steps = TrainStepCache(self._build_train_step)
        self._update_target_step = None
        # the networks start as copies of the Q-network (eager assignments: nothing is traced before learn())
        for net in (self.target_q_net, self.perturbed_q_net, self.adaptive_q_net):
            if net is not None:
                assign_variables(zip(net.named_parameters().values(), self._q_vars))
        self.policy_tf = self.q_net
        self.step_model = self.q_net
        self.proba_step = self.q_net.proba_step
        self._perturbed_weights = None
        self._pn_steps = None
        self._reset_perturbation = True
        self.params = self.get_parameter_list()
        self._ensure_replay_buffer()

    def _policies(self) -> list:
        return [net for net in (self.q_net, self.target_q_net, self.perturbed_q_net, self.adaptive_q_net)
                if net is not None]

    def update_target(self) -> None:
        """Copy the Q-network's weights into the target network (one compiled call)."""
        if self._update_target_step is None:
            q_vars, target_vars = self._q_vars, self._target_vars

            def copy_target():
                copy_variables(target_vars, q_vars)
                return {}

            self._update_target_step = TrainStep(copy_target, {}, name="dqn_update_target")
        self._update_target_step()

    def _make_replay_buffer(self):
        if self.prioritized_replay:
            return PrioritizedReplayBuffer(self.buffer_size, alpha=self.prioritized_replay_alpha,
                                           observation_space=self.observation_space)
        return super()._make_replay_buffer()

    def _ensure_replay_buffer(self) -> None:
        if self.replay_buffer is not None and self.prioritized_replay and \
                not isinstance(self.replay_buffer, PrioritizedReplayBuffer) and not self.is_using_her():
            warnings.warn("prioritized_replay=True but the replay buffer is not a PrioritizedReplayBuffer: "
                          "starting a new (empty) prioritized buffer.")
            self.replay_buffer = None
        super()._ensure_replay_buffer()

    # ------------------------------------------------------------------ parameters
    def _named_parameters(self) -> "OrderedDict[str, tf.Variable]":
        self._sync_aux_variables()
        params: OrderedDict = OrderedDict()
        params["deepq/eps:0"] = self.eps_var
        params.update(self.q_net.named_parameters("deepq/model"))
        if self.param_noise:
            params.update(self.perturbed_q_net.named_parameters("deepq/perturbed_model/model"))
            params.update(self.adaptive_q_net.named_parameters("deepq/adaptive_model/model"))
        params.update(self.target_q_net.named_parameters("deepq/target_q_func/model"))
        return params

    def _sync_aux_variables(self) -> None:
        """Write the values kept in NumPy while acting (epsilon, perturbed weights) into their TF variables."""
        if self.q_net is None:
            return
        self.eps_var.assign(float(self._current_eps))
        if self.param_noise and self.q_net.acts_in_numpy:
            for weights, net in ((self._perturbed_weights, self.perturbed_q_net),
                                 (self._adaptive_weights, self.adaptive_q_net)):
                if weights is not None:
                    assign_variables(zip(net.named_parameters().values(), weights.values()))

    def _on_parameters_loaded(self) -> None:
        super()._on_parameters_loaded()
        self._current_eps = float(self.eps_var.numpy())
        if self.param_noise and self.q_net.acts_in_numpy:
            self._perturbed_weights = OrderedDict(zip(self.q_net.numpy_weights().keys(),
                                                      self.perturbed_q_net.numpy_weights().values()))
            self._adaptive_weights = OrderedDict(zip(self.q_net.numpy_weights().keys(),
                                                     self.adaptive_q_net.numpy_weights().values()))

    # ------------------------------------------------------------------ train step
    def _build_train_step(self, n_steps: int, variant=None) -> TrainStep:
        """``n_steps`` gradient steps on stacked minibatches (``variant`` is unused: one form per count; the target
        copy is its own small call, ``update_target``, so the step is traced once per count, not twice)."""
        q_net, target_q_net = self.q_net, self.target_q_net
        q_vars = self._q_vars
        optimizer = self.optimizer
        n_actions = int(self.action_space.n)
        gamma = float(self.gamma)
        double_q = bool(self.double_q)
        batch = int(self.batch_size)
        k_b = (n_steps, batch)
        obs_spec = tf.TensorSpec(k_b + tuple(q_net.obs_shape), tf.as_dtype(q_net.obs_dtype))
        # the actions are whole numbers: exact in float32, so they travel in the packed input vector
        inputs = {"obs": obs_spec, "next_obs": obs_spec, "actions": tf.TensorSpec(k_b, tf.float32),
                  "rewards": tf.TensorSpec(k_b, tf.float32), "dones": tf.TensorSpec(k_b, tf.float32),
                  "weights": tf.TensorSpec(k_b, tf.float32), "learning_rate": tf.TensorSpec((), tf.float32)}

        def one_step(obs, actions, rewards, next_obs, dones, weights, lr):
            q_tp1 = target_q_net.q_values(next_obs)
            if double_q:
                best = tf.argmax(q_net.q_values(next_obs), axis=1)
                q_tp1_best = tf.reduce_sum(q_tp1 * tf.one_hot(best, n_actions), axis=1)
            else:
                q_tp1_best = tf.reduce_max(q_tp1, axis=1)
            q_t_selected_target = tf.stop_gradient(rewards + gamma * (1.0 - dones) * q_tp1_best)
            with tf.GradientTape() as tape:
                q_t = q_net.q_values(obs)
                q_t_selected = tf.reduce_sum(q_t * tf.one_hot(actions, n_actions), axis=1)
                td_error = q_t_selected - q_t_selected_target
                loss = tf.reduce_mean(weights * huber_loss(td_error))
            grads = tape.gradient(loss, q_vars)
            grads = [tf.clip_by_norm(g, 10.0) if g is not None else None for g in grads]
            optimizer.apply(grads, lr)
            return td_error, tf.stack([loss, tf.reduce_mean(td_error)])

        def train(obs, next_obs, actions, rewards, dones, weights, learning_rate):
            actions = tf.cast(actions, tf.int64)
            if n_steps == 1:
                td_error, stats = one_step(obs[0], actions[0], rewards[0], next_obs[0], dones[0], weights[0],
                                           learning_rate)
            else:
                def step(k, _, stats):
                    td_error, step_stats = one_step(obs[k], actions[k], rewards[k], next_obs[k], dones[k],
                                                    weights[k], learning_rate)
                    return td_error, stats + step_stats / float(n_steps)

                td_error, stats = repeat_steps(n_steps, step, (tf.zeros((batch,), tf.float32),
                                                               tf.zeros((2,), tf.float32)))
            return {"loss": stats[0], "td_error": stats[1], "td_errors": td_error}

        return TrainStep(train, inputs, networks=(q_net,), jit_compile=self._use_xla(q_net), name="dqn_train")

    def _call_train(self, n_steps: int, obs, actions, rewards, next_obs, dones, weights, lr):
        """One compiled call: K = n_steps gradient steps on stacked minibatches; returns (stats, td_errors)."""
        step = self._train_steps.get(n_steps)
        obs_shape = (n_steps, self.batch_size) + tuple(self.q_net.obs_shape)
        out = step(obs=obs.reshape(obs_shape), next_obs=next_obs.reshape(obs_shape), actions=actions,
                   rewards=rewards, dones=dones, weights=weights, learning_rate=lr)
        return np.array([out["loss"], out["td_error"]], np.float32), out["td_errors"]

    def _run_train(self, n_steps: int, copy_target: bool, lr: float, writer) -> np.ndarray:
        rb = self.replay_buffer
        batch = self.batch_size
        if self.prioritized_replay:
            stats = td_error = None
            for _ in range(n_steps):
                beta = self.beta_schedule.value(self.num_timesteps)
                sample = rb.sample_batch(batch, beta=beta, env=self._vec_normalize_env)
                stats, td_error = self._call_train(1, sample.observations, sample.actions, sample.rewards,
                                                   sample.next_observations, sample.dones, sample.weights, lr)
                rb.update_priorities(sample.indexes, np.abs(td_error) + self.prioritized_replay_eps)
        else:
            sample = rb.sample_batch(batch * n_steps, env=self._vec_normalize_env)
            stats, td_error = self._call_train(n_steps, sample.observations, sample.actions, sample.rewards,
                                               sample.next_observations, sample.dones,
                                               np.ones(batch * n_steps, np.float32), lr)
        if copy_target:  # after the gradient steps, as SB2's loop did
            self.update_target()
        if writer is not None:
            writer.add_scalars({"loss/loss": stats[0], "loss/td_error": stats[1]}, self.num_timesteps)
            if self.full_tensorboard_log:
                writer.add_histogram("loss/td_error", td_error, self.num_timesteps)
        return stats

    # ------------------------------------------------------------------ acting
    def _learn_start(self, total_timesteps: int) -> None:
        self.exploration = LinearSchedule(schedule_timesteps=max(1, int(self.exploration_fraction * total_timesteps)),
                                          initial_p=self.exploration_initial_eps,
                                          final_p=self.exploration_final_eps)
        if self.prioritized_replay:
            beta_iters = self.prioritized_replay_beta_iters
            if beta_iters is None:
                beta_iters = total_timesteps
            self.beta_schedule = LinearSchedule(max(1, int(beta_iters)), initial_p=self.prioritized_replay_beta0,
                                                final_p=1.0)
        else:
            self.beta_schedule = None
        self._lr_fn = get_schedule_fn(self.learning_rate)
        self._total_timesteps = total_timesteps
        self._reset_perturbation = True

    def _select_actions(self, obs: np.ndarray):
        eps = self.exploration.value(self.num_timesteps)
        self._current_eps = eps
        if self.param_noise:
            n_actions = self.action_space.n
            # threshold such that the KL between perturbed and plain policy matches eps-greedy (Plappert et al.)
            self.param_noise_threshold = -np.log(1.0 - eps + eps / float(n_actions))
            if self._reset_perturbation:
                self._perturb()
                self._reset_perturbation = False
            self._adapt_param_noise(obs)
            actions = np.argmax(self._perturbed_q_values(obs), axis=1)
            return actions, actions
        n = len(next(iter(obs.values()))) if isinstance(obs, dict) else len(obs)
        chose_random = np.random.random_sample(n) < eps if eps > 0 else np.zeros(n, bool)
        # the greedy actions only when one is kept: with eps near 1 most steps skip the network (a CNN's forward
        # pass is most of an Atari step); the same random draws in the same order, so the same actions
        actions = (np.zeros(n, np.intp) if chose_random.all()
                   else np.argmax(self.q_net.q_values_np(obs), axis=1))
        if chose_random.any():
            actions[chose_random] = np.random.randint(0, self.action_space.n, size=int(chose_random.sum()))
        return actions, actions

    def _on_dones(self, dones: np.ndarray) -> None:
        if self.param_noise:
            self._reset_perturbation = True

    # ------------------------------------------------------------------ parameter noise
    def _noisy_copy(self, scale: float) -> "OrderedDict[str, np.ndarray]":
        weights = self.q_net.numpy_weights()
        perturbable = set(self.q_net.perturbable_variable_names())
        return OrderedDict((name, (value + np.random.normal(0.0, scale, value.shape).astype(value.dtype))
                            if name in perturbable else value.copy()) for name, value in weights.items())

    def _perturb(self) -> None:
        """Re-sample the perturbed network: Q-network weights + N(0, param_noise_scale) on fully connected layers."""
        if self.q_net.acts_in_numpy:
            self._perturbed_weights = self._noisy_copy(self.param_noise_scale)
        else:
            self._param_noise_steps()[0](scale=self.param_noise_scale, seed=stateless_seed())

    def _perturbed_q_values(self, obs: np.ndarray) -> np.ndarray:
        if self.q_net.acts_in_numpy:
            return self.q_net.q_values_np(obs, weights=self._perturbed_weights)
        return self.perturbed_q_net.q_values_np(obs)

    @staticmethod
    def _mean_kl_np(q_values: np.ndarray, q_other: np.ndarray) -> float:
        def log_softmax(x):
            x = x - x.max(axis=1, keepdims=True)
            return x - np.log(np.sum(np.exp(x), axis=1, keepdims=True))

        log_p, log_q = log_softmax(q_values), log_softmax(q_other)
        return float(np.mean(np.sum(np.exp(log_p) * (log_p - log_q), axis=-1)))

    def _param_noise_steps(self):
        """Compiled (perturb, adapt) for policies without a NumPy path: one TF call each."""
        if getattr(self, "_pn_steps", None) is None:
            q_vars = self._q_vars
            names = list(self.q_net.named_parameters("").keys())
            perturbable = ["fully_connected" in name for name in names]
            perturbed_vars = list(self.perturbed_q_net.named_parameters().values())
            adaptive_vars = list(self.adaptive_q_net.named_parameters().values())
            q_net, adaptive_q_net = self.q_net, self.adaptive_q_net

            def noisy_assign(targets, scale, seed):
                for i, (target, source, noisy) in enumerate(zip(targets, q_vars, perturbable)):
                    if noisy:
                        noise = tf.random.stateless_normal(source.shape, seed=seed + i, stddev=scale)
                        target.assign(source + noise)
                    else:
                        target.assign(source)

            def perturb(scale, seed):
                noisy_assign(perturbed_vars, scale, seed)
                return {}

            def adapt(obs, scale, seed):
                noisy_assign(adaptive_vars, scale, seed)
                log_p = tf.nn.log_softmax(q_net.q_values(obs))
                log_q = tf.nn.log_softmax(adaptive_q_net.q_values(obs))
                return {"mean_kl": tf.reduce_mean(tf.reduce_sum(tf.exp(log_p) * (log_p - log_q), axis=-1))}

            scalar, seed_spec = tf.TensorSpec((), tf.float32), tf.TensorSpec((2,), tf.int64)
            self._pn_steps = (
                TrainStep(perturb, {"scale": scalar, "seed": seed_spec}, name="dqn_perturb"),
                TrainStep(adapt, {"obs": self.q_net.obs_signature(), "scale": scalar, "seed": seed_spec},
                          name="dqn_adapt_param_noise"))
        return self._pn_steps

    def _adapt_param_noise(self, obs: np.ndarray) -> None:
        """SB2's scale adaptation: perturb another copy, compare softmax(Q) by KL, scale the noise by 1.01."""
        if self.q_net.acts_in_numpy:
            weights = self._noisy_copy(self.param_noise_scale)
            mean_kl = self._mean_kl_np(self.q_net.q_values_np(obs), self.q_net.q_values_np(obs, weights=weights))
            self._adaptive_weights = weights
        else:
            obs = self.q_net._prepare_obs(obs)
            mean_kl = float(self._param_noise_steps()[1](obs=obs, scale=self.param_noise_scale,
                                                         seed=stateless_seed())["mean_kl"])
        if mean_kl < self.param_noise_threshold:
            self.param_noise_scale *= 1.01
        else:
            self.param_noise_scale /= 1.01

    # ------------------------------------------------------------------ training schedule
    def _planned_gradient_steps(self, total_timesteps: int) -> Optional[int]:
        steps = self._steps_after_learning_starts(total_timesteps)
        return steps // max(int(self.train_freq), 1)

    def _training_due(self, first_step: int, n_steps: int, state):
        """
        ``(gradient steps, copy the target after them, learning rate)`` for the train-frequency multiples passed
        since learning started; a target copy due without gradient steps runs here, outside a training (as SB2's
        loop did it outside the rollout callbacks).
        """
        t_new = self.num_timesteps
        t_prev = t_new - n_steps
        if not self.replay_buffer.can_sample(self.batch_size):
            return None
        low = max(t_prev, self.learning_starts)
        n_train = self._count_multiples(low, t_new, self.train_freq)
        n_target = self._count_multiples(low, t_new, self.target_network_update_freq)
        if n_train == 0:
            if n_target > 0:
                self.update_target()
            return None
        lr = self._lr_fn(1.0 - t_new / max(state.total_timesteps, 1))
        return n_train, n_target > 0, lr

    def _train(self, plan, state, writer) -> np.ndarray:
        n_train, copy_target, lr = plan
        stats = self._run_train(n_train, copy_target, lr, writer)
        self._last_stats = stats
        return stats

    def _stats_names(self):
        return STATS_NAMES

    def _log_values(self):
        return [("steps", self.num_timesteps),
                ("% time spent exploring", int(100 * self._current_eps))]

    @learn_doc("DQN")
    def learn(self, total_timesteps, callback=None, log_interval=100, tb_log_name="DQN", reset_num_timesteps=True,
              replay_wrapper=None, progress_bar: bool = False):
        if replay_wrapper is not None and self.prioritized_replay:
            raise ValueError("Error: prioritized replay buffer is not supported by HER.")
        return self._learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, replay_wrapper,
                           progress_bar)

    # ------------------------------------------------------------------ predict
    def predict(self, observation, state=None, mask=None, deterministic=True):
        """
        Get the model's action(s) from an observation: ``argmax Q`` (deterministic, the default) or a sample of
        ``softmax(Q)``.

        :param observation: (np.ndarray) the input observation (single or batch)
        :param state: (np.ndarray) unused (no recurrent DQN policy)
        :param mask: (np.ndarray) unused
        :param deterministic: (bool) whether to return the greedy action
        :return: (np.ndarray, None) the action(s) and None
        """
        observation, vectorized_env = self._check_obs(observation)
        actions, _, _ = self.q_net.step(observation, deterministic=deterministic)
        if not vectorized_env:
            actions = actions[0]
        return actions, None

    def action_probability(self, observation, state=None, mask=None, actions=None, logp=False):
        """
        ``softmax(Q)`` for the observation(s), or the probability of the given ``actions`` (shape (batch, 1),
        log-probability with ``logp=True``).
        """
        observation, vectorized_env = self._check_obs(observation)
        actions_proba = softmax_np(self.q_net.q_values_np(observation))
        if actions is not None:
            actions = np.array([actions]).reshape((-1,))
            if observation.shape[0] != actions.shape[0]:
                raise ValueError(f"Error: batch sizes differ for actions ({actions.shape[0]}) and observations "
                                 f"({observation.shape[0]}).")
            actions_proba = actions_proba[np.arange(actions.shape[0]), actions.astype(np.int64)].reshape((-1, 1))
            if logp:
                actions_proba = np.log(actions_proba)
        if not vectorized_env:
            if state is not None:
                raise ValueError("Error: The environment must be vectorized when using recurrent policies.")
            actions_proba = actions_proba[0]
        return actions_proba

    # ------------------------------------------------------------------ behaviour cloning
    def _pretrain_output(self, obs):
        return self.q_net.q_values(obs)

    def _pretrain_variables(self) -> list:
        return list(self._q_vars)


__all__ = ["DQN", "ReplayBuffer"]  # ReplayBuffer: stable_baselines.deepq.dqn imported it, so can its users
