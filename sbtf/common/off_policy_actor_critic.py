"""What SAC and TD3 share on top of ``OffPolicyAlgorithm``: the learning-rate schedule, action noise, random
exploration, the training schedule (``train_freq``, ``gradient_steps``, ``learning_starts``, a per-step flag every
``N`` gradient steps) and the K-gradient-step ``TrainStep`` (K stacked minibatches in, averaged statistics out; the
acting weights of the updated policies are installed by the step itself)."""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from sbtf.common.fast_call import TrainStep
from sbtf.common.math_util import scale_action, unscale_action
from sbtf.common.off_policy_algorithm import LearnState, OffPolicyAlgorithm
from sbtf.common.schedules import get_schedule_fn

#: a training plan of SAC/TD3: (per-gradient-step flags, learning rate)
ActorCriticPlan = Tuple[List[bool], float]


class ActorCriticOffPolicyAlgorithm(OffPolicyAlgorithm):
    """
    Bookkeeping shared by SAC and TD3.

    Subclasses implement ``_explore_step(obs)`` (the policy's actions in [-1, 1] before action noise),
    ``_trains_after(step, timestep)`` (SB2's train-frequency test), ``_flag_period`` (SAC: target updates, TD3: policy
    updates every that many gradient steps) and ``_train``.
    """

    def _explore_step(self, obs: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _trains_after(self, step: int, timestep: int) -> bool:
        """Whether gradient steps follow env step ``step`` of this learn() call (``timestep``: its 1-based count)."""
        raise NotImplementedError

    @property
    def _flag_period(self) -> int:
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

    def _k_step_train_step(self, one_step: Callable, n_steps: int, variant, stat_names: Sequence[str],
                           updates: Sequence, name: str) -> TrainStep:
        """
        A ``TrainStep`` running ``one_step`` ``n_steps`` times on stacked minibatches and averaging its statistics
        (``one_step(obs, actions, rewards, next_obs, dones, lr, seed, flag) -> stack(stats)``); with one step its
        last argument is ``variant``, else the step's entry of the ``flags`` input.
        """
        policy = self.policy_tf
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
                stats = tf.zeros((n_stats,), tf.float32)
                for k in tf.range(n_steps):
                    stats += one_step(obs[k], actions[k], rewards[k], next_obs[k], dones[k], learning_rate, seeds[k],
                                      flags[k] > 0.5) / float(n_steps)
            return {stat: stats[i] for i, stat in enumerate(stat_names)}

        return TrainStep(train, inputs, updates=updates, jit_compile=self._use_xla(policy), name=name)

    def _call_train(self, flags: Sequence[bool], lr: float) -> Dict[str, np.ndarray]:
        """Sample ``len(flags)`` batches and run the train step for them; its named statistics."""
        n_steps = len(flags)
        variant = bool(flags[0]) if n_steps == 1 else None
        step = self._train_steps.get(n_steps, variant)
        sample = self.replay_buffer.sample_batch(self.batch_size * n_steps, env=self._vec_normalize_env)
        obs_shape = (n_steps, self.batch_size) + tuple(self.policy_tf.obs_shape)
        return step(obs=sample.observations.reshape(obs_shape), next_obs=sample.next_observations.reshape(obs_shape),
                    actions=sample.actions, rewards=sample.rewards, dones=sample.dones, learning_rate=lr,
                    flags=np.asarray(flags, np.float32), seeds=np.random.randint(0, 2 ** 24, size=(n_steps, 2)))


__all__ = ["ActorCriticOffPolicyAlgorithm"]
