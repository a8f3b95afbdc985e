"""What SAC and TD3 share on top of ``OffPolicyAlgorithm``: the learning-rate schedule, action noise, random
exploration, the training schedule (``train_freq``, ``gradient_steps``, ``learning_starts``, a per-step flag every
``N`` gradient steps) and the compiled K-gradient-step train call (sample K batches, pack them, unpack the statistics
and the acting weights)."""
from __future__ import annotations

from typing import Callable, List, Optional, Tuple

import numpy as np
import tensorflow as tf

from sbtf.common.fast_call import FlatLayout
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

    def _multi_step_train(self, one_step: Callable, n_steps: int, variant, n_stats: int, acting_vars: list,
                          in_layout: FlatLayout, out_layout: FlatLayout, obs_shape: tuple, obs_dtype):
        """
        ``(train, input_signature)`` running ``one_step`` ``n_steps`` times (averaging its ``n_stats`` statistics);
        with one step its last argument is ``variant``, else the per-step flag.
        """
        def train(obs_pair, floats):
            actions, rewards, dones, lr, flags, seeds = in_layout.unpack_tf(floats)
            seeds = tf.cast(seeds, tf.int64)
            obs, next_obs = obs_pair[0], obs_pair[1]
            if n_steps == 1:
                stats = one_step(obs[0], actions[0], rewards[0], next_obs[0], dones[0], lr, seeds[0], variant)
            else:
                stats = tf.zeros((n_stats,), tf.float32)
                for k in tf.range(n_steps):
                    stats += one_step(obs[k], actions[k], rewards[k], next_obs[k], dones[k], lr, seeds[k],
                                      flags[k] > 0.5) / float(n_steps)
            return out_layout.flatten_tf([stats] + [tf.identity(v) for v in acting_vars])

        self._train_layouts[(n_steps, variant)] = (in_layout, out_layout)
        k_b = (n_steps, int(self.batch_size))
        signature = [tf.TensorSpec((2,) + k_b + obs_shape, obs_dtype), tf.TensorSpec((in_layout.size,), tf.float32)]
        return train, signature

    def _call_train(self, flags: list, lr: float) -> list:
        """Sample ``len(flags)`` batches and run the compiled train function; the unpacked output parts."""
        n_steps = len(flags)
        variant = bool(flags[0]) if n_steps == 1 else None
        fn = self._train_fns.get(n_steps, variant)
        in_layout, out_layout = self._train_layouts[(n_steps, variant)]
        batch = self.batch_size
        sample = self.replay_buffer.sample_batch(batch * n_steps, env=self._vec_normalize_env)
        k_b = (n_steps, batch)
        obs_dtype, obs_shape = self.policy_tf.obs_dtype, tuple(self.policy_tf.obs_shape)
        obs_pair = np.stack([sample.observations.astype(obs_dtype, copy=False).reshape(k_b + obs_shape),
                             sample.next_observations.astype(obs_dtype, copy=False).reshape(k_b + obs_shape)])
        seeds = np.random.randint(0, 2 ** 24, size=(n_steps, 2))
        floats = in_layout.pack([sample.actions, sample.rewards, sample.dones, lr, np.asarray(flags, np.float32),
                                 seeds])
        out = fn(obs_pair, floats).numpy()
        return out_layout.unpack_np(out)


__all__ = ["ActorCriticOffPolicyAlgorithm"]
