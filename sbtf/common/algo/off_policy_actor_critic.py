"""What SAC and TD3 share on top of ``OffPolicyAlgorithm``: the common hyperparameters, building the model and target
policies and their parameter lists, the learning-rate schedule, action noise, random exploration, the training
schedule (``train_freq``, ``gradient_steps``, ``learning_starts``, a per-step flag every ``N`` gradient steps), the
K-gradient-step ``TrainStep`` (K stacked minibatches in, averaged statistics out; the acting weights of the updated
policies are installed by the step itself), ``predict`` and behaviour cloning of the actor."""
from __future__ import annotations

from collections import OrderedDict
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from sbtf.common.compile.fast_call import TrainStep
from sbtf.common.math_util import scale_action, unscale_action
from sbtf.common.algo.off_policy_algorithm import LearnState, OffPolicyAlgorithm
from sbtf.common.algo.off_policy_train import TrainStepCache
from sbtf.common.schedules import get_schedule_fn
from sbtf.common.tf_util import repeat_steps

#: a training plan of SAC/TD3: (per-gradient-step flags, learning rate)
ActorCriticPlan = Tuple[List[bool], float]


class ActorCriticOffPolicyAlgorithm(OffPolicyAlgorithm):
    """
    Bookkeeping shared by SAC and TD3.

    Subclasses implement ``setup_model`` (with ``_build_policies`` and ``_finish_setup``), ``_build_train_step``,
    ``_explore_step(obs)`` (the policy's actions in [-1, 1] before action noise), ``_predict_step(obs,
    deterministic)``, ``_deterministic_actor(obs)`` (TF), ``_trains_after(step, timestep)`` (SB2's train-frequency
    test), ``_flag_period`` (SAC: target updates, TD3: policy updates every that many gradient steps),
    ``_train_stat_names`` and ``_train``.
    """

    #: the attribute holding the target policy (SB2's names: SAC ``target_policy``, TD3 ``target_policy_tf``)
    _target_policy_attr = "target_policy"

    def __init__(self, policy, env, policy_base, *, gamma, learning_rate, buffer_size, learning_starts, train_freq,
                 batch_size, tau, gradient_steps, action_noise, random_exploration, verbose, tensorboard_log,
                 policy_kwargs, full_tensorboard_log, seed, n_cpu_tf_sess, replay_buffer_class=None,
                 replay_buffer_kwargs=None, optimize_memory_usage=False):
        super().__init__(policy=policy, env=env, replay_buffer=None, verbose=verbose, policy_base=policy_base,
                         requires_vec_env=False, policy_kwargs=policy_kwargs, seed=seed, n_cpu_tf_sess=n_cpu_tf_sess)
        self._set_replay_buffer_options(replay_buffer_class, replay_buffer_kwargs, optimize_memory_usage)
        self.buffer_size = buffer_size
        self.learning_rate = learning_rate
        self.learning_starts = learning_starts
        self.train_freq = train_freq
        self.batch_size = batch_size
        self.tau = tau
        self.gradient_steps = gradient_steps
        self.gamma = gamma
        self.action_noise = action_noise
        self.random_exploration = random_exploration
        self.tensorboard_log = tensorboard_log
        self.full_tensorboard_log = full_tensorboard_log

        self.policy_tf = None
        setattr(self, self._target_policy_attr, None)
        self.params = None
        self.target_params = None
        self._train_steps = None
        self._learn_t0 = 0

    # ------------------------------------------------------------------ setup
    def _build_policies(self, policy_base: type) -> Tuple[object, object]:
        """Check the policy class and the spaces, seed, and build the model policy and the target policy."""
        self._check_policy_class(policy_base, "MlpPolicy", needs_spaces=True)
        policy = self.policy_class
        self.set_random_seed(self.seed)
        self.policy_tf = policy(None, self.observation_space, self.action_space, **self.policy_kwargs)
        target_policy = policy(None, self.observation_space, self.action_space, **self.policy_kwargs)
        setattr(self, self._target_policy_attr, target_policy)
        return self.policy_tf, target_policy

    @staticmethod
    def _init_targets(targets: Sequence, sources: Sequence) -> None:
        """Start the target networks as copies of their sources."""
        for target, source in zip(targets, sources):
            if tuple(target.shape) != tuple(source.shape):
                raise RuntimeError("Error: the target networks do not match the networks they follow.")
            target.assign(source)

    def _finish_setup(self) -> None:
        """After the networks and optimizers: the train-step cache, SB2's parameter lists and the replay buffer."""
        self._train_steps = TrainStepCache(self._build_train_step)
        named = self._named_parameters()
        self.params = [var for name, var in named.items() if name.startswith("model/")]
        self.target_params = [var for name, var in named.items() if name.startswith("target/")]
        self._ensure_replay_buffer()

    def _build_train_step(self, n_steps: int, variant) -> TrainStep:
        raise NotImplementedError

    def _extra_model_parameters(self) -> "OrderedDict[str, tf.Variable]":
        """Parameters saved after the model policy's (SAC: the learned ``model/log_ent_coef:0``)."""
        return OrderedDict()

    def _policies(self) -> list:
        return [p for p in (self.policy_tf, getattr(self, self._target_policy_attr)) if p is not None]

    def _named_parameters(self) -> "OrderedDict[str, tf.Variable]":
        params = OrderedDict(self.policy_tf.named_parameters("model"))
        params.update(self._extra_model_parameters())
        params.update(getattr(self, self._target_policy_attr).named_parameters("target"))
        return params

    # ------------------------------------------------------------------ collection and training schedule
    def _explore_step(self, obs: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _planned_gradient_steps(self, total_timesteps: int) -> Optional[int]:
        steps = self._steps_after_learning_starts(total_timesteps)
        return steps // max(int(self.train_freq), 1) * int(self.gradient_steps)

    def _trains_after(self, step: int, timestep: int) -> bool:
        """Whether gradient steps follow env step ``step`` of this learn() call (``timestep``: its 1-based count)."""
        raise NotImplementedError

    @property
    def _flag_period(self) -> int:
        raise NotImplementedError

    @property
    def _train_stat_names(self) -> Sequence[str]:
        """The statistics the train step returns, in order."""
        raise NotImplementedError

    def _learn_start(self, total_timesteps: int) -> None:
        self._lr_fn = get_schedule_fn(self.learning_rate)
        self._current_lr = self._lr_fn(1)
        self._learn_t0 = self.num_timesteps
        self._n_updates = 0
        if self.action_noise is not None:
            self.action_noise.reset()

    def _select_actions(self, obs: np.ndarray):
        n_envs = obs.shape[0]
        if self.num_timesteps < self.learning_starts or np.random.rand() < self.random_exploration:
            # actions sampled from the action space are in env units; the algorithm works in [-1, 1]
            unscaled_action = np.stack([self.env.action_space.sample() for _ in range(n_envs)])
            action = scale_action(self.action_space, unscaled_action)
        else:
            action = self._explore_step(obs).reshape((n_envs,) + self.action_space.shape)
            if self.action_noise is not None:
                action = np.clip(action + self.action_noise(), -1, 1)
            unscaled_action = unscale_action(self.action_space, action)
        return action.astype(np.float32, copy=False), unscaled_action

    def _on_dones(self, dones: np.ndarray) -> None:
        if self.action_noise is not None:
            self.action_noise.reset()

    def _training_due(self, first_step: int, n_steps: int, state: LearnState) -> Optional[ActorCriticPlan]:
        flags: List[bool] = []
        lr = None
        rb = self.replay_buffer
        period = self._flag_period
        for step in range(first_step, first_step + n_steps):
            timestep = self._learn_t0 + step + 1
            if not self._trains_after(step, timestep):
                continue
            for grad_step in range(self.gradient_steps):
                if not rb.can_sample(self.batch_size) or timestep < self.learning_starts:
                    break
                if lr is None:
                    lr = self._lr_fn(1.0 - step / state.total_timesteps)
                flags.append((step + grad_step) % period == 0)
        if not flags:
            return None
        self._current_lr = lr
        self._n_updates += len(flags)
        return flags, lr

    def _log_values(self):
        return [("n_updates", self._n_updates), ("current_lr", self._current_lr)]

    def _k_step_train_step(self, one_step: Callable, n_steps: int, variant, networks: Sequence,
                           name: str) -> TrainStep:
        """
        A ``TrainStep`` running ``one_step`` ``n_steps`` times on stacked minibatches and averaging its statistics
        (``one_step(obs, actions, rewards, next_obs, dones, lr, seed, flag) -> stack(stats)``, in the order of
        ``_train_stat_names``); with one step its last argument is ``variant``, else the step's entry of the ``flags``
        input.
        """
        policy = self.policy_tf
        stat_names = list(self._train_stat_names)
        k_b = (n_steps, int(self.batch_size))
        obs_spec = tf.TensorSpec(k_b + tuple(policy.obs_shape), tf.as_dtype(policy.obs_dtype))
        inputs = {"obs": obs_spec, "next_obs": obs_spec, "actions": tf.TensorSpec(k_b + (policy.n_act,), tf.float32),
                  "rewards": tf.TensorSpec(k_b, tf.float32), "dones": tf.TensorSpec(k_b, tf.float32),
                  "learning_rate": tf.TensorSpec((), tf.float32), "flags": tf.TensorSpec((n_steps,), tf.float32),
                  # stateless-RNG seeds below 2 ** 24 (exact in float32, so they travel in the packed vector)
                  "seeds": tf.TensorSpec((n_steps, 2), tf.float32)}
        n_stats = len(stat_names)

        def train(obs, next_obs, actions, rewards, dones, learning_rate, flags, seeds):
            seeds = tf.cast(seeds, tf.int64)
            if n_steps == 1:
                stats = one_step(obs[0], actions[0], rewards[0], next_obs[0], dones[0], learning_rate, seeds[0],
                                 variant)
            else:
                def step(k, stats):
                    return (stats + one_step(obs[k], actions[k], rewards[k], next_obs[k], dones[k], learning_rate,
                                             seeds[k], flags[k] > 0.5) / float(n_steps),)

                stats, = repeat_steps(n_steps, step, (tf.zeros((n_stats,), tf.float32),))
            return {stat: stats[i] for i, stat in enumerate(stat_names)}

        return TrainStep(train, inputs, networks=networks, jit_compile=self._use_xla(policy), name=name)

    def _run_train(self, flags: Sequence[bool], lr: float) -> np.ndarray:
        """``len(flags)`` gradient steps on freshly sampled batches in one compiled call; the statistics in the order
        of ``_train_stat_names``."""
        n_steps = len(flags)
        variant = bool(flags[0]) if n_steps == 1 else None
        step = self._train_steps.get(n_steps, variant)
        sample = self.replay_buffer.sample_batch(self.batch_size * n_steps, env=self._vec_normalize_env)
        obs_shape = (n_steps, self.batch_size) + tuple(self.policy_tf.obs_shape)
        stats = step(obs=sample.observations.reshape(obs_shape), next_obs=sample.next_observations.reshape(obs_shape),
                     actions=sample.actions, rewards=sample.rewards, dones=sample.dones, learning_rate=lr,
                     flags=np.asarray(flags, np.float32), seeds=np.random.randint(0, 2 ** 24, size=(n_steps, 2)))
        return np.array([stats[name] for name in self._train_stat_names], np.float32)

    # ------------------------------------------------------------------ predict
    def _predict_step(self, observation: np.ndarray, deterministic: bool) -> np.ndarray:
        """The policy's actions in [-1, 1] for a batch of observations."""
        raise NotImplementedError

    def predict(self, observation, state=None, mask=None, deterministic=True):
        """
        Get the model's action(s) from an observation, rescaled from [-1, 1] to the action space's bounds.

        :param observation: (np.ndarray) the input observation (single or batch)
        :param state: (np.ndarray) unused
        :param mask: (np.ndarray) unused
        :param deterministic: (bool) whether to return deterministic actions (SAC: ``tanh(mu)`` instead of a sample;
            TD3: without ``action_noise``)
        :return: (np.ndarray, None) the action(s) and None
        """
        observation, vectorized_env = self._check_obs(observation)
        actions = self._predict_step(observation, deterministic)
        actions = actions.reshape((-1,) + self.action_space.shape)
        actions = unscale_action(self.action_space, actions)
        if not vectorized_env:
            actions = actions[0]
        return actions, None

    # ------------------------------------------------------------------ behaviour cloning
    def _deterministic_actor(self, obs: tf.Tensor) -> tf.Tensor:
        """The deterministic action in [-1, 1] (TF, differentiable in the actor's variables)."""
        raise NotImplementedError

    def _pretrain_output(self, obs):
        low = tf.constant(self.action_space.low, tf.float32)
        high = tf.constant(self.action_space.high, tf.float32)
        return low + 0.5 * (self._deterministic_actor(obs) + 1.0) * (high - low)

    def _pretrain_variables(self) -> list:
        return list(self._actor_vars)


__all__ = ["ActorCriticOffPolicyAlgorithm"]
