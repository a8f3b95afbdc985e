"""stable-baselines3's ``OffPolicyAlgorithm`` (SAC, TD3, DDPG, DQN; sb3-contrib's QR-DQN, TQC): its off-policy schedule
on sbtf's one off-policy learn loop (``OffPolicyAlgorithm._learn``).

What sb3's ``OffPolicyAlgorithm`` does differently from stable-baselines 2, and how it maps onto the loop's hooks:

* **rollouts**: ``train_freq`` counts VecEnv steps (each is ``n_envs`` transitions), or episodes with
  ``train_freq=(n, "episode")``; after each rollout, when ``num_timesteps > learning_starts``, ``gradient_steps``
  gradient steps run (``-1``: as many as transitions collected in the rollout) -- ``_training_due``;
* **warm-up**: before ``learning_starts`` the actions are sampled from the action space -- ``_select_actions``;
* **progress**: ``progress_remaining = 1 - num_timesteps / total_timesteps`` after every env step; the learning-rate
  schedule is read at the start of every training, the exploration schedule after every step;
* **training**: the ``K`` gradient steps of a training run in one compiled ``TrainStep`` (``K`` stacked minibatches
  in, averaged statistics out; the acting weights ride along), traced once per ``K`` (``n_traces``).
"""
from __future__ import annotations

import warnings
from collections import deque
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import gymnasium as gym
import numpy as np
import tensorflow as tf

from sbtf.common.fileio import model_schema as ms
from sbtf.common.compile.fast_call import TrainStep
from sbtf.common.math_util import scale_action, unscale_action
from sbtf.common.algo.off_policy_algorithm import REPLAY_BUFFER_SCHEMA, LearnState, OffPolicyAlgorithm
from sbtf.common.algo.off_policy_train import TrainStepCache
from sbtf.common.algo.sb3_api import Sb3ModelApi
from sbtf.common.schedules import get_schedule_fn
from sbtf.common.tf_util import repeat_steps
from sbtf.sb3.common.policies import make_policy_optimizer

#: the units of a ``train_freq`` tuple
TRAIN_FREQ_UNITS = ("step", "episode")


class TrainFreqField(ms.Field):
    """A stored ``train_freq``: an integer >= 1 or a pair (integer >= 1, ``"step"`` or ``"episode"``)."""

    description = "an integer >= 1 or a pair (integer >= 1, 'step' or 'episode')"

    def accepts(self, value: Any) -> bool:
        if ms.Integer(1).accepts(value):
            return True
        return (isinstance(value, (tuple, list)) and len(value) == 2 and ms.Integer(1).accepts(value[0])
                and value[1] in TRAIN_FREQ_UNITS)

    def normalise(self, value: Any) -> Any:
        if isinstance(value, (tuple, list)):
            return int(value[0]), str(value[1])
        return int(value)


def parse_train_freq(train_freq: Union[int, Tuple[int, str]]) -> Tuple[int, str]:
    """sb3's ``_convert_train_freq``: ``(frequency, unit)`` of an int (steps) or a pair."""
    if not isinstance(train_freq, (tuple, list)):
        train_freq = (train_freq, "step")
    if len(train_freq) != 2 or train_freq[1] not in TRAIN_FREQ_UNITS:
        raise ValueError(f"Error: train_freq must be an integer or a pair (frequency, 'step' | 'episode'), got "
                         f"{train_freq!r}.")
    frequency = int(train_freq[0])
    if frequency < 1 or frequency != train_freq[0]:
        raise ValueError(f"Error: the frequency of train_freq must be an integer >= 1, got {train_freq[0]!r}.")
    return frequency, str(train_freq[1])


