"""Deep Deterministic Policy Gradient (stable-baselines 2.x ``DDPG``), data-parallel over MPI.

Training follows SB2's cycle structure, as hooks of the off-policy learn loop (``OffPolicyAlgorithm``):
``nb_rollout_steps`` environment steps with the (noisy) actor, then ``nb_train_steps`` gradient steps (each: critic
regression on ``r + gamma * (1 - done) * Q'(s', mu'(s'))``, actor ascent on ``Q(s, mu(s))``, both gradients taken
before either update, two ``MpiAdam`` optimisers with ``actor_lr`` / ``critic_lr``, then the soft target update with
``tau``), then ``nb_eval_steps`` on ``eval_env`` when one is given; every ``log_interval`` cycles (an epoch) the
epoch statistics are logged.

This file holds the constructor, the networks and the losses; around them:

* ``sbtf.ddpg.train_step``: the two training paths of a cycle (one fused compiled call; SB2's per-step calls);
* ``sbtf.ddpg.exploration``: acting, action noise and adaptive parameter noise;
* ``sbtf.ddpg.popart``: Pop-Art rescaling of the critics; ``sbtf.ddpg.running_stats``: ``obs_rms`` / ``ret_rms``;
* ``sbtf.ddpg.reporting``: evaluation and the epoch log;
* ``sbtf.common.mpi.mpi_mixin``: MPI (rank seeds ``seed + 10000 * rank``, parameter broadcast at the start of
  ``learn()`` and a sync check every 100 updates, rank-0-only logging and saving, abort on a failing rank).

Under ``mpirun -np N`` each rank collects its own experience into its own replay buffer; every gradient step the
flat gradients are averaged over the ranks (one ``Allreduce``, as ``MpiAdam.update``), the parameter-noise distance
is averaged and the Pop-Art return statistics are summed over the ranks; the observation statistics are summed over
the ranks after every environment step, so the ranks' networks stay identical.
"""
from __future__ import annotations

import contextlib
import warnings
from collections import OrderedDict
from typing import Iterator, Optional

import gymnasium as gym
import numpy as np
import tensorflow as tf

from sbtf.common.fileio import model_schema as ms
from sbtf.common.nn.sde import refuse_sde
from sbtf.common.buffers import PrioritizedReplayBuffer
from sbtf.common.math_util import unscale_action
from sbtf.common.mpi_adam import MpiAdam
from sbtf.common.mpi.mpi_mixin import MpiDataParallelMixin
from sbtf.common.algo.off_policy_algorithm import REPLAY_BUFFER_SCHEMA, LearnState, OffPolicyAlgorithm
from sbtf.common.algo.off_policy_ops import tf_variable
from sbtf.common.algo.off_policy_train import TrainStepCache
from sbtf.ddpg.exploration import DDPGExploration
from sbtf.ddpg.policies import DDPGPolicy
from sbtf.ddpg.popart import rescale_critic_outputs, update_return_statistics
from sbtf.ddpg.reporting import DDPGReporting, EpochStats
from sbtf.ddpg.running_stats import RunningStats, denormalize, normalize
from sbtf.ddpg.train_step import DDPGTraining
from sbtf.common.tf_util import flatgrad
from sbtf.common.compile.weight_tracking import assign_variables
from sbtf.common.arg_checks import check_hyperparameters


