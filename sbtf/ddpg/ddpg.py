"""Deep Deterministic Policy Gradient (stable-baselines 2.x ``DDPG``), data-parallel over MPI.

Training follows SB2's cycle structure: ``nb_rollout_steps`` environment steps with the (noisy) actor, then
``nb_train_steps`` gradient steps (each: critic regression on ``r + gamma * (1 - done) * Q'(s', mu'(s'))``, actor
ascent on ``Q(s, mu(s))``, both gradients taken before either update, two ``MpiAdam`` optimisers with ``actor_lr`` /
``critic_lr``, then the soft target update with ``tau``), then ``nb_eval_steps`` on ``eval_env`` when one is given.
With adaptive parameter noise, every ``param_noise_adaption_interval`` gradient steps a separate copy of the actor
(``noise_adapt/``) is perturbed with the current standard deviation and the noise is scaled by the
``adoption_coefficient`` towards ``desired_action_stddev`` (the distance between perturbed and unperturbed actions);
the actor copy that acts (``noise/``) is re-perturbed at the start of every episode.

How it runs:

* one process (no ``mpirun``): the ``nb_train_steps`` gradient steps of a cycle (with the parameter-noise adaptions,
  Pop-Art rescaling and target updates between them) are **one** compiled ``tf.function`` call on stacked
  minibatches, using ``MpiAdam``'s in-graph update (``apply_flat_grad``); acting is a NumPy forward pass on weights
  the call returns (Mlp policies);
* under ``mpirun -np N`` each rank collects its own experience into its own replay buffer; every gradient step the
  flat gradients are averaged over the ranks (one ``Allreduce``, as ``MpiAdam.update``) and applied by the two
  ``MpiAdam`` optimisers, the parameter-noise distance is averaged, and the Pop-Art return statistics are summed over
  the ranks; the cycle is still one compiled call, with those ``Allreduce`` inside it (``tf.numpy_function``, in
  program order; no XLA). The observation statistics are summed over the ranks after every environment step. So the
  ranks' networks stay identical (``learn()`` starts by broadcasting rank 0's parameters, and every 100 updates the
  ranks check that they agree). Seeds are ``seed + 10000 * rank``; only rank 0 logs and saves; a rank that fails
  aborts the whole job (``mpi_util.abort_on_exception``). ``_per_step_updates=True`` runs SB2's structure instead
  (one ``_train_step`` call per gradient step, the ``Allreduce`` in Python): same maths, slower.
"""
from __future__ import annotations

import contextlib
import time
import warnings
from collections import OrderedDict, deque
from typing import Iterator, List, Optional, Tuple

import gymnasium as gym
import numpy as np
import tensorflow as tf

from sbtf import logger
from sbtf.common.base_class import SetVerbosity, TensorboardWriter
from sbtf.common.buffers import PrioritizedReplayBuffer, ReplayBuffer
from sbtf.common.math_util import safe_mean, scale_action, total_episode_reward_logger, unscale_action
from sbtf.common.mpi_adam import MpiAdam
from sbtf.common.mpi_running_mean_std import RunningMeanStd
from sbtf.common.mpi_util import (abort_on_exception, allreduce_sum, get_comm, install_abort_excepthook, rank_seed,
                                  sync_check)
from sbtf.common.off_policy import FastFunction, FlatLayout, OffPolicyAlgorithm, TrainFunctionCache, polyak_update
from sbtf.common.off_policy_ops import tf_variable as _tf_variable
from sbtf.common.tf_util import GetFlat, SetFromFlat, flatgrad
from sbtf.ddpg.policies import DDPGPolicy
from sbtf.common import model_schema as ms


# ---------------------------------------------------------------------------------------------------------------
# running statistics (obs_rms / ret_rms)
# ---------------------------------------------------------------------------------------------------------------
class RunningStats:
    """
    SB2's ``obs_rms`` / ``ret_rms`` of DDPG: sums ``runningsum``, ``runningsumsq``, ``count`` (float64, initial
    0, 1e-2, 1e-2) shared over MPI, ``mean = sum / count``, ``std = sqrt(max(sumsq / count - mean^2, 1e-2))``.

    The TF variables (``input/obs_rms/...``, what is saved and what compiled train functions read) belong to an
    ``mpi_running_mean_std.RunningMeanStd``. DDPG updates the statistics after every environment step (as SB2), so a
    float64 NumPy copy of the sums is kept as well: ``update`` adds to it (summed over the ranks: a collective call
    under MPI), acting reads ``mean_np()`` / ``std_np()`` from it, and ``flush()`` writes it to the variables before
    they are read (train calls, saving). ``pull()`` goes the other way (after an in-graph update or a load).

    :param shape: (tuple) shape of one value
    :param comm: (Comm) the communicator
    :param name: (str) scope of the variables
    """

    def __init__(self, shape: Tuple[int, ...], comm, name: str):
        self.rms = RunningMeanStd(epsilon=1e-2, shape=shape, comm=comm, name=name)
        self.shape = self.rms.shape
        self.comm = comm
        self._sum = np.zeros(self.shape, np.float64)
        self._sumsq = np.full(self.shape, 1e-2, np.float64)
        self._count = 1e-2
        self._dirty = False
        self._np_stats: Optional[Tuple[np.ndarray, np.ndarray]] = None

    # TF side (inside compiled functions)
    @property
    def mean(self) -> tf.Tensor:
        return self.rms.mean

    @property
    def std(self) -> tf.Tensor:
        return self.rms.std

    def update_tf(self, data) -> None:
        """Add a batch to the variables inside a compiled function (one process only)."""
        data = tf.reshape(tf.cast(data, tf.float64), (-1,) + self.shape)
        self.rms._sum.assign_add(tf.reduce_sum(data, axis=0))
        self.rms._sumsq.assign_add(tf.reduce_sum(tf.square(data), axis=0))
        self.rms._count.assign_add(tf.cast(tf.shape(data)[0], tf.float64))

    # NumPy side
    def update(self, data) -> None:
        """Add a batch (first axis = samples) to the statistics of every rank (collective under MPI)."""
        data = np.asarray(data, dtype=np.float64).reshape((-1,) + self.shape)
        size = int(np.prod(self.shape)) if self.shape else 1
        addvec = np.concatenate([data.sum(axis=0).ravel(), np.square(data).sum(axis=0).ravel(),
                                 np.array([len(data)], dtype=np.float64)])
        total = allreduce_sum(addvec, self.comm)
        self._sum = self._sum + total[:size].reshape(self.shape)
        self._sumsq = self._sumsq + total[size:2 * size].reshape(self.shape)
        self._count = self._count + float(total[2 * size])
        self._dirty = True
        self._np_stats = None

    def _stats(self) -> Tuple[np.ndarray, np.ndarray]:
        if self._np_stats is None:
            mean = (self._sum / self._count).astype(np.float32)
            var = (self._sumsq / self._count).astype(np.float32) - np.square(mean)
            self._np_stats = (mean, np.sqrt(np.maximum(var, np.float32(1e-2))).astype(np.float32))
        return self._np_stats

    def mean_np(self) -> np.ndarray:
        return self._stats()[0]

    def std_np(self) -> np.ndarray:
        return self._stats()[1]

    def flush(self) -> None:
        """Write the NumPy sums to the TF variables (when they changed)."""
        if self._dirty:
            self.rms.set_state(self._sum, self._sumsq, self._count)
            self._dirty = False

    def pull(self) -> None:
        """Read the TF variables into the NumPy sums."""
        self._sum = np.array(self.rms._sum.numpy(), np.float64).reshape(self.shape)
        self._sumsq = np.array(self.rms._sumsq.numpy(), np.float64).reshape(self.shape)
        self._count = float(self.rms._count.numpy())
        self._dirty = False
        self._np_stats = None

    def named_variables(self, prefix: str) -> "OrderedDict[str, tf.Variable]":
        return self.rms.named_variables(prefix)