class ContribOffPolicyAlgorithm(Sb3ModelApi, OffPolicyAlgorithm):
    """
    stable-baselines3's ``OffPolicyAlgorithm`` on sbtf's off-policy loop: what sb3's DQN, SAC, TD3, DDPG and
    sb3-contrib's QR-DQN and TQC share (``replay_buffer_class`` / ``replay_buffer_kwargs`` / ``optimize_memory_usage``
    as sb3 takes them: ``HerReplayBuffer``, the memory-efficient ``ReplayBuffer``).

    Subclasses build ``self.policy_tf`` in ``setup_model`` (then call ``_finish_setup``), and implement
    ``_build_train_step(K, variant)``, ``_train_inputs(sample, K)``, ``_policy_actions(obs, deterministic)``,
    ``_on_env_step()`` (per-step bookkeeping: target updates, exploration) and ``stats_names``.
    """

    #: how the model's sampled actions are stored: "scaled" ([-1, 1] Box actions) or "raw" (Discrete)
    _action_storage = "raw"

    def __init__(self, policy, env, policy_base, *, learning_rate, buffer_size, learning_starts, batch_size, tau,
                 gamma, train_freq, gradient_steps, action_noise, replay_buffer_class, replay_buffer_kwargs,
                 optimize_memory_usage, n_steps, stats_window_size, tensorboard_log, policy_kwargs, verbose, seed,
                 device):
        super().__init__(policy=policy, env=env, replay_buffer=None, verbose=verbose, policy_base=policy_base,
                         requires_vec_env=True, policy_kwargs=policy_kwargs, seed=seed)
        self.learning_rate = learning_rate
        self.buffer_size = buffer_size
        self.learning_starts = learning_starts
        self.batch_size = batch_size
        self.tau = tau
        self.gamma = gamma
        self.train_freq = train_freq
        self.gradient_steps = gradient_steps
        self.action_noise = action_noise
        self._set_replay_buffer_options(replay_buffer_class, replay_buffer_kwargs, optimize_memory_usage)
        self.n_steps = n_steps
        self.stats_window_size = stats_window_size
        self.tensorboard_log = tensorboard_log
        self.device = device
        self._check_unsupported()
        self._train_steps: Optional[TrainStepCache] = None
        self._n_updates = 0
        self._current_progress_remaining = 1.0
        self._current_lr = None

    def _make_replay_buffer(self):
        """SB3's ``replay_buffer_kwargs`` also take ``handle_timeout_termination`` (default True: a time-limit cut is
        stored with ``done = False`` and bootstrapped; False: stored as a terminal). A buffer class whose constructor
        takes it gets it too."""
        import inspect

        from sbtf.common.buffers import ReplayBuffer

        options = dict(self.replay_buffer_kwargs or {})
        self._handle_timeout_termination = bool(options.get("handle_timeout_termination", True))
        accepted = inspect.signature((self.replay_buffer_class or ReplayBuffer).__init__).parameters
        if "handle_timeout_termination" in options and "handle_timeout_termination" not in accepted:
            del options["handle_timeout_termination"]
            given, self.replay_buffer_kwargs = self.replay_buffer_kwargs, options
            try:
                return super()._make_replay_buffer()
            finally:
                self.replay_buffer_kwargs = given
        return super()._make_replay_buffer()

    def _transitions(self, obs_, new_obs, new_obs_, rewards_, dones, infos):
        next_obs, store_dones = super()._transitions(obs_, new_obs, new_obs_, rewards_, dones, infos)
        if not getattr(self, "_handle_timeout_termination", True):
            store_dones = dones.astype(np.float32)  # time-limit cuts stored as terminals, as SB3 with False
        return next_obs, store_dones

    def _check_spaces(self, observation_space: gym.Space, action_space: gym.Space) -> None:
        """Dict observations are taken (``MultiInputPolicy``; the loop sees them packed, see ``VecPackDictObs``)."""
        if isinstance(observation_space, gym.spaces.Dict):
            from sbtf.common.envs.dict_obs import layout_of
            from sbtf.common.input import check_obs_space

            check_obs_space(observation_space, type(self).__name__, allow_dict=True)
            observation_space = layout_of(observation_space).flat_space
        super()._check_spaces(observation_space, action_space)

    def _check_unsupported(self) -> None:
        """Refuse, with a clear message, sb3 options that sbtf's off-policy algorithms do not implement."""
        if int(self.n_steps) != 1:
            raise NotImplementedError(f"Error: {type(self).__name__}: n-step returns (n_steps={self.n_steps}) are not "
                                      "supported; use n_steps=1.")

    # ------------------------------------------------------------------ setup helpers
    def _build_policy(self, policy_base: type):
        """Check the policy class and the spaces, seed, and build the policy."""
        self._check_policy_class(policy_base, "MlpPolicy", needs_spaces=True)
        policy = self.policy_class
        parse_train_freq(self.train_freq)
        self.set_random_seed(self.seed)
        self.policy_tf = policy(self.observation_space, self.action_space, **self.policy_kwargs)
        return self.policy_tf

    def _finish_setup(self) -> None:
        self._train_steps = TrainStepCache(self._build_train_step)
        self.params = self.get_parameter_list()
        self._ensure_replay_buffer()

    def _policies(self) -> list:
        return [self.policy_tf] if self.policy_tf is not None else []

    def _named_parameters(self):
        return self.policy_tf.named_parameters("model")

    # ------------------------------------------------------------------ the learn loop's hooks
    def _learn_start(self, total_timesteps: int) -> None:
        self._lr_fn = get_schedule_fn(self.learning_rate)
        self._current_lr = float(self._lr_fn(1.0))
        # sb3's _setup_learn: a learn() that continues (reset_num_timesteps=False) measures its progress over every
        # step so far (num_timesteps is already reset here when it does not continue)
        self._total_timesteps = self.num_timesteps + total_timesteps
        self._train_frequency, self._train_unit = parse_train_freq(self.train_freq)
        self._rollout_steps = 0
        self._rollout_episodes = 0
        self._current_progress_remaining = 1.0
        if self.ep_info_buf is None or self.ep_info_buf.maxlen != int(self.stats_window_size):
            self.ep_info_buf = deque(self.ep_info_buf or (), maxlen=int(self.stats_window_size))
        if self.action_noise is not None:
            self.action_noise.reset()

    def _random_warmup(self) -> bool:
        """Whether the model acts with uniform random actions (before ``learning_starts``)."""
        return self.num_timesteps < self.learning_starts

    def _select_actions(self, obs: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """sb3's ``_sample_action``: random actions before ``learning_starts``, else the policy's (plus noise)."""
        n_envs = obs.shape[0]
        if self._random_warmup():
            unscaled = np.array([self.action_space.sample() for _ in range(n_envs)])
        else:
            unscaled = self._policy_actions(obs, deterministic=False)
        if self._action_storage == "scaled":
            scaled = scale_action(self.action_space, unscaled)
            if self.action_noise is not None:
                scaled = np.clip(scaled + self.action_noise(), -1, 1)
            return scaled.astype(np.float32, copy=False), unscale_action(self.action_space, scaled)
        return unscaled, unscaled

    def _policy_actions(self, obs: np.ndarray, deterministic: bool) -> np.ndarray:
        """The policy's actions (in the env's units) for a batch of observations (exploration included)."""
        raise NotImplementedError

    def _on_env_step(self) -> None:
        """After every VecEnv step (sb3's ``_on_step``): target updates, exploration schedule."""

    def _on_dones(self, dones: np.ndarray) -> None:
        self._rollout_episodes += int(np.sum(dones))
        if self.action_noise is not None:
            self.action_noise.reset()

    def _planned_gradient_steps(self, total_timesteps: int) -> Optional[int]:
        frequency, unit = parse_train_freq(self.train_freq)
        if unit != "step":
            return None  # episodes: their length is not known in advance
        steps = self._steps_after_learning_starts(total_timesteps)
        rollouts = steps // max(frequency * (self.n_envs or 1), 1)
        per_rollout = int(self.gradient_steps) if int(self.gradient_steps) >= 0 else frequency * (self.n_envs or 1)
        return rollouts * per_rollout

    def _training_due(self, first_step: int, n_steps: int, state: LearnState):
        self._current_progress_remaining = 1.0 - float(self.num_timesteps) / float(max(self._total_timesteps, 1))
        self._on_env_step()
        self._rollout_steps += 1
        collected = self._rollout_steps if self._train_unit == "step" else self._rollout_episodes
        if collected < self._train_frequency:
            return None
        transitions = self._rollout_steps * self.n_envs
        self._rollout_steps = 0
        self._rollout_episodes = 0
        if not (self.num_timesteps > 0 and self.num_timesteps > self.learning_starts):
            return None
        gradient_steps = int(self.gradient_steps) if int(self.gradient_steps) >= 0 else transitions
        if gradient_steps <= 0 or not self.replay_buffer.can_sample(1):
            return None
        lr = float(self._lr_fn(self._current_progress_remaining))
        self._current_lr = lr
        return gradient_steps, lr

    def _train(self, plan, state: LearnState, writer) -> np.ndarray:
        gradient_steps, lr = plan
        stats = self._run_train(gradient_steps, lr)
        self._n_updates += gradient_steps
        if writer is not None:
            writer.add_scalars({f"train/{name}": value for name, value in zip(self.stats_names, stats)},
                               self.num_timesteps)
            writer.add_scalar("train/learning_rate", lr, self.num_timesteps)
        return stats

    def _stats_names(self) -> List[str]:
        return list(self.stats_names)

    @property
    def stats_names(self) -> List[str]:
        """The statistics a training returns (averaged over its gradient steps), in order."""
        raise NotImplementedError

    def _log_values(self):
        return [("n_updates", self._n_updates), ("learning_rate", self._current_lr)]

    # ------------------------------------------------------------------ compiled training
    def _build_train_step(self, n_steps: int, variant) -> TrainStep:
        """The compiled step of ``n_steps`` gradient steps (``variant`` is unused: one form per count)."""
        raise NotImplementedError

    def _use_xla(self, policy) -> bool:
        """XLA only when ``jit_compile=True``: what QR-DQN and TQC have always done (their train steps were not
        measured under XLA; the core's "auto" rule reads SB2-style policies)."""
        return self.jit_compile is True

    def _batch_specs(self, n_steps: int) -> Dict[str, tf.TensorSpec]:
        """The input specs of ``n_steps`` stacked minibatches (actions as float32 columns)."""
        policy = self.policy_tf
        k_b = (n_steps, int(self.batch_size))
        obs_spec = tf.TensorSpec(k_b + tuple(policy.obs_shape), tf.as_dtype(policy.obs_dtype))
        return {"obs": obs_spec, "next_obs": obs_spec, "actions": tf.TensorSpec(k_b + (self._action_dim,), tf.float32),
                "rewards": tf.TensorSpec(k_b, tf.float32), "dones": tf.TensorSpec(k_b, tf.float32),
                "learning_rate": tf.TensorSpec((), tf.float32)}

    @property
    def _action_dim(self) -> int:
        if isinstance(self.action_space, gym.spaces.Discrete):
            return 1
        return int(np.prod(self.action_space.shape))

    def _k_step_train_step(self, one_step: Callable, n_steps: int, extra_inputs: Dict[str, tf.TensorSpec],
                           name: str) -> TrainStep:
        """
        A ``TrainStep`` running ``one_step(k, batch) -> stack(stats)`` for ``k = 0 .. n_steps - 1`` on stacked
        minibatches (``batch``: the named inputs of step ``k``) and averaging the statistics. Every input but
        ``learning_rate`` (``extra_inputs`` too) has one entry per gradient step on its first axis.
        """
        stat_names = list(self.stats_names)
        n_stats = len(stat_names)
        inputs = {**self._batch_specs(n_steps), **extra_inputs}
        per_step = frozenset(inputs) - {"learning_rate"}  # every other input has one entry per gradient step

        def train(**tensors):
            def batch(k):
                return {key: (tensors[key][k] if key in per_step else tensors[key]) for key in tensors}

            if n_steps == 1:
                stats = one_step(0, batch(0))
            else:
                stats, = repeat_steps(n_steps, lambda k, stats: (stats + one_step(k, batch(k)) / float(n_steps),),
                                      (tf.zeros((n_stats,), tf.float32),))
            return {stat: stats[i] for i, stat in enumerate(stat_names)}

        return TrainStep(train, inputs, networks=(self.policy_tf,), jit_compile=self._use_xla(self.policy_tf),
                         name=name)

    def _chunks(self, gradient_steps: int) -> List[int]:
        """
        How a training of ``gradient_steps`` steps is split into compiled calls: one call when the count is fixed
        (``gradient_steps >= 0`` and ``train_freq`` in steps), else powers of two (a count that varies from one
        training to the next, ``-1`` or episodes, then traces at most ``log2`` steps instead of one per count).
        """
        if int(self.gradient_steps) >= 0 and self._train_unit == "step":
            return [gradient_steps]
        return [1 << bit for bit in reversed(range(gradient_steps.bit_length())) if gradient_steps >> bit & 1]

    def _run_train(self, gradient_steps: int, lr: float) -> np.ndarray:
        """``gradient_steps`` gradient steps on fresh minibatches in compiled calls; the averaged statistics."""
        totals = np.zeros(len(self.stats_names), np.float64)
        offset = 0
        for n_steps in self._chunks(gradient_steps):
            step = self._train_steps.get(n_steps)
            sample = self.replay_buffer.sample_batch(self.batch_size * n_steps, env=self._vec_normalize_env)
            k_b = (n_steps, int(self.batch_size))
            obs_shape = k_b + tuple(self.policy_tf.obs_shape)
            out = step(obs=sample.observations.reshape(obs_shape),
                       next_obs=sample.next_observations.reshape(obs_shape),
                       actions=np.asarray(sample.actions, np.float32).reshape(k_b + (self._action_dim,)),
                       rewards=sample.rewards.reshape(k_b), dones=sample.dones.reshape(k_b), learning_rate=lr,
                       **self._extra_train_inputs(n_steps, offset))
            totals += n_steps * np.array([out[name] for name in self.stats_names], np.float64)
            offset += n_steps
        return (totals / gradient_steps).astype(np.float32)

    def _extra_train_inputs(self, n_steps: int, offset: int) -> Dict[str, np.ndarray]:
        """Inputs of the train step besides the minibatches and the learning rate (seeds, flags) for ``n_steps``
        gradient steps, the first of which is gradient step ``offset`` of the training."""
        return {}

    # ------------------------------------------------------------------ predict
    def _check_predict_args(self, mask, episode_start):
        if mask is not None and episode_start is not None:
            warnings.warn("predict: both mask and episode_start were given; episode_start is used.")
        return episode_start if episode_start is not None else mask

    def action_probability(self, observation, state=None, mask=None, actions=None, logp=False):
        """Not defined for this algorithm (sb3-contrib has no such method either)."""
        raise NotImplementedError(f"{type(self).__name__} does not have action probabilities.")


class ActorCriticOffPolicyAlgorithm(ContribOffPolicyAlgorithm):
    """
    What sb3's SAC, TD3, DDPG and sb3-contrib's TQC share on top of ``ContribOffPolicyAlgorithm``: a Box action
    space, actions stored in [-1, 1] and rescaled for the env (``sbtf.common.math_util``), gSDE exploration (SAC,
    TQC), ``predict``, export and behaviour cloning of the deterministic action, the actor / critic optimizers, and
    per-gradient-step seeds and target-update flags fed to the compiled step.

    Subclasses build the policy in ``setup_model`` (``_build_policy``), then call ``_setup_actor_critic()`` and
    ``_finish_setup()``; they implement ``_build_train_step`` and ``_target_update_flags``.
    """

    _supported_action_spaces = (gym.spaces.Box,)
    _action_storage = "scaled"
    _policy_is_object = True
    #: gSDE options (SAC, TQC); TD3 and DDPG keep these defaults
    use_sde = False
    sde_sample_freq = -1
    use_sde_at_warmup = False

    def _build_policy(self, policy_base: type):
        base_kwargs = self.policy_kwargs
        if self.use_sde:  # gSDE is the algorithm's argument; the policy is built with it (as sb3)
            self.policy_kwargs = dict(base_kwargs or {}, use_sde=True)
        try:
            return super()._build_policy(policy_base)
        finally:
            self.policy_kwargs = base_kwargs

    def _setup_actor_critic(self) -> None:
        """sb3's ``_create_aliases`` (``actor``, ``critic``, ``critic_target``, ``actor_target``), the variable lists
        and the optimizers of the policy's ``optimizer_class`` / ``optimizer_kwargs``."""
        policy = self.policy_tf
        self.actor, self.critic, self.critic_target = policy.actor, policy.critic, policy.critic_target
        self.actor_target = policy.actor_target
        self._actor_vars = policy.actor_variables()
        self._critic_vars = policy.critic_variables()
        self._critic_source_vars = policy.critic_variables(with_shared=True)
        self._critic_target_vars = policy.critic_target_variables()
        self._actor_target_vars = policy.actor_target_variables()
        optimizer_class = policy.optimizer_class or "Adam"  # PyTorch's Adam, sb3's default
        self.actor_optimizer = make_policy_optimizer(self._actor_vars, optimizer_class, policy.optimizer_kwargs)
        self.critic_optimizer = make_policy_optimizer(self._critic_vars, optimizer_class, policy.optimizer_kwargs)

    # ------------------------------------------------------------------ compiled training
    def _target_update_flags(self, n_steps: int, offset: int) -> np.ndarray:
        """1.0 for the gradient steps (``offset .. offset + n_steps - 1`` of this training) that update the targets
        (TD3: also the actor)."""
        raise NotImplementedError

    def _extra_train_inputs(self, n_steps: int, offset: int) -> Dict[str, np.ndarray]:
        # seeds below 2 ** 24 are exact in float32 (they travel in the packed input vector)
        return {"seeds": np.random.randint(0, 2 ** 24, size=(n_steps, 2)).astype(np.float32),
                "flags": self._target_update_flags(n_steps, offset).astype(np.float32)}

    @staticmethod
    def _extra_specs(n_steps: int) -> Dict[str, tf.TensorSpec]:
        """The specs of ``_extra_train_inputs``."""
        return {"seeds": tf.TensorSpec((n_steps, 2), tf.float32), "flags": tf.TensorSpec((n_steps,), tf.float32)}

    # ------------------------------------------------------------------ collection and predict
    def _random_warmup(self) -> bool:
        return super()._random_warmup() and not (self.use_sde and self.use_sde_at_warmup)

    def _select_actions(self, obs: np.ndarray):
        if self.use_sde and self._rollout_steps == 0 and not self._random_warmup():
            # a collection of train_freq steps starts with new exploration matrices (sb3), then every sde_sample_freq
            policy = self.policy_tf
            policy.sde_noise.start_rollout(policy.sde_std_matrix(), obs.shape[0], self.sde_sample_freq)
        return super()._select_actions(obs)

    def _policy_actions(self, obs: np.ndarray, deterministic: bool) -> np.ndarray:
        actions = self.policy_tf.step(obs, deterministic=deterministic).reshape((-1,) + self.action_space.shape)
        return unscale_action(self.action_space, actions)

    def predict(self, observation, state=None, episode_start=None, deterministic=False, mask=None):
        """
        Get the policy action from an observation, rescaled from [-1, 1] to the action space's bounds.

        :param observation: (np.ndarray) the input observation (single or batch)
        :param state: unused (no recurrent policy); returned as is
        :param episode_start: unused
        :param deterministic: (bool) whether to return deterministic actions
        :param mask: unused (stable-baselines 2's name of episode_start)
        :return: (np.ndarray, None) the action(s) and the state
        """
        self._check_predict_args(mask, episode_start)
        observation, vectorized = self._check_obs(observation)
        actions = self._policy_actions(observation, deterministic)
        if not vectorized:
            actions = np.asarray(actions[0])  # a 0-d array for a Discrete action, as SB3's
        return actions, state

    # ------------------------------------------------------------------ export and behaviour cloning
    def _export_outputs(self, obs) -> Dict[str, tf.Tensor]:
        """The exported graph: the deterministic action in the env's units (and, for a Gaussian actor, the mean and
        standard deviation before the squashing)."""
        policy = self.policy_tf
        outputs = {"action": self._pretrain_output(obs)}
        if policy._actor_kind != "deterministic":
            mean, log_std = policy.actor.mean_log_std(obs)
            outputs.update(mean=mean, std=tf.exp(log_std))
        return outputs

    def _pretrain_output(self, obs):
        return unscale_action(self._float32_action_space, self.policy_tf.squashed_action_tf(obs))

    @property
    def _float32_action_space(self) -> gym.spaces.Box:
        space = self.action_space
        return gym.spaces.Box(np.asarray(space.low, np.float32), np.asarray(space.high, np.float32),
                              dtype=np.float32)

    def _pretrain_variables(self) -> list:
        return list(self._actor_vars)


class EntropyRegularisedAlgorithm(ActorCriticOffPolicyAlgorithm):
    """
    SAC and TQC: a squashed Gaussian actor (optionally gSDE), the entropy coefficient (``ent_coef``,
    ``target_entropy``; ``sbtf.contrib.common.actor_critic.EntropyCoefficient``, saved as ``model/log_ent_coef:0``
    when learnt) and the target critic's Polyak update every ``target_update_interval`` gradient steps of a training.
    A subclass gives its critic target and losses to ``_entropy_train_step``.
    """

    ent_coef: Any = "auto"
    target_entropy: Any = "auto"
    target_update_interval = 1
    log_ent_coef = None
    ent_coef_optimizer = None

    def _setup_entropy(self) -> None:
        """Parse ``ent_coef`` / ``target_entropy`` (errors name the bad value) and create ``log_ent_coef``."""
        from sbtf.sb3.common.actor_critic import EntropyCoefficient

        self._entropy = EntropyCoefficient(self.ent_coef, self.target_entropy, self.action_space)
        self._target_entropy_value = self._entropy.target_entropy
        self.log_ent_coef = self._entropy.log_ent_coef
        self.ent_coef_optimizer = self._entropy.optimizer

    def _named_parameters(self):
        params = self.policy_tf.named_parameters("model")
        if self.log_ent_coef is not None:
            params["model/log_ent_coef:0"] = self.log_ent_coef
        return params

    @property
    def stats_names(self) -> List[str]:
        names = ["actor_loss", "critic_loss", "ent_coef"]
        if self.log_ent_coef is not None:
            names.append("ent_coef_loss")
        return names

    def _target_update_flags(self, n_steps: int, offset: int) -> np.ndarray:
        # sb3: the target follows after the gradient steps whose index in the training is a multiple of
        # target_update_interval
        return (offset + np.arange(n_steps)) % int(self.target_update_interval) == 0

    def _entropy_train_step(self, n_steps: int, target_fn: Callable, critic_loss_fn: Callable,
                            actor_value_fn: Callable, name: str) -> TrainStep:
        """The compiled ``n_steps`` gradient steps of ``entropy_regularised_update`` (see there for the three
        functions), each followed by the target critic's Polyak update when its flag is set."""
        from sbtf.common.algo.off_policy_ops import polyak_update
        from sbtf.sb3.common.actor_critic import entropy_regularised_update

        actor, entropy = self.policy_tf.actor, self._entropy
        actor_vars, critic_vars = self._actor_vars, self._critic_vars
        source_vars, target_vars = self._critic_source_vars, self._critic_target_vars
        actor_opt, critic_opt = self.actor_optimizer, self.critic_optimizer
        tau = float(self.tau)

        def update_targets():
            polyak_update(target_vars, source_vars, tau)
            return tf.constant(False)

        def one_step(k, batch):
            stats = entropy_regularised_update(actor, entropy, batch, target_fn, critic_loss_fn, actor_value_fn,
                                               critic_opt, critic_vars, actor_opt, actor_vars)
            tf.cond(batch["flags"] > 0.5, update_targets, lambda: tf.constant(False))
            return tf.stack(stats)

        return self._k_step_train_step(one_step, n_steps, self._extra_specs(n_steps), name=name)


def contrib_save_schema(**fields: ms.Field) -> Dict[str, ms.Field]:
    """The stored hyperparameters every contrib off-policy model has, plus ``fields``."""
    schema = dict(learning_rate=ms.Schedule(), buffer_size=ms.Integer(1), learning_starts=ms.Integer(0),
                  batch_size=ms.Integer(1), tau=ms.Real(), gamma=ms.Real(), train_freq=TrainFreqField(),
                  gradient_steps=ms.Integer(-1), **REPLAY_BUFFER_SCHEMA, n_steps=ms.Integer(1),
                  stats_window_size=ms.Integer(1), _n_updates=ms.Integer(0))
    schema.update(fields)
    return schema


__all__ = ["ContribOffPolicyAlgorithm", "ActorCriticOffPolicyAlgorithm", "EntropyRegularisedAlgorithm",
           "TrainFreqField", "parse_train_freq", "contrib_save_schema", "TRAIN_FREQ_UNITS"]