class DDPG(MpiDataParallelMixin, DDPGExploration, DDPGTraining, DDPGReporting, OffPolicyAlgorithm):
    """
    Deep Deterministic Policy Gradient (DDPG) model

    DDPG: https://arxiv.org/pdf/1509.02971.pdf

    :param policy: (DDPGPolicy or str) The policy model to use (MlpPolicy, CnnPolicy, LnMlpPolicy, ...)
    :param env: (Gym environment or str) The environment to learn from (if registered in Gym, can be str)
    :param gamma: (float) the discount factor
    :param memory_policy: (ReplayBuffer) the replay buffer
        (if None, default to baselines.deepq.replay_buffer.ReplayBuffer)

        .. deprecated:: 2.6.0
            This parameter will be removed in a future version

    :param eval_env: (Gym Environment) the evaluation environment (can be None)
    :param nb_train_steps: (int) the number of training steps
    :param nb_rollout_steps: (int) the number of rollout steps
    :param nb_eval_steps: (int) the number of evaluation steps
    :param param_noise: (AdaptiveParamNoiseSpec) the parameter noise type (can be None)
    :param action_noise: (ActionNoise) the action noise type (can be None)
    :param param_noise_adaption_interval: (int) apply param noise every N steps
    :param tau: (float) the soft update coefficient (keep old values, between 0 and 1)
    :param normalize_returns: (bool) should the critic output be normalized
    :param enable_popart: (bool) enable pop-art normalization of the critic output
        (https://arxiv.org/pdf/1602.07714.pdf), normalize_returns must be set to True.
    :param normalize_observations: (bool) should the observation be normalized
    :param batch_size: (int) the size of the batch for learning the policy
    :param observation_range: (tuple) the bounding values for the observation
    :param return_range: (tuple) the bounding values for the critic output
    :param critic_l2_reg: (float) l2 regularizer coefficient
    :param actor_lr: (float) the actor learning rate
    :param critic_lr: (float) the critic learning rate
    :param clip_norm: (float) clip the gradients (disabled if None)
    :param reward_scale: (float) the value the reward should be scaled by
    :param render: (bool) enable rendering of the environment
    :param render_eval: (bool) enable rendering of the evaluation environment
    :param memory_limit: (int) the max number of transitions to store, size of the replay buffer

        .. deprecated:: 2.6.0
            Use `buffer_size` instead.

    :param buffer_size: (int) the max number of transitions to store, size of the replay buffer
    :param random_exploration: (float) Probability of taking a random action (as in an epsilon-greedy strategy)
        This is not needed for DDPG normally but can help exploring when using HER + DDPG.
        This hack was present in the original OpenAI Baselines repo (DDPG + HER)
    :param verbose: (int) the verbosity level: 0 none, 1 training information, 2 tensorflow debug
    :param tensorboard_log: (str) the log location for tensorboard (if None, no logging)
    :param _init_setup_model: (bool) Whether or not to build the network at the creation of the instance
    :param policy_kwargs: (dict) additional arguments to be passed to the policy on creation
    :param full_tensorboard_log: (bool) enable additional logging when using tensorboard
        Note: accepted for compatibility; DDPG writes the same scalars either way
    :param seed: (int) Seed for the pseudo-random generators (python, numpy, tensorflow, env). Under MPI, rank ``r``
        uses ``seed + 10000 * r`` (the network weights come from rank 0).
    :param n_cpu_tf_sess: (int) The number of threads for TensorFlow operations (set once per process, before
        TensorFlow starts; SB2's default 1 is kept)
    :param replay_buffer_class: (type) Replay buffer class to use (e.g. ``HerReplayBuffer``; default ``ReplayBuffer``)
    :param replay_buffer_kwargs: (dict) Keyword arguments of the replay buffer (e.g. ``n_sampled_goal``)
    :param optimize_memory_usage: (bool) Enable a memory efficient variant of the replay buffer
    """

    _not_saved_arguments = {
        "memory_policy": "ignored since stable-baselines 2.x (a warning says so)",
        "eval_env": "an environment: give it again after load() (model.eval_env = ...), as in stable-baselines 2",
        "render": "a display option of the training run (stable-baselines 2 did not store it)",
        "render_eval": "a display option of the training run (stable-baselines 2 did not store it)",
        "use_sde": "only False is accepted (stable-baselines3 has no gSDE for DDPG)",
    }
    _save_schema = dict(
        nb_eval_steps=ms.Integer(0), param_noise_adaption_interval=ms.Integer(1), nb_train_steps=ms.Integer(0),
        nb_rollout_steps=ms.Integer(1), param_noise=ms.Noise(), action_noise=ms.Noise(), gamma=ms.Real(),
        tau=ms.Real(), normalize_returns=ms.Flag(), enable_popart=ms.Flag(), normalize_observations=ms.Flag(),
        batch_size=ms.Integer(1), observation_range=ms.NumberTuple(2), return_range=ms.NumberTuple(2),
        critic_l2_reg=ms.Real(), actor_lr=ms.Schedule(), critic_lr=ms.Schedule(), clip_norm=ms.Nullable(ms.Real()),
        reward_scale=ms.Real(), memory_limit=ms.Nullable(ms.Integer(1)), buffer_size=ms.Integer(1),
        random_exploration=ms.Real(), **REPLAY_BUFFER_SCHEMA)
    _supported_action_spaces = (gym.spaces.Box,)

    def __init__(self, policy, env, gamma=0.99, memory_policy=None, eval_env=None, nb_train_steps=50,
                 nb_rollout_steps=100, nb_eval_steps=100, param_noise=None, action_noise=None,
                 normalize_observations=False, tau=0.001, batch_size=128, param_noise_adaption_interval=50,
                 normalize_returns=False, enable_popart=False, observation_range=(-5., 5.), critic_l2_reg=0.,
                 return_range=(-np.inf, np.inf), actor_lr=1e-4, critic_lr=1e-3, clip_norm=None, reward_scale=1.,
                 render=False, render_eval=False, memory_limit=None, buffer_size=50000, random_exploration=0.0,
                 verbose=0, tensorboard_log=None, _init_setup_model=True, policy_kwargs=None,
                 full_tensorboard_log=False, seed=None, n_cpu_tf_sess=1, replay_buffer_class=None,
                 replay_buffer_kwargs=None, optimize_memory_usage=False, use_sde=False):
        check_hyperparameters(type(self).__name__, locals())
        refuse_sde("DDPG", use_sde)  # stable-baselines3 has no gSDE for DDPG
        self._comm = None
        super().__init__(policy=policy, env=env, replay_buffer=None, verbose=verbose, policy_base=DDPGPolicy,
                         requires_vec_env=False, policy_kwargs=policy_kwargs, seed=seed, n_cpu_tf_sess=n_cpu_tf_sess)
        self._set_replay_buffer_options(replay_buffer_class, replay_buffer_kwargs, optimize_memory_usage)
        self.gamma = gamma
        self.tau = tau

        if memory_policy is not None:
            warnings.warn("memory_policy will be removed in a future version (v3.x.x) it is now ignored and replaced "
                          "with ReplayBuffer", DeprecationWarning)
        if memory_limit is not None:
            warnings.warn("memory_limit will be removed in a future version (v3.x.x) use buffer_size instead",
                          DeprecationWarning)
            buffer_size = memory_limit

        self.normalize_observations = normalize_observations
        self.normalize_returns = normalize_returns
        self.action_noise = action_noise
        self.param_noise = param_noise
        self.return_range = return_range
        self.observation_range = observation_range
        self.actor_lr = actor_lr
        self.critic_lr = critic_lr
        self.clip_norm = clip_norm
        self.enable_popart = enable_popart
        self.reward_scale = reward_scale
        self.batch_size = batch_size
        self.critic_l2_reg = critic_l2_reg
        self.eval_env = eval_env
        self.render = render
        self.render_eval = render_eval
        self.nb_eval_steps = nb_eval_steps
        self.param_noise_adaption_interval = param_noise_adaption_interval
        self.nb_train_steps = nb_train_steps
        self.nb_rollout_steps = nb_rollout_steps
        self.memory_limit = memory_limit
        self.buffer_size = buffer_size
        self.tensorboard_log = tensorboard_log
        self.full_tensorboard_log = full_tensorboard_log
        self.random_exploration = random_exploration

        # init
        self.stats_sample = None
        self.target_policy = None
        self.param_noise_actor = None
        self.adaptive_param_noise_actor = None
        self.obs_rms = None
        self.ret_rms = None
        self.actor_optimizer = None
        self.critic_optimizer = None
        self.params = None
        self.target_params = None
        self.obs_rms_params = None
        self.ret_rms_params = None
        self.stats_names = None
        self.episode_reward = None
        self.tb_seen_steps = None
        self._train_steps = None
        self._train_steps_mpi = None
        self._step_fns = None
        self._compiled_steps = {}
        self._vec_normalize_env = None
        self._last_graph_stddev = None
        self._epoch = EpochStats()
        self._learn_eval_env = None
        self._eval_obs = None
        self._cycles = 0
        self._log_pending = False
        #: use the MPI variant of the fused train call (Allreduce inside) even in one process (tests)
        self._mpi_graph = False
        #: run every gradient step as its own calls, with the Allreduce in Python (SB2's ``_train_step`` structure)
        self._per_step_updates = False

        if self.env is not None:
            self._check_single_env()
        if _init_setup_model:
            self.setup_model()

    # ------------------------------------------------------------------ MPI (see MpiDataParallelMixin)
    def _synced_variables(self) -> list:
        """The variables that must be identical on every rank: model, target and the running statistics (the
        perturbed actors differ: each rank perturbs with its own seeds)."""
        variables = list(self.policy_tf.named_parameters("model").values())
        variables += list(self.target_policy.named_parameters("target").values())
        for stats in (self.obs_rms, self.ret_rms):
            if stats is not None:
                variables += list(stats.named_variables("").values())
        return variables

    def _before_parameter_sync(self) -> None:
        self._flush_stats()

    # ------------------------------------------------------------------ environment
    def _check_single_env(self) -> None:
        if self.n_envs is not None and self.n_envs != 1:
            raise ValueError(f"Error: DDPG runs one environment per process (as in stable-baselines), got a VecEnv "
                             f"with {self.n_envs} envs. To collect experience in parallel, run the script under MPI: "
                             f"mpirun -np {self.n_envs} python your_script.py (see docs/ddpg_her.md).")

    def _on_env_changed(self) -> None:
        self._check_single_env()

    # ------------------------------------------------------------------ setup
    def setup_model(self):
        """
        Build the networks, optimizers and compiled train steps for the model's spaces (the constructor calls it
        unless ``_init_setup_model=False``; ``load`` calls it before restoring the parameters).
        """
        self._check_policy_class(DDPGPolicy, "MlpPolicy", needs_spaces=True)
        policy = self.policy_class
        if not isinstance(self.action_space, gym.spaces.Box):
            raise NotImplementedError(f"Error: DDPG cannot output a {self.action_space!r} action space, only "
                                      "spaces.Box is supported.")
        if self.normalize_observations and isinstance(self.observation_space,
                                                      (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
            raise ValueError(f"Error: normalize_observations=True needs Box or MultiBinary observations, got "
                             f"{self.observation_space!r} (its one-hot encoding has another shape than its "
                             "statistics).")
        if self.enable_popart and not self.normalize_returns:
            warnings.warn("enable_popart=True has no effect without normalize_returns=True (Pop-Art rescales the "
                          "critic to the return statistics), as in stable-baselines.")
        if isinstance(self.replay_buffer, PrioritizedReplayBuffer):
            raise ValueError("Error: DDPG does not support Prioritized Replay Buffer, please use a standard Replay "
                             "Buffer.")
        self.set_random_seed(self.seed)
        comm = self.comm

        self.obs_rms = RunningStats(tuple(self.observation_space.shape), comm, "obs_rms") \
            if self.normalize_observations else None
        self.ret_rms = RunningStats((), comm, "ret_rms") if self.normalize_returns else None

        def make():
            return policy(None, self.observation_space, self.action_space, 1, 1, None, **self.policy_kwargs)

        self.policy_tf = make()
        self.policy_tf.make_actor()
        self.policy_tf.make_critic()
        self.target_policy = make()
        self.target_policy.make_actor()
        self.target_policy.make_critic()
        self.param_noise_actor = None
        self.adaptive_param_noise_actor = None
        if self.param_noise is not None:
            self.param_noise_actor = make()
            self.param_noise_actor.make_actor()
            self.adaptive_param_noise_actor = make()
            self.adaptive_param_noise_actor.make_actor()
        for net in self._policies():
            net.set_obs_normalization(self.obs_rms, self.observation_range)

        self._actor_vars = self.policy_tf.actor_variables()
        self._critic_vars = self.policy_tf.critic_variables()
        self._source_vars = self._actor_vars + self._critic_vars
        self._target_vars = self.target_policy.actor_variables() + self.target_policy.critic_variables()
        assign_variables(zip(self._target_vars, self._source_vars))
        critic_names = list(self.policy_tf.named_parameters("model").keys())[len(self._actor_vars):]
        # SB2 regularises the critic variables whose names contain neither 'bias', 'output' nor 'b'
        self._critic_reg_vars = [var for name, var in zip(critic_names, self._critic_vars)
                                 if 'bias' not in name and 'output' not in name and 'b' not in name]
        self.actor_optimizer = MpiAdam(self._actor_vars, beta1=0.9, beta2=0.999, epsilon=1e-08, comm=comm)
        self.critic_optimizer = MpiAdam(self._critic_vars, beta1=0.9, beta2=0.999, epsilon=1e-08, comm=comm)

        self._train_steps = TrainStepCache(self._build_cycle_step)
        self._train_steps_mpi = None
        self._step_fns = None
        self._compiled_steps = {}
        self._reset_parameter_sync()
        self.stats_sample = None
        self.stats_names = self._stats_names_list()
        named = self._named_parameters()
        self.params = [v for k, v in named.items() if k.split("/")[0] in ("model", "noise", "noise_adapt")]
        self.target_params = [v for k, v in named.items() if k.startswith("target/")]
        self.obs_rms_params = [v for k, v in named.items() if "obs_rms" in k]
        self.ret_rms_params = [v for k, v in named.items() if "ret_rms" in k]
        if self.replay_buffer is None:
            self.replay_buffer = self._make_replay_buffer()
        self._buffer_uses_observation_space()

    @property
    def n_traces(self) -> int:
        """How many times the compiled train functions were traced (constant after warm-up)."""
        return sum(cache.n_traces for cache in (self._train_steps, self._train_steps_mpi) if cache is not None)

    def _policies(self) -> list:
        return [p for p in (self.policy_tf, self.target_policy, self.param_noise_actor,
                            self.adaptive_param_noise_actor) if p is not None]

    # ------------------------------------------------------------------ parameters
    def _flush_stats(self) -> None:
        for stats in (self.obs_rms, self.ret_rms):
            if stats is not None:
                stats.flush()

    def _named_parameters(self) -> "OrderedDict[str, tf.Variable]":
        """SB2's ``get_parameter_list()``: params (model, noise, noise_adapt), target params, obs_rms, ret_rms."""
        self._flush_stats()
        params = OrderedDict(self.policy_tf.named_parameters("model"))
        if self.param_noise_actor is not None:
            params.update(self.param_noise_actor.named_parameters("noise"))
            params.update(self.adaptive_param_noise_actor.named_parameters("noise_adapt"))
        params.update(self.target_policy.named_parameters("target"))
        if self.obs_rms is not None:
            params.update(self.obs_rms.named_variables("input/obs_rms/"))
        if self.ret_rms is not None:
            params.update(self.ret_rms.named_variables("input/ret_rms/"))
        return params

    def _on_parameters_loaded(self) -> None:
        super()._on_parameters_loaded()
        for stats in (self.obs_rms, self.ret_rms):
            if stats is not None:
                stats.pull()

    def export(self, path, format: str = "savedmodel", vecnormalize=None, **kwargs) -> str:  # pylint: disable=W0622
        """
        Flushes the running observation statistics, then:
        Export the deterministic policy (what ``predict(obs, deterministic=True)`` returns) for deployment.

        :param path: (str) output folder (``savedmodel``, ``tfjs``) or file (``onnx``)
        :param format: (str) ``"savedmodel"``, ``"tfjs"`` or ``"onnx"`` (tfjs and onnx need the ``export`` extra)
        :param vecnormalize: (VecNormalize or str) observation statistics to fold in (the export takes raw observations)
        :param kwargs: passed to the registered exporter (e.g. ``opset`` for ONNX)
        :return: (str) the path written
        """
        self._flush_stats()
        return super().export(path, format=format, vecnormalize=vecnormalize, **kwargs)

    def _export_outputs(self, obs) -> dict:
        """The deterministic action (``predict(obs, deterministic=True)``) in TF, for export."""
        action = self.policy_tf.actor(self.policy_tf.normalize_obs_tf(obs))
        low = tf.constant(self.action_space.low, tf.float32)
        high = tf.constant(self.action_space.high, tf.float32)
        return {"action": low + 0.5 * (action + 1.0) * (high - low)}

    # ------------------------------------------------------------------ losses and one gradient step (TF)
    def _tf_target_q(self, obs1, rewards, terminals1):
        """``r + (1 - done) * gamma * denormalize(Q'(s', mu'(s')))``, shape (batch, 1)."""
        target = self.target_policy
        nobs1 = target.normalize_obs_tf(obs1)
        q_obs1 = denormalize(target.critic(nobs1, target.actor(nobs1)), self.ret_rms)
        return rewards[:, None] + (1.0 - terminals1[:, None]) * float(self.gamma) * q_obs1

    def _tf_grads(self, obs0, actions, target_q):
        """Flat (clipped) gradients of the actor and critic losses and the losses, on the current weights."""
        policy = self.policy_tf
        low, high = float(self.return_range[0]), float(self.return_range[1])
        with tf.GradientTape(persistent=True) as tape:
            nobs0 = policy.normalize_obs_tf(obs0)
            normalized_critic = policy.critic(nobs0, actions)
            normalized_target = tf.clip_by_value(normalize(target_q, self.ret_rms), low, high)
            critic_loss = tf.reduce_mean(tf.square(normalized_critic - normalized_target))
            if self.critic_l2_reg > 0. and self._critic_reg_vars:
                critic_loss += float(self.critic_l2_reg) * tf.add_n([tf.nn.l2_loss(v) for v in self._critic_reg_vars])
            critic_with_actor = denormalize(tf.clip_by_value(policy.critic(nobs0, policy.actor(nobs0)), low, high),
                                            self.ret_rms)
            actor_loss = -tf.reduce_mean(critic_with_actor)
        actor_grad = flatgrad(tape.gradient(actor_loss, self._actor_vars), self._actor_vars, clip_norm=self.clip_norm)
        critic_grad = flatgrad(tape.gradient(critic_loss, self._critic_vars), self._critic_vars,
                               clip_norm=self.clip_norm)
        del tape
        return actor_grad, critic_grad, critic_loss, actor_loss

    def _one_step_tf(self, obs0, actions, rewards, obs1, terminals1, actor_lr, critic_lr, mpi: bool = False):
        """
        One full gradient step inside a compiled function: returns [critic_loss, actor_loss]. With ``mpi`` the
        Pop-Art statistics are summed and the gradients averaged over the ranks (``Allreduce`` in the graph).
        """
        target_q = self._tf_target_q(obs1, rewards, terminals1)
        if self.normalize_returns and self.enable_popart:
            old_mean, old_std = self.ret_rms.mean, self.ret_rms.std
            allreduce = (lambda x: self._tf_allreduce(x, mean=False)) if mpi else None
            update_return_statistics(self.ret_rms, target_q, allreduce)
            rescale_critic_outputs((self.policy_tf, self.target_policy), self.ret_rms, old_mean, old_std)
        actor_grad, critic_grad, critic_loss, actor_loss = self._tf_grads(obs0, actions, tf.stop_gradient(target_q))
        if mpi:  # MpiAdam.update's averaging, both optimisers in one Allreduce
            flat = self._tf_allreduce(tf.concat([actor_grad, critic_grad], axis=0), mean=True)
            actor_grad, critic_grad = flat[:self.actor_optimizer.size], flat[self.actor_optimizer.size:]
        updates = [self.actor_optimizer.apply_flat_grad(actor_grad, actor_lr),
                   self.critic_optimizer.apply_flat_grad(critic_grad, critic_lr)]
        with tf.control_dependencies(updates):
            tau = float(self.tau)
            updates = [tf_variable(target).assign((1.0 - tau) * target + tau * source)
                       for target, source in zip(self._target_vars, self._source_vars)]
        # the losses are returned once the step's updates are done: the next step (and its collectives) waits for them
        with tf.control_dependencies(updates):
            return tf.stack([tf.identity(critic_loss), tf.identity(actor_loss)])

    # ------------------------------------------------------------------ hooks of the learn loop
    @contextlib.contextmanager
    def _learn_context(self) -> Iterator[None]:
        """MPI's frame (abort on a failing rank, logger silenced on ranks != 0 and at verbose=0) and TensorBoard
        files written by rank 0 only."""
        tensorboard_log = self.tensorboard_log
        self.tensorboard_log = self._tensorboard_log_for_rank()
        try:
            with self._mpi_learn_context():
                yield
        finally:
            self.tensorboard_log = tensorboard_log

    def _setup_learn(self) -> None:
        self._check_single_env()
        super()._setup_learn()

    def _learn_start(self, total_timesteps: int) -> None:
        self.sync_parameters()
        # a list for tensorboard logging, to prevent logging with the same step number, if it already occurred
        self.tb_seen_steps = []
        self._learn_eval_env = self._make_eval_env()
        self._eval_obs = None
        self._epoch = EpochStats()
        self._cycles = 0
        self._log_pending = False
        self._reset()

    def _store(self, obs_, buffer_actions, rewards_, next_obs, store_dones, infos) -> None:
        if self.rank == 0 and self.render:
            self.env.render()
        self._store_transition(obs_[0], buffer_actions[0], float(rewards_[0]), next_obs[0], float(store_dones[0]),
                               infos[0])

    def _store_transition(self, obs, action, reward, next_obs, done, info) -> None:
        """
        Store a transition in the replay buffer (reward scaled by ``reward_scale``) and update the observation
        statistics with ``obs`` (a collective call under MPI).
        """
        reward *= self.reward_scale
        self.replay_buffer_add(obs, action, reward, next_obs, done, info)
        if self.normalize_observations:
            self.obs_rms.update(np.array([obs]))

    def _on_episode_end(self, episode_reward: float, episode_length: int, info: dict) -> None:
        self._epoch.episode_rewards.append(episode_reward)
        self._epoch.episode_steps.append(episode_length)
        self._epoch.episodes += 1

    def _on_dones(self, dones: np.ndarray) -> None:
        self._reset()

    def _planned_gradient_steps(self, total_timesteps: int) -> Optional[int]:
        return int(total_timesteps) // max(int(self.nb_rollout_steps), 1) * int(self.nb_train_steps)

    def _training_due(self, first_step: int, n_steps: int, state: LearnState) -> Optional[int]:
        """A cycle ends every ``nb_rollout_steps`` environment steps: its number, else None."""
        return self._cycles + 1 if state.steps % self.nb_rollout_steps == 0 else None

    def _train(self, plan: int, state: LearnState, writer) -> None:
        """The end of a cycle: ``nb_train_steps`` gradient steps, the evaluation, the epoch bookkeeping."""
        epoch = self._epoch
        epoch.actor_losses, epoch.critic_losses, epoch.adaptive_distances = [], [], []
        if self.nb_train_steps > 0 and self.replay_buffer.can_sample(self.batch_size):
            train = self._train_per_step if self._per_step_updates else self._train_fused
            losses, distances = train(self.nb_train_steps)
            epoch.critic_losses.append(float(losses[0]))
            epoch.actor_losses.append(float(losses[1]))
            epoch.adaptive_distances.extend(float(d) for d in distances)
            if self.actor_optimizer.step // 100 != (self.actor_optimizer.step - self.nb_train_steps) // 100:
                # SB2's MpiAdam checks every 100 updates that the ranks' parameters agree
                self.check_parameters_synced()
            if writer is not None:
                values = {"train/loss_critic": losses[0], "train/loss_actor": losses[1]}
                if self.param_noise is not None:
                    values["train/param_noise_stddev"] = self.param_noise.current_stddev
                writer.add_scalars(values, self.num_timesteps)
        if self._learn_eval_env is not None and state.steps >= state.total_timesteps:
            return None  # SB2's learn() ends here: neither evaluation nor epoch statistics for this cycle
        self._evaluate()
        self._cycles = plan
        if self._cycles % max(1, int(state.log_interval or 1)) == 0:
            epoch.epoch += 1
            self._log_pending = self.verbose >= 1 and self.replay_buffer.can_sample(self.batch_size)
        return None

    def _log_due(self, state: LearnState, dones: np.ndarray) -> bool:
        """At the end of every epoch (``log_interval`` cycles) once the buffer can sample a batch (verbose >= 1)."""
        due, self._log_pending = self._log_pending, False
        return due

    def _dump_logs(self, state: LearnState) -> None:
        self._log_epoch(state)

    def learn(self, total_timesteps, callback=None, log_interval=100, tb_log_name="DDPG", reset_num_timesteps=True,
              replay_wrapper=None, progress_bar: bool = False):
        """
        Train for ``total_timesteps`` environment steps (per MPI rank, as stable-baselines: under ``mpirun -np N``
        each rank collects ``total_timesteps`` steps).

        :param total_timesteps: (int) The total number of samples to train on
        :param callback: (callable, [BaseCallback] or BaseCallback) called at every step
        :param log_interval: (int) the number of cycles (rollouts + training) between logs (verbose >= 1)
        :param tb_log_name: (str) the name of the run for tensorboard log
        :param reset_num_timesteps: (bool) whether or not to reset the current timestep number (used in logging)
        :param replay_wrapper: (callable) wraps the replay buffer (HER)
        :param progress_bar: (bool) show a progress bar (tqdm)
        :return: (DDPG) the trained model
        """
        return self._learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, replay_wrapper,
                           progress_bar)

    # ------------------------------------------------------------------ predict
    def predict(self, observation, state=None, mask=None, deterministic=True):
        """
        Get the model's action(s) from an observation: the actor's action, plus the noise (perturbed actor with
        parameter noise, action noise) when not deterministic, clipped to [-1, 1] and rescaled to the action space.

        :param observation: (np.ndarray) the input observation (single or batch)
        :param state: (np.ndarray) unused
        :param mask: (np.ndarray) unused
        :param deterministic: (bool) whether to leave the noise out
        :return: (np.ndarray, None) the action(s) and None
        """
        observation, vectorized_env = self._check_obs(observation)
        actions, _ = self._policy(observation, apply_noise=not deterministic, compute_q=False)
        actions = actions.reshape((-1,) + self.action_space.shape)  # reshape to the correct action shape
        actions = unscale_action(self.action_space, actions)  # scale the output for the prediction
        if not vectorized_env:
            actions = actions[0]
        return actions, None

    def action_probability(self, observation, state=None, mask=None, actions=None, logp=False):
        """
        DDPG has no action distribution to report (its policy is deterministic): this warns and returns None,
        as stable-baselines 2.

        :param observation: (np.ndarray) the input observation
        :param state: (np.ndarray) unused (no recurrent policy)
        :param mask: (np.ndarray) unused (no recurrent policy)
        :param actions: (np.ndarray) must be None
        :param logp: (bool) unused
        :return: None
        :raises ValueError: when ``actions`` is given (DDPG cannot compute their probability)
        """
        _ = np.array(observation)
        if actions is not None:
            raise ValueError("Error: DDPG does not have action probabilities.")
        # here there are no action probabilities, as DDPG does not use a probability distribution
        warnings.warn("Warning: action probability is meaningless for DDPG. Returning None")
        return None

    # ------------------------------------------------------------------ behaviour cloning
    def _pretrain_output(self, obs):
        action = self.policy_tf.actor(self.policy_tf.normalize_obs_tf(obs))
        low = tf.constant(self.action_space.low, tf.float32)
        high = tf.constant(self.action_space.high, tf.float32)
        return low + 0.5 * (action + 1.0) * (high - low)

    def _pretrain_variables(self) -> list:
        return list(self._actor_vars)

    def pretrain(self, dataset, n_epochs: int = 10, learning_rate: float = 1e-4, adam_epsilon: float = 1e-8,
                 val_interval: Optional[int] = None):
        """
        Flushes the running observation statistics, then:
        Pretrain the model by behaviour cloning: supervised learning on an expert dataset.

        :param dataset: (ExpertDataset) dataset manager
        :param n_epochs: (int) number of iterations on the training set
        :param learning_rate: (float) learning rate
        :param adam_epsilon: (float) the epsilon value for the adam optimizer
        :param val_interval: (int) report training and validation losses every n epochs (default: n_epochs // 10)
        :return: (BaseRLModel) the pretrained model
        """
        self._flush_stats()
        return super().pretrain(dataset, n_epochs, learning_rate, adam_epsilon, val_interval)


__all__ = ["DDPG", "RunningStats", "normalize", "denormalize"]