def normalize(tensor, stats: Optional[RunningStats]):
    """Normalise a tensor with running statistics (identity without): ``(x - mean) / std``."""
    if stats is None:
        return tensor
    return (tensor - stats.mean) / stats.std


def denormalize(tensor, stats: Optional[RunningStats]):
    """Inverse of ``normalize``: ``x * std + mean``."""
    if stats is None:
        return tensor
    return tensor * stats.std + stats.mean


def _np_normalize(x, stats: Optional[RunningStats]):
    return x if stats is None else (x - stats.mean_np()) / stats.std_np()


def _np_denormalize(x, stats: Optional[RunningStats]):
    return x if stats is None else x * stats.std_np() + stats.mean_np()


def reduce_std(tensor, axis=None, keepdims=False):
    """Standard deviation of a tensor."""
    mean = tf.reduce_mean(tensor, axis=axis, keepdims=True)
    return tf.sqrt(tf.reduce_mean(tf.square(tensor - mean), axis=axis, keepdims=keepdims))


# ---------------------------------------------------------------------------------------------------------------
# the model
# ---------------------------------------------------------------------------------------------------------------
class DDPG(OffPolicyAlgorithm):
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
    """

    _save_schema = dict(
        nb_eval_steps=ms.Integer(0), param_noise_adaption_interval=ms.Integer(1), nb_train_steps=ms.Integer(0),
        nb_rollout_steps=ms.Integer(1), param_noise=ms.Noise(), action_noise=ms.Noise(), gamma=ms.Real(),
        tau=ms.Real(), normalize_returns=ms.Flag(), enable_popart=ms.Flag(), normalize_observations=ms.Flag(),
        batch_size=ms.Integer(1), observation_range=ms.NumberTuple(2), return_range=ms.NumberTuple(2),
        critic_l2_reg=ms.Real(), actor_lr=ms.Schedule(), critic_lr=ms.Schedule(), clip_norm=ms.Nullable(ms.Real()),
        reward_scale=ms.Real(), memory_limit=ms.Nullable(ms.Integer(1)), buffer_size=ms.Integer(1),
        random_exploration=ms.Real())
    _supported_action_spaces = (gym.spaces.Box,)

    def __init__(self, policy, env, gamma=0.99, memory_policy=None, eval_env=None, nb_train_steps=50,
                 nb_rollout_steps=100, nb_eval_steps=100, param_noise=None, action_noise=None,
                 normalize_observations=False, tau=0.001, batch_size=128, param_noise_adaption_interval=50,
                 normalize_returns=False, enable_popart=False, observation_range=(-5., 5.), critic_l2_reg=0.,
                 return_range=(-np.inf, np.inf), actor_lr=1e-4, critic_lr=1e-3, clip_norm=None, reward_scale=1.,
                 render=False, render_eval=False, memory_limit=None, buffer_size=50000, random_exploration=0.0,
                 verbose=0, tensorboard_log=None, _init_setup_model=True, policy_kwargs=None,
                 full_tensorboard_log=False, seed=None, n_cpu_tf_sess=1):
        self._comm = None
        super().__init__(policy=policy, env=env, replay_buffer=None, verbose=verbose, policy_base=DDPGPolicy,
                         requires_vec_env=False, policy_kwargs=policy_kwargs, seed=seed, n_cpu_tf_sess=n_cpu_tf_sess)
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
        self._train_fns = None
        self._step_fns = None
        self._misc_fns = None
        self._flat_io = None
        self._vec_normalize_env = None
        self._last_graph_stddev = None
        self._train_fns_mpi = None
        #: use the MPI variant of the fused train call (Allreduce inside) even in one process (tests)
        self._mpi_graph = False
        #: run every gradient step as its own calls, with the Allreduce in Python (SB2's ``_train_step`` structure)
        self._per_step_updates = False

        if self.env is not None:
            self._check_single_env()
        if _init_setup_model:
            self.setup_model()

    # ------------------------------------------------------------------ MPI
    @property
    def comm(self):
        """The communicator (``MPI.COMM_WORLD`` under mpirun, else a one-process stand-in)."""
        if self._comm is None:
            self._comm = get_comm()
        return self._comm

    @property
    def rank(self) -> int:
        return int(self.comm.Get_rank())

    @property
    def nworkers(self) -> int:
        return int(self.comm.Get_size())

    def set_random_seed(self, seed: Optional[int]) -> None:
        """
        Seed python, numpy, TF and the env with ``seed + 10000 * rank`` (rank 0: ``seed``), so that MPI ranks collect
        different experience; the network weights are shared from rank 0 when ``learn()`` starts.

        :param seed: (int) the seed; None does nothing
        """
        super().set_random_seed(rank_seed(seed, self.comm))

    def _synced_variables(self) -> list:
        """The variables that must be identical on every rank: model, target and the running statistics."""
        variables = list(self.policy_tf.named_parameters("model").values())
        variables += list(self.target_policy.named_parameters("target").values())
        for stats in (self.obs_rms, self.ret_rms):
            if stats is not None:
                variables += list(stats.named_variables("").values())
        return variables

    def _flat_param_io(self):
        if self._flat_io is None:
            variables = self._synced_variables()
            self._flat_io = (GetFlat([v for v in variables if v.dtype == tf.float32]),
                             SetFromFlat([v for v in variables if v.dtype == tf.float32]),
                             [v for v in variables if v.dtype == tf.float64])
        return self._flat_io

    def sync_parameters(self) -> None:
        """Broadcast rank 0's networks and statistics to every rank (collective; nothing to do in one process)."""
        if self.nworkers == 1:
            return
        self._flush_stats()
        getflat, setfromflat, stats_vars = self._flat_param_io()
        theta = np.ascontiguousarray(getflat(), dtype=np.float32)
        self.comm.Bcast(theta, root=0)
        setfromflat(theta)
        for var in stats_vars:
            value = np.ascontiguousarray(np.array(var.numpy(), np.float64).reshape(-1))
            self.comm.Bcast(value, root=0)
            var.assign(value.reshape(var.shape))
        self._on_parameters_loaded()

    def check_parameters_synced(self) -> None:
        """Raise ``MpiSyncError`` when any rank's networks or statistics differ from rank 0's (collective)."""
        if self.nworkers == 1:
            return
        self._flush_stats()
        getflat, _, stats_vars = self._flat_param_io()
        flat = np.concatenate([getflat().astype(np.float64)] + [np.ravel(v.numpy()) for v in stats_vars])
        sync_check(flat, name="DDPG parameters", comm=self.comm)

    @contextlib.contextmanager
    def _mpi_learn_context(self) -> Iterator[None]:
        """Abort the job on a failure (several ranks); silence the logger on ranks other than 0."""
        comm = self.comm
        install_abort_excepthook(comm)
        old_level = None
        if self.rank > 0:
            old_level = logger.get_level()
            logger.set_level(logger.DISABLED)
        try:
            with abort_on_exception(comm, where="in DDPG.learn()"):
                yield
        finally:
            if old_level is not None:
                logger.set_level(old_level)

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
        policy = self.policy
        if not (isinstance(policy, type) and issubclass(policy, DDPGPolicy)):
            raise ValueError(f"Error: the input policy for the DDPG model must be a subclass of "
                             f"sbtf.ddpg.policies.DDPGPolicy (e.g. 'MlpPolicy'), got {policy!r}.")
        if self.observation_space is None or self.action_space is None:
            raise ValueError("Error: DDPG needs an environment (or the spaces of a saved model) to build its networks.")
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
        for target, source in zip(self._target_vars, self._source_vars):
            target.assign(source)
        critic_names = list(self.policy_tf.named_parameters("model").keys())[len(self._actor_vars):]
        # SB2 regularises the critic variables whose names contain neither 'bias', 'output' nor 'b'
        self._critic_reg_vars = [var for name, var in zip(critic_names, self._critic_vars)
                                 if 'bias' not in name and 'output' not in name and 'b' not in name]
        self.actor_optimizer = MpiAdam(self._actor_vars, beta1=0.9, beta2=0.999, epsilon=1e-08, comm=comm)
        self.critic_optimizer = MpiAdam(self._critic_vars, beta1=0.9, beta2=0.999, epsilon=1e-08, comm=comm)

        self._train_fns = TrainFunctionCache(self._build_train_fn, jit_compile=self._use_xla(self.policy_tf))
        self._train_fns_mpi = None
        self._train_layouts = {}
        self._step_fns = None
        self._misc_fns = {}
        self._flat_io = None
        self.stats_sample = None
        self.stats_names = self._stats_names_list()
        named = self._named_parameters()
        self.params = [v for k, v in named.items() if k.split("/")[0] in ("model", "noise", "noise_adapt")]
        self.target_params = [v for k, v in named.items() if k.startswith("target/")]
        self.obs_rms_params = [v for k, v in named.items() if "obs_rms" in k]
        self.ret_rms_params = [v for k, v in named.items() if "ret_rms" in k]
        if self.replay_buffer is None:
            self.replay_buffer = ReplayBuffer(self.buffer_size)

    @property
    def n_traces(self) -> int:
        """How many times the compiled train functions were traced (constant after warm-up)."""
        return sum(cache.n_traces for cache in (self._train_fns, self._train_fns_mpi) if cache is not None)

    def _policies(self) -> list:
        return [p for p in (self.policy_tf, self.target_policy, self.param_noise_actor,
                            self.adaptive_param_noise_actor) if p is not None]

    def _stats_names_list(self) -> List[str]:
        names = []
        if self.normalize_returns:
            names += ['ret_rms_mean', 'ret_rms_std']
        if self.normalize_observations:
            names += ['obs_rms_mean', 'obs_rms_std']
        names += ['reference_Q_mean', 'reference_Q_std', 'reference_actor_Q_mean', 'reference_actor_Q_std',
                  'reference_action_mean', 'reference_action_std']
        if self.param_noise is not None:
            names += ['reference_perturbed_action_mean', 'reference_perturbed_action_std']
        return names

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

    def save(self, save_path, cloudpickle: bool = False) -> None:
        """
        Save the model to a zip file (atomically). ``.zip`` is appended when the path has no extension.

        Under MPI only rank 0 writes the file (the other ranks' networks are identical to it).

        :param save_path: (str or file-like) where to save
        :param cloudpickle: (bool) ignored: sbtf always writes its zip format
        """
        if self.rank != 0:
            return
        super().save(save_path, cloudpickle=cloudpickle)

    def export(self, path, format: str = "savedmodel", vecnormalize=None, **kwargs) -> str:  # pylint: disable=W0622
        self._flush_stats()
        return super().export(path, format=format, vecnormalize=vecnormalize, **kwargs)

    def _export_outputs(self, obs) -> dict:
        """The deterministic action (``predict(obs, deterministic=True)``) in TF, for export."""
        action = self.policy_tf.actor(self.policy_tf.normalize_obs_tf(obs))
        low = tf.constant(self.action_space.low, tf.float32)
        high = tf.constant(self.action_space.high, tf.float32)
        return {"action": low + 0.5 * (action + 1.0) * (high - low)}

    # ------------------------------------------------------------------ TF building blocks
    def _tf_target_q(self, obs1, rewards, terminals1):
        """``r + (1 - done) * gamma * denormalize(Q'(s', mu'(s')))``, shape (batch, 1)."""
        target = self.target_policy
        nobs1 = target.normalize_obs_tf(obs1)
        q_obs1 = denormalize(target.critic(nobs1, target.actor(nobs1)), self.ret_rms)
        return rewards[:, None] + (1.0 - terminals1[:, None]) * float(self.gamma) * q_obs1

    def _tf_popart(self, old_mean, old_std) -> None:
        """Rescale ``qf_output`` of the critic and of the target critic to the new return statistics (Pop-Art)."""
        new_mean, new_std = self.ret_rms.mean, self.ret_rms.std
        for net in (self.policy_tf, self.target_policy):
            kernel, bias = net.qf_output_variables()
            kernel.assign(kernel * old_std / new_std)
            bias.assign((bias * old_std + old_mean - new_mean) / new_std)

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

    def _tf_perturb(self, targets: list, std, seed) -> None:
        """``targets <- actor + N(0, std)`` for every perturbable actor variable (SB2: all but LayerNorm)."""
        mask = self.policy_tf.perturbable_mask()
        for i, (target, source, noisy) in enumerate(zip(targets, self._actor_vars, mask)):
            if noisy:
                noise = tf.random.stateless_normal(tf.shape(source), seed=seed + tf.constant([0, i], tf.int64),
                                                   stddev=std)
                target.assign(source + noise)
            else:
                target.assign(source)

    def _tf_adapt(self, adapt_obs, std, seed, mpi: bool = False):
        """Perturb ``noise_adapt/`` with ``std``; the RMS distance between its actions and the actor's (the mean over
        the ranks with ``mpi``)."""
        self._tf_perturb(self.adaptive_param_noise_actor.actor_variables(), std, seed)
        nobs = self.policy_tf.normalize_obs_tf(adapt_obs)
        diff = self.policy_tf.actor(nobs) - self.adaptive_param_noise_actor.actor(nobs)
        distance = tf.sqrt(tf.reduce_mean(tf.square(diff)))
        return self._tf_allreduce(distance, mean=True) if mpi else distance

    def _np_allreduce_sum(self, value: np.ndarray) -> np.ndarray:
        return allreduce_sum(value, self.comm)

    def _np_allreduce_mean(self, value: np.ndarray) -> np.ndarray:
        return (allreduce_sum(value, self.comm) / self.nworkers).astype(value.dtype, copy=False)

    def _tf_allreduce(self, tensor, mean: bool = True):
        """
        Sum (or mean) of ``tensor`` over the MPI ranks, from inside a compiled function: an ``Allreduce`` run by
        ``tf.numpy_function`` (stateful, so TensorFlow keeps the program order of these collective calls).
        """
        fn = self._np_allreduce_mean if mean else self._np_allreduce_sum
        out = tf.numpy_function(fn, [tensor], tensor.dtype, stateful=True)
        out.set_shape(tensor.shape)
        return out

    def _one_step_tf(self, obs0, actions, rewards, obs1, terminals1, actor_lr, critic_lr, mpi: bool = False):
        """
        One full gradient step inside a compiled function: returns [critic_loss, actor_loss]. With ``mpi`` the
        Pop-Art statistics are summed and the gradients averaged over the ranks (``Allreduce`` in the graph).
        """
        target_q = self._tf_target_q(obs1, rewards, terminals1)
        if self.normalize_returns and self.enable_popart:
            old_mean, old_std = self.ret_rms.mean, self.ret_rms.std
            if mpi:
                data = tf.cast(tf.reshape(target_q, (-1,)), tf.float64)
                totals = self._tf_allreduce(tf.stack([tf.reduce_sum(data), tf.reduce_sum(tf.square(data)),
                                                      tf.cast(tf.size(data), tf.float64)]), mean=False)
                self.ret_rms.rms._sum.assign_add(totals[0])
                self.ret_rms.rms._sumsq.assign_add(totals[1])
                self.ret_rms.rms._count.assign_add(totals[2])
            else:
                self.ret_rms.update_tf(target_q)
            self._tf_popart(old_mean, old_std)
        actor_grad, critic_grad, critic_loss, actor_loss = self._tf_grads(obs0, actions, tf.stop_gradient(target_q))
        if mpi:  # MpiAdam.update's averaging, both optimisers in one Allreduce
            flat = self._tf_allreduce(tf.concat([actor_grad, critic_grad], axis=0), mean=True)
            actor_grad, critic_grad = flat[:self.actor_optimizer.size], flat[self.actor_optimizer.size:]
        updates = [self.actor_optimizer.apply_flat_grad(actor_grad, actor_lr),
                   self.critic_optimizer.apply_flat_grad(critic_grad, critic_lr)]
        with tf.control_dependencies(updates):
            tau = float(self.tau)
            updates = [_tf_variable(target).assign((1.0 - tau) * target + tau * source)
                       for target, source in zip(self._target_vars, self._source_vars)]
        # the losses are returned once the step's updates are done: the next step (and its collectives) waits for them
        with tf.control_dependencies(updates):
            return tf.stack([tf.identity(critic_loss), tf.identity(actor_loss)])

    # ------------------------------------------------------------------ fused training (one process)
    def _adapt_points(self, n_steps: int) -> List[int]:
        if self.param_noise is None:
            return []
        return list(range(0, n_steps, max(1, int(self.param_noise_adaption_interval))))

    def _build_train_fn(self, n_steps: int, variant=None):
        """
        ``n_steps`` gradient steps (with their parameter-noise adaptions) in one compiled call; ``variant="mpi"``
        averages the gradients and the parameter-noise distances, and sums the Pop-Art statistics, over the MPI ranks
        at every step (``Allreduce`` inside the call, so it is not XLA-compiled).
        """
        mpi = variant == "mpi"
        batch = int(self.batch_size)
        n_act = self.policy_tf.n_act
        obs_shape = tuple(self.policy_tf.obs_shape)
        obs_dtype = tf.as_dtype(self.policy_tf.obs_dtype)
        n_adapt = len(self._adapt_points(n_steps))
        interval = max(1, int(self.param_noise_adaption_interval))
        k_b = (n_steps, batch)
        in_layout = FlatLayout([k_b + (n_act,), k_b, k_b, (), (), (), (max(n_adapt, 1), 2)])
        out_layout = FlatLayout([(2,), (max(n_adapt, 1),), ()] + [tuple(v.shape) for v in self._actor_vars])
        spec = self.param_noise
        desired = float(spec.desired_action_stddev) if spec is not None else 0.0
        coefficient = float(spec.adoption_coefficient) if spec is not None else 1.0

        def train(obs_all, floats):
            actions, rewards, dones, actor_lr, critic_lr, std, seeds = in_layout.unpack_tf(floats)
            seeds = tf.cast(seeds, tf.int64)

            def adapt(k, std, distances):
                """SB2's adaption before gradient step ``k`` (k % interval == 0): perturb, measure, scale the noise."""
                index = k // interval
                distance = self._tf_adapt(obs_all[2 * n_steps + index], std, seeds[index], mpi=mpi)
                distances = tf.tensor_scatter_nd_update(distances, tf.reshape(index, (1, 1)),
                                                        tf.reshape(distance, (1,)))
                return tf.where(distance > desired, std / coefficient, std * coefficient), distances

            def step(k, totals, std, distances):
                # explicit order (the collective calls of the MPI variant must run in the same order on every
                # rank): the previous step's updates, then this step's adaption, then its gradient step
                if n_adapt:
                    with tf.control_dependencies([totals]):
                        std, distances = tf.cond(tf.equal(k % interval, 0), lambda: adapt(k, std, distances),
                                                 lambda: (tf.identity(std), tf.identity(distances)))
                with tf.control_dependencies([totals, std, distances]):
                    totals = totals + self._one_step_tf(obs_all[k], actions[k], rewards[k], obs_all[n_steps + k],
                                                        dones[k], actor_lr, critic_lr, mpi=mpi)
                return totals, std, distances

            totals = tf.zeros((2,), tf.float32)
            distances = tf.zeros((max(n_adapt, 1),), tf.float32)
            if n_steps == 1:
                totals, std, distances = step(tf.constant(0), totals, std, distances)
            else:
                _, totals, std, distances = tf.while_loop(
                    lambda k, *_: k < n_steps, lambda k, t, s, d: (k + 1,) + step(k, t, s, d),
                    (tf.constant(0), totals, std, distances), parallel_iterations=1)
            return out_layout.flatten_tf([totals / float(n_steps), distances, std]
                                         + [tf.identity(v) for v in self._actor_vars])

        self._train_layouts[(n_steps, variant)] = (in_layout, out_layout, n_adapt)
        signature = [tf.TensorSpec((2 * n_steps + n_adapt, batch) + obs_shape, obs_dtype),
                     tf.TensorSpec((in_layout.size,), tf.float32)]
        return train, signature

    def _sample_train_batches(self, n_steps: int, n_adapt: int):
        rb = self.replay_buffer
        obs0, actions, rewards, obs1, dones = rb.sample(self.batch_size * n_steps, env=self._vec_normalize_env)
        adapt_obs = rb.sample(self.batch_size * n_adapt, env=self._vec_normalize_env)[0] if n_adapt else None
        return obs0, actions, rewards, obs1, dones, adapt_obs

    def _train_fused(self, n_steps: int) -> Tuple[np.ndarray, np.ndarray]:
        """
        ``n_steps`` gradient steps in one compiled call; returns (mean [critic, actor] losses, distances). Under MPI
        (or with ``_mpi_graph``) the call is the ``"mpi"`` variant, whose ``Allreduce`` run inside it.
        """
        if self.nworkers > 1 or self._mpi_graph:
            if self._train_fns_mpi is None:
                self._train_fns_mpi = TrainFunctionCache(self._build_train_fn, jit_compile=False)
            variant, fn = "mpi", self._train_fns_mpi.get(n_steps, "mpi")
        else:
            variant, fn = None, self._train_fns.get(n_steps, None)
        in_layout, out_layout, n_adapt = self._train_layouts[(n_steps, variant)]
        obs0, actions, rewards, obs1, dones, adapt_obs = self._sample_train_batches(n_steps, n_adapt)
        batch = self.batch_size
        obs_dtype, obs_shape = self.policy_tf.obs_dtype, tuple(self.policy_tf.obs_shape)
        parts = [obs0.reshape((n_steps, batch) + obs_shape), obs1.reshape((n_steps, batch) + obs_shape)]
        if n_adapt:
            parts.append(adapt_obs.reshape((n_adapt, batch) + obs_shape))
        obs_all = np.concatenate(parts).astype(obs_dtype, copy=False)
        std = self.param_noise.current_stddev if self.param_noise is not None else 0.0
        seeds = np.random.randint(0, 2 ** 24, size=(max(n_adapt, 1), 2))
        self._flush_stats()
        floats = in_layout.pack([actions, rewards, dones, self.actor_lr, self.critic_lr, std, seeds])
        out = fn(obs_all, floats).numpy()
        losses, distances, new_std, *actor_weights = out_layout.unpack_np(out)
        self._last_graph_stddev = float(new_std)
        if self.param_noise is not None:
            # the same sequence of adapt() calls as SB2's, with the distances computed in the compiled call
            for distance in distances[:n_adapt]:
                self.param_noise.adapt(float(distance))
            self.adaptive_param_noise_actor.mark_weights_changed()
        if self.ret_rms is not None and self.enable_popart:
            self.ret_rms.pull()
        self.policy_tf.mark_weights_changed()
        if self.policy_tf.has_numpy_path:
            self.policy_tf.set_numpy_actor_weights(actor_weights)
        self.target_policy.mark_weights_changed()
        return losses, distances[:n_adapt]

    # ------------------------------------------------------------------ per-step training (MPI)
    def _step_functions(self) -> dict:
        """
        The compiled calls of one gradient step under MPI: ``grads`` (target Q, both losses and their flat gradients,
        concatenated with the losses: one tensor out), then, after the ranks' gradients are averaged with one
        ``Allreduce``, ``apply`` (both ``MpiAdam`` steps with the averaged gradients and the soft target update).
        With Pop-Art the target Q comes first (``target_q``), so that the return statistics can be updated over the
        ranks and the critics rescaled (``popart``) before the gradients are taken.
        """
        if self._step_fns is None:
            policy = self.policy_tf
            batch_obs = policy.obs_signature()
            n_act = policy.n_act
            vec = tf.TensorSpec((None,), tf.float32)
            scalar = tf.TensorSpec((), tf.float32)
            n_actor = self.actor_optimizer.size

            def flat_out(obs0, actions, target_q):
                actor_grad, critic_grad, critic_loss, actor_loss = self._tf_grads(obs0, actions, target_q)
                return tf.concat([actor_grad, critic_grad, tf.stack([critic_loss, actor_loss])], axis=0)

            def grads(obs0, actions, rewards, obs1, terminals1):
                return flat_out(obs0, actions, tf.stop_gradient(self._tf_target_q(obs1, rewards, terminals1)))

            def grads_given_target(obs0, actions, target_q):
                return flat_out(obs0, actions, target_q)

            def target_q(obs1, rewards, terminals1):
                return self._tf_target_q(obs1, rewards, terminals1)

            def popart(old_mean, old_std):
                self._tf_popart(old_mean, old_std)
                return tf.constant(True)

            def apply(flat_grad, actor_lr, critic_lr):
                self.actor_optimizer.apply_flat_grad(flat_grad[:n_actor], actor_lr)
                self.critic_optimizer.apply_flat_grad(flat_grad[n_actor:], critic_lr)
                polyak_update(self._target_vars, self._source_vars, float(self.tau))
                return tf.constant(True)

            def target_update():
                polyak_update(self._target_vars, self._source_vars, float(self.tau))
                return tf.constant(True)

            def compile_(fn, signature):
                return FastFunction(tf.function(fn, input_signature=signature).get_concrete_function())

            actions = tf.TensorSpec((None, n_act), tf.float32)
            self._step_fns = {
                "grads": compile_(grads, [batch_obs, actions, vec, batch_obs, vec]),
                "apply": compile_(apply, [tf.TensorSpec((n_actor + self.critic_optimizer.size,), tf.float32),
                                          scalar, scalar]),
                "target_update": compile_(target_update, []),
            }
            if self.normalize_returns and self.enable_popart:
                self._step_fns["target_q"] = compile_(target_q, [batch_obs, vec, vec])
                self._step_fns["grads_given_target"] = compile_(grads_given_target,
                                                                [batch_obs, actions, tf.TensorSpec((None, 1),
                                                                                                   tf.float32)])
                self._step_fns["popart"] = compile_(popart, [scalar, scalar])
        return self._step_fns

    def _misc_function(self, name: str):
        """Compiled helpers shared by both paths (parameter-noise perturbation and adaption, statistics)."""
        if name not in self._misc_fns:
            policy = self.policy_tf
            scalar, seed_spec = tf.TensorSpec((), tf.float32), tf.TensorSpec((2,), tf.int64)
            if name == "perturb":
                def fn(std, seed):
                    targets = self.param_noise_actor.actor_variables()
                    self._tf_perturb(targets, std, seed)
                    return [tf.identity(v) for v in targets]
                signature = [scalar, seed_spec]
            elif name == "adapt":
                def fn(adapt_obs, std, seed):
                    return self._tf_adapt(adapt_obs, std, seed)
                signature = [policy.obs_signature(), scalar, seed_spec]
            elif name == "stats":
                def fn(obs0, actions):
                    return self._tf_stats(obs0, actions)
                signature = [policy.obs_signature(), tf.TensorSpec((None, policy.n_act), tf.float32)]
            elif name == "act":
                def fn(obs):
                    return self._tf_act(obs)
                signature = [policy.obs_signature()]
            else:
                raise KeyError(name)
            self._misc_fns[name] = FastFunction(tf.function(fn, input_signature=signature).get_concrete_function())
        return self._misc_fns[name]

    def _train_step(self, step=None, writer=None, log=False, batch=None) -> Tuple[float, float]:
        """
        One gradient step with the gradients averaged over the MPI ranks (SB2's ``_train_step``): the flat actor and
        critic gradients of this rank's minibatch are averaged over the ranks (one ``Allreduce``, as
        ``MpiAdam.update`` does) and applied with the ``MpiAdam`` optimisers' update, then the targets move by ``tau``.
        Every 100 updates ``learn()`` checks that the ranks' parameters agree (as ``MpiAdam.update`` did).

        :param step: (int) the step number for TensorBoard (unused)
        :param writer: unused (TensorBoard scalars are written per cycle)
        :param log: (bool) unused
        :param batch: (tuple) a minibatch (obs0, actions, rewards, obs1, terminals1); sampled when None
        :return: (float, float) critic loss, actor loss
        """
        fns = self._step_functions()
        if batch is None:
            batch = self.replay_buffer.sample(self.batch_size, env=self._vec_normalize_env)
        obs0, actions, rewards, obs1, terminals1 = batch
        policy = self.policy_tf
        obs0 = policy._prepare_obs(obs0)
        obs1 = policy._prepare_obs(obs1)
        actions = np.asarray(actions, np.float32)
        rewards = np.asarray(rewards, np.float32).reshape(-1)
        terminals1 = np.asarray(terminals1, np.float32).reshape(-1)
        self._flush_stats()
        if self.normalize_returns and self.enable_popart:
            target_q = fns["target_q"](obs1, rewards, terminals1).numpy()
            old_mean, old_std = float(self.ret_rms.mean_np()), float(self.ret_rms.std_np())
            self.ret_rms.update(target_q.flatten())  # summed over the ranks
            self.ret_rms.flush()
            fns["popart"](np.float32(old_mean), np.float32(old_std))
            out = fns["grads_given_target"](obs0, actions, target_q).numpy()
        else:
            out = fns["grads"](obs0, actions, rewards, obs1, terminals1).numpy()
        flat_grad, losses = out[:-2], out[-2:]
        # the mean gradient over the ranks (MpiAdam.update's averaging, for both optimisers in one Allreduce)
        if self.nworkers > 1:
            flat_grad = allreduce_sum(flat_grad, self.comm) / self.nworkers
        fns["apply"](flat_grad, np.float32(self.actor_lr), np.float32(self.critic_lr))
        policy.mark_weights_changed()
        self.target_policy.mark_weights_changed()
        return float(losses[0]), float(losses[1])

    def _update_target_net(self) -> None:
        """Soft update of the target networks: ``target <- (1 - tau) * target + tau * model``."""
        self._step_functions()["target_update"]()
        self.target_policy.mark_weights_changed()

    def _adapt_param_noise(self, adapt_obs=None, seed=None) -> float:
        """
        Perturb a separate copy of the actor (``noise_adapt/``) with the current standard deviation, measure the
        distance between its actions and the actor's on a minibatch (averaged over the MPI ranks) and adapt the
        standard deviation (SB2's ``_adapt_param_noise``).

        :param adapt_obs: (np.ndarray) the observations (a minibatch is sampled when None)
        :param seed: ((2,) int array) seed of the perturbation (drawn from NumPy's generator when None)
        :return: (float) the mean distance
        """
        if self.param_noise is None:
            return 0.
        if adapt_obs is None:
            adapt_obs = self.replay_buffer.sample(self.batch_size, env=self._vec_normalize_env)[0]
        self._flush_stats()
        if seed is None:
            seed = np.random.randint(0, 2 ** 24, size=(2,))
        seed = np.asarray(seed, np.int64).reshape(2)
        distance = float(self._misc_function("adapt")(self.policy_tf._prepare_obs(adapt_obs),
                                                      np.float32(self.param_noise.current_stddev), seed).numpy())
        self.adaptive_param_noise_actor.mark_weights_changed()
        mean_distance = float(self.comm.allreduce(distance)) / self.nworkers
        self.param_noise.adapt(mean_distance)
        return mean_distance

    def _train_per_step(self, n_steps: int) -> Tuple[np.ndarray, np.ndarray]:
        """The cycle's gradient steps one by one (MPI): same batches and order as the fused call."""
        adapt_points = self._adapt_points(n_steps)
        obs0, actions, rewards, obs1, dones, adapt_obs = self._sample_train_batches(n_steps, len(adapt_points))
        seeds = np.random.randint(0, 2 ** 24, size=(max(len(adapt_points), 1), 2))
        batch = self.batch_size
        losses, distances = [], []
        for k in range(n_steps):
            if k in adapt_points:
                index = adapt_points.index(k)
                distances.append(self._adapt_param_noise(adapt_obs[index * batch:(index + 1) * batch],
                                                         seed=seeds[index]))
            part = slice(k * batch, (k + 1) * batch)
            losses.append(self._train_step(batch=(obs0[part], actions[part], rewards[part], obs1[part], dones[part])))
        return np.mean(np.asarray(losses, np.float64), axis=0), np.asarray(distances)

    # ------------------------------------------------------------------ acting
    def _tf_act(self, obs):
        """(actor action, perturbed actor action or actor action, actor-Q) for a batch of raw observations (TF)."""
        policy = self.policy_tf
        low, high = float(self.return_range[0]), float(self.return_range[1])
        nobs = policy.normalize_obs_tf(obs)
        action = policy.actor(nobs)
        noisy = self.param_noise_actor.actor(nobs) if self.param_noise_actor is not None else action
        q_value = denormalize(tf.clip_by_value(policy.critic(nobs, action), low, high), self.ret_rms)
        return action, noisy, q_value

    def _policy(self, obs, apply_noise=True, compute_q=True):
        """
        Get the actions and critic output, from a given observation (SB2's ``_policy``).

        :param obs: ([float] or [int]) a batch of observations
        :param apply_noise: (bool) enable the noise (perturbed actor with parameter noise, plus action noise)
        :param compute_q: (bool) compute the critic output
        :return: ([float], [float]) the actions in [-1, 1], shape (batch, n_act), and the critic values (batch, 1)
            or None
        """
        policy = self.policy_tf
        obs = policy._prepare_obs(obs)
        use_perturbed = self.param_noise is not None and apply_noise
        q_value = None
        if policy.has_numpy_path:
            nobs = policy.normalize_obs_np(obs)
            action = self.param_noise_actor.actor_np(nobs) if use_perturbed else policy.actor_np(nobs)
            if compute_q:
                actor_action = policy.actor_np(nobs) if use_perturbed else action
                low, high = self.return_range
                q_value = _np_denormalize(np.clip(policy.critic_np(nobs, actor_action), low, high), self.ret_rms)
        else:
            self._flush_stats()
            actor_action, noisy, q = self._misc_function("act")(obs)
            action = (noisy if use_perturbed else actor_action).numpy()
            q_value = q.numpy() if compute_q else None
        action = np.array(action, dtype=np.float32).reshape((obs.shape[0], policy.n_act))
        if self.action_noise is not None and apply_noise:
            noise = np.stack([np.asarray(self.action_noise()).reshape(-1) for _ in range(obs.shape[0])])
            action = action + noise
        action = np.clip(action, -1, 1)
        return action, q_value

    def _reset(self) -> None:
        """Reset internal state after an episode is complete: action noise, and a new perturbed actor."""
        if self.action_noise is not None:
            self.action_noise.reset()
        if self.param_noise is not None:
            seed = np.random.randint(0, 2 ** 24, size=(2,)).astype(np.int64)
            weights = self._misc_function("perturb")(np.float32(self.param_noise.current_stddev), seed)
            self.param_noise_actor.mark_weights_changed()
            if self.param_noise_actor.has_numpy_path:
                self.param_noise_actor.set_numpy_actor_weights([w.numpy() for w in weights])

    def _store_transition(self, obs, action, reward, next_obs, done, info) -> None:
        """
        Store a transition in the replay buffer (reward scaled by ``reward_scale``) and update the observation
        statistics with ``obs`` (a collective call under MPI).
        """
        reward *= self.reward_scale
        self.replay_buffer_add(obs, action, reward, next_obs, done, info)
        if self.normalize_observations:
            self.obs_rms.update(np.array([obs]))

    # ------------------------------------------------------------------ statistics (logging)
    def _tf_stats(self, obs0, actions):
        policy = self.policy_tf
        low, high = float(self.return_range[0]), float(self.return_range[1])
        nobs = policy.normalize_obs_tf(obs0)
        critic_tf = denormalize(tf.clip_by_value(policy.critic(nobs, actions), low, high), self.ret_rms)
        actor_tf = policy.actor(nobs)
        critic_with_actor = denormalize(tf.clip_by_value(policy.critic(nobs, actor_tf), low, high), self.ret_rms)
        ops = []
        if self.normalize_returns:
            ops += [self.ret_rms.mean, self.ret_rms.std]
        if self.normalize_observations:
            ops += [tf.reduce_mean(self.obs_rms.mean), tf.reduce_mean(self.obs_rms.std)]
        ops += [tf.reduce_mean(critic_tf), reduce_std(critic_tf), tf.reduce_mean(critic_with_actor),
                reduce_std(critic_with_actor), tf.reduce_mean(actor_tf), reduce_std(actor_tf)]
        if self.param_noise is not None:
            perturbed = self.param_noise_actor.actor(nobs)
            ops += [tf.reduce_mean(perturbed), reduce_std(perturbed)]
        return tf.stack([tf.cast(op, tf.float32) for op in ops])

    def _get_stats(self) -> dict:
        """The mean and standard deviation of the model's inputs and outputs on a fixed sample (SB2)."""
        if self.stats_sample is None:
            obs0, actions, rewards, obs1, terminals1 = self.replay_buffer.sample(self.batch_size,
                                                                                 env=self._vec_normalize_env)
            self.stats_sample = {'obs0': obs0, 'actions': actions, 'rewards': rewards.reshape(-1, 1), 'obs1': obs1,
                                 'terminals1': terminals1.reshape(-1, 1)}
        self._flush_stats()
        values = self._misc_function("stats")(self.policy_tf._prepare_obs(self.stats_sample['obs0']),
                                              np.asarray(self.stats_sample['actions'], np.float32)).numpy()
        stats = dict(zip(self.stats_names, [float(v) for v in values]))
        if self.param_noise is not None:
            stats = {**stats, **self.param_noise.get_stats()}
        return stats

    # ------------------------------------------------------------------ learn
    def _setup_learn(self) -> None:
        self._check_single_env()
        super()._setup_learn()

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
        from sbtf.common.vec_env import unwrap_vec_normalize

        new_tb_log = self._init_num_timesteps(reset_num_timesteps)
        callback = self._init_callback(callback, progress_bar, total_timesteps)
        if replay_wrapper is not None:
            if self.replay_buffer is None:
                self.replay_buffer = ReplayBuffer(self.buffer_size)
            self.replay_buffer = replay_wrapper(self.replay_buffer)
        tb_log = self.tensorboard_log if self.rank == 0 else None
        with self._mpi_learn_context(), SetVerbosity(self.verbose), \
                TensorboardWriter(self.graph, tb_log, tb_log_name, new_tb_log) as writer:
            self._setup_learn()
            self._vec_normalize_env = unwrap_vec_normalize(self.env)
            self.sync_parameters()
            self._learn_loop(int(total_timesteps), callback, log_interval, writer)
        return self

    def _learn_loop(self, total_timesteps: int, callback, log_interval: int, writer) -> None:
        # a list for tensorboard logging, to prevent logging with the same step number, if it already occurred
        self.tb_seen_steps = []
        rank = self.rank
        eval_episode_rewards_history: deque = deque(maxlen=100)
        episode_rewards_history: deque = deque(maxlen=100)
        episode_successes: list = []
        env = self.env
        vec_normalize = self._vec_normalize_env
        per_step = self._per_step_updates
        compute_q = self.verbose >= 1
        eval_env = self._make_eval_env()

        # Prepare everything.
        self._reset()
        obs = env.reset()
        # Retrieve unnormalized observation for saving into the buffer
        obs_ = vec_normalize.get_original_obs() if vec_normalize is not None else obs
        eval_obs = eval_env.reset() if eval_env is not None else None
        episode_reward = 0.
        episode_step = 0
        episodes = 0
        step = 0
        total_steps = 0
        start_time = time.time()
        epoch_episode_rewards: list = []
        epoch_episode_steps: list = []
        epoch_actor_losses: list = []
        epoch_critic_losses: list = []
        epoch_adaptive_distances: list = []
        eval_episode_rewards: list = []
        eval_qs: list = []
        epoch_actions: list = []
        epoch_qs: list = []
        epoch_episodes = 0
        epoch = 0
        callback.on_training_start(locals(), globals())

        while True:
            for _ in range(log_interval):
                callback.on_rollout_start()
                # Perform rollouts.
                for _ in range(self.nb_rollout_steps):
                    if total_steps >= total_timesteps:
                        callback.on_training_end()
                        return

                    # Predict next action.
                    action, q_value = self._policy(obs, apply_noise=True, compute_q=compute_q)
                    action = action[0]
                    if rank == 0 and self.render:
                        env.render()

                    # Randomly sample actions from a uniform distribution with a probability
                    # self.random_exploration (used in HER + DDPG)
                    if np.random.rand() < self.random_exploration:
                        # actions sampled from the action space are in env units: the algorithm works in [-1, 1]
                        unscaled_action = self.action_space.sample()
                        action = scale_action(self.action_space, unscaled_action).astype(np.float32)
                    else:
                        # inferred actions need to be transformed to environment action_space before stepping
                        unscaled_action = unscale_action(self.action_space, action)

                    new_obs, rewards, dones, infos = env.step(np.asarray(unscaled_action)[None])
                    reward, done, info = float(rewards[0]), bool(dones[0]), infos[0]
                    self.num_timesteps += 1

                    callback.update_locals(locals())
                    if callback.on_step() is False:
                        callback.on_training_end()
                        return

                    step += 1
                    total_steps += 1
                    if rank == 0 and self.render:
                        env.render()

                    # Book-keeping.
                    epoch_actions.append(action)
                    if q_value is not None:
                        epoch_qs.append(float(np.ravel(q_value)[0]))
                    # Store only the unnormalized version
                    if vec_normalize is not None:
                        new_obs_ = vec_normalize.get_original_obs()
                        reward_ = float(vec_normalize.get_original_reward()[0])
                    else:
                        new_obs_, reward_ = new_obs, reward
                    next_obs, store_dones = self._transitions(obs_, new_obs, new_obs_, rewards, dones, infos)
                    self._store_transition(obs_[0], action, reward_, next_obs[0], float(store_dones[0]), info)
                    obs = new_obs
                    obs_ = new_obs_

                    episode_reward += reward_
                    episode_step += 1
                    if writer is not None:
                        self.episode_reward = total_episode_reward_logger(
                            self.episode_reward, np.array([reward_]).reshape((1, -1)),
                            np.array([done]).reshape((1, -1)), writer, self.num_timesteps)
                    if done:
                        # Episode done.
                        epoch_episode_rewards.append(episode_reward)
                        episode_rewards_history.append(episode_reward)
                        epoch_episode_steps.append(episode_step)
                        episode_reward = 0.
                        episode_step = 0
                        epoch_episodes += 1
                        episodes += 1
                        maybe_ep_info = info.get("episode")
                        if maybe_ep_info is not None:
                            self.ep_info_buf.append(maybe_ep_info)
                        maybe_is_success = info.get('is_success')
                        if maybe_is_success is not None:
                            episode_successes.append(float(maybe_is_success))
                        self._reset()
                callback.on_rollout_end()

                # Train.
                epoch_actor_losses = []
                epoch_critic_losses = []
                epoch_adaptive_distances = []
                if self.nb_train_steps > 0 and self.replay_buffer.can_sample(self.batch_size):
                    if per_step:
                        losses, distances = self._train_per_step(self.nb_train_steps)
                    else:
                        losses, distances = self._train_fused(self.nb_train_steps)
                    epoch_critic_losses.append(float(losses[0]))
                    epoch_actor_losses.append(float(losses[1]))
                    epoch_adaptive_distances.extend(float(d) for d in distances)
                    if self.actor_optimizer.step // 100 != (self.actor_optimizer.step - self.nb_train_steps) // 100:
                        # SB2's MpiAdam checks every 100 updates that the ranks' parameters agree
                        self.check_parameters_synced()
                    if writer is not None:
                        values = {"train/loss_critic": losses[0], "train/loss_actor": losses[1]}
                        if self.param_noise is not None:
                            values["train/param_noise_stddev"] = self.param_noise.current_stddev
                        writer.add_scalars(values, self.num_timesteps)

                # Evaluate.
                eval_episode_rewards = []
                eval_qs = []
                if eval_env is not None:
                    eval_episode_reward = 0.
                    for _ in range(self.nb_eval_steps):
                        if total_steps >= total_timesteps:
                            callback.on_training_end()
                            return
                        eval_action, eval_q = self._policy(eval_obs, apply_noise=False, compute_q=True)
                        eval_obs, eval_r, eval_done, _ = eval_env.step(unscale_action(self.action_space,
                                                                                      eval_action))
                        if self.render_eval:
                            eval_env.render()
                        eval_episode_reward += float(eval_r[0])
                        eval_qs.append(float(np.ravel(eval_q)[0]))
                        if eval_done[0]:
                            eval_episode_rewards.append(eval_episode_reward)
                            eval_episode_rewards_history.append(eval_episode_reward)
                            eval_episode_reward = 0.

            epoch += 1
            # Not enough samples in the replay buffer
            if not self.replay_buffer.can_sample(self.batch_size) or self.verbose < 1:
                continue
            self._log_epoch(locals())

    def _make_eval_env(self):
        if self.eval_env is None:
            return None
        from sbtf.common.vec_env import VecEnv
        if isinstance(self.eval_env, VecEnv):
            return self.eval_env
        return self._make_vec_env(self.eval_env)

    def _log_epoch(self, loc: dict) -> None:
        """SB2's epoch statistics, averaged over the MPI ranks (collective; verbose >= 1)."""
        duration = time.time() - loc["start_time"]
        stats = self._get_stats()
        combined_stats = stats.copy()
        combined_stats['rollout/return'] = safe_mean(loc["epoch_episode_rewards"])
        combined_stats['rollout/return_history'] = safe_mean(list(loc["episode_rewards_history"]))
        combined_stats['rollout/episode_steps'] = safe_mean(loc["epoch_episode_steps"])
        combined_stats['rollout/actions_mean'] = safe_mean(loc["epoch_actions"])
        combined_stats['rollout/Q_mean'] = safe_mean(loc["epoch_qs"])
        combined_stats['train/loss_actor'] = safe_mean(loc["epoch_actor_losses"])
        combined_stats['train/loss_critic'] = safe_mean(loc["epoch_critic_losses"])
        if len(loc["epoch_adaptive_distances"]) != 0:
            combined_stats['train/param_noise_distance'] = safe_mean(loc["epoch_adaptive_distances"])
        combined_stats['total/duration'] = duration
        combined_stats['total/steps_per_second'] = float(loc["step"]) / float(max(duration, 1e-9))
        combined_stats['total/episodes'] = loc["episodes"]
        combined_stats['rollout/episodes'] = loc["epoch_episodes"]
        combined_stats['rollout/actions_std'] = float(np.std(loc["epoch_actions"])) if loc["epoch_actions"] else 0.
        # Evaluation statistics.
        if self.eval_env is not None:
            combined_stats['eval/return'] = safe_mean(loc["eval_episode_rewards"])
            combined_stats['eval/return_history'] = safe_mean(list(loc["eval_episode_rewards_history"]))
            combined_stats['eval/Q'] = safe_mean(loc["eval_qs"])
            combined_stats['eval/episodes'] = len(loc["eval_episode_rewards"])
        values = np.array([float(v) for v in combined_stats.values()], dtype=np.float64)
        sums = allreduce_sum(values, self.comm)
        combined_stats = {k: v / self.nworkers for (k, v) in zip(combined_stats.keys(), sums)}
        # Total statistics.
        combined_stats['total/epochs'] = loc["epoch"]
        combined_stats['total/steps'] = loc["step"]
        if len(loc["episode_successes"]) > 0:
            combined_stats['success rate'] = float(np.mean(loc["episode_successes"][-100:]))
        for key in sorted(combined_stats.keys()):
            logger.record_tabular(key, combined_stats[key])
        logger.dump_tabular()
        logger.info('')

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
        self._flush_stats()
        return super().pretrain(dataset, n_epochs, learning_rate, adam_epsilon, val_interval)


__all__ = ["DDPG", "RunningStats", "normalize", "denormalize"]
