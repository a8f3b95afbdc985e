"""What the off-policy algorithms (DQN, SAC, TD3) share: the collection loop over a VecEnv, TF1-exact fused Adam,
target-network updates and the cache of compiled train functions.

Collection works with a VecEnv of ``n_envs`` environments: each loop iteration steps every env once and stores
``n_envs`` transitions. The next observation of a finished episode is ``infos[i]["terminal_observation"]`` (the
VecEnv has already reset that env), and an episode cut by a time limit (``infos[i]["TimeLimit.truncated"]``) is
stored with ``done = False``, so that its value is bootstrapped instead of being learnt as a termination. With one
env, the training schedule (``train_freq``, ``learning_starts``, target updates) is exactly stable-baselines 2's;
with ``n_envs`` envs, every env step counts as one timestep, so an iteration that passes ``k`` multiples of
``train_freq`` runs ``k`` training events (the ratio of gradient steps to transitions is kept).

Training runs one compiled ``tf.function`` call per group of consecutive gradient steps: the function for ``K``
gradient steps takes ``K`` stacked minibatches and has a fixed ``input_signature``; each ``K`` is traced once
(``n_traces`` counts the traces, so tests can assert that nothing retraces after warm-up).
"""
from __future__ import annotations

import math
import time
from collections import deque
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import gymnasium as gym
import numpy as np
import tensorflow as tf

from sbtf import logger
from sbtf.common.base_class import OffPolicyRLModel
from sbtf.common.fast_call import FastFunction, FlatLayout, to_tensor  # noqa: F401 (re-exported)
from sbtf.common.input import check_obs_space
from sbtf.common.math_util import safe_mean, scale_action, total_episode_reward_logger, unscale_action
from sbtf.common.schedules import get_schedule_fn


# ---------------------------------------------------------------------------------------------------------------
# optimisation helpers (used inside tf.function)
# ---------------------------------------------------------------------------------------------------------------
def _tf_variable(var) -> tf.Variable:
    """The tf.Variable behind a Keras 3 variable (or the variable itself)."""
    return getattr(var, "value", var) if not isinstance(var, tf.Variable) else var


class FusedAdam(tf.Module):
    """
    ``tf.train.AdamOptimizer`` exactly (TF1 semantics, including the ``beta1_power``/``beta2_power`` accumulators),
    applied with one fused ``ResourceApplyAdam`` kernel per variable, the kernel TF1 itself used. Usable inside
    ``tf.function`` and XLA.

    :param variables: the variables to optimise
    :param beta1: (float) first moment decay
    :param beta2: (float) second moment decay
    :param epsilon: (float) epsilon (outside the square root, as TF1)
    """

    def __init__(self, variables: Sequence, beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-8,
                 name: str = "Adam"):
        super().__init__(name=name)
        self.variables_ = [_tf_variable(v) for v in variables]
        self.beta1 = float(beta1)
        self.beta2 = float(beta2)
        self.epsilon = float(epsilon)
        self.m = [tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False, name="m") for v in self.variables_]
        self.v = [tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False, name="v") for v in self.variables_]
        self.beta1_power = tf.Variable(self.beta1, trainable=False, dtype=tf.float32, name="beta1_power")
        self.beta2_power = tf.Variable(self.beta2, trainable=False, dtype=tf.float32, name="beta2_power")

    def apply(self, grads: Sequence[Optional[tf.Tensor]], learning_rate) -> None:
        lr = tf.cast(learning_rate, tf.float32)
        beta1 = tf.constant(self.beta1, tf.float32)
        beta2 = tf.constant(self.beta2, tf.float32)
        epsilon = tf.constant(self.epsilon, tf.float32)
        b1p = self.beta1_power.read_value()
        b2p = self.beta2_power.read_value()
        for var, grad, m, v in zip(self.variables_, grads, self.m, self.v):
            if grad is None:
                continue
            tf.raw_ops.ResourceApplyAdam(var=var.handle, m=m.handle, v=v.handle, beta1_power=b1p, beta2_power=b2p,
                                         lr=lr, beta1=beta1, beta2=beta2, epsilon=epsilon,
                                         grad=tf.convert_to_tensor(grad))
        self.beta1_power.assign(b1p * beta1)
        self.beta2_power.assign(b2p * beta2)

    def reset(self) -> None:
        for slot in self.m + self.v:
            slot.assign(tf.zeros_like(slot))
        self.beta1_power.assign(self.beta1)
        self.beta2_power.assign(self.beta2)


def polyak_update(targets: Sequence, sources: Sequence, tau) -> None:
    """``target = (1 - tau) * target + tau * source`` for each pair (inside tf.function)."""
    for target, source in zip(targets, sources):
        _tf_variable(target).assign((1.0 - tau) * target + tau * source)


def copy_variables(targets: Sequence, sources: Sequence) -> None:
    """``target = source`` for each pair (inside tf.function)."""
    for target, source in zip(targets, sources):
        _tf_variable(target).assign(source)


def huber_loss(x, delta: float = 1.0):
    """Huber loss (SB2 ``tf_util.huber_loss``): ``0.5 x^2`` if ``|x| < delta`` else ``delta (|x| - 0.5 delta)``."""
    return tf.where(tf.abs(x) < delta, tf.square(x) * 0.5, delta * (tf.abs(x) - 0.5 * delta))


class TrainFunctionCache:
    """
    Compiled train functions keyed by (number of gradient steps K, variant). Each is a ``tf.function`` with a fixed
    ``input_signature``, traced once on first use and called through ``FastFunction``; ``n_traces`` counts the
    traces.

    :param builder: ``builder(K, variant) -> (python_fn, input_signature)``
    :param jit_compile: (bool) compile with XLA
    """

    def __init__(self, builder: Callable, jit_compile: bool = True):
        self.builder = builder
        self.jit_compile = jit_compile
        self.n_traces = 0
        self._fns: Dict[Any, FastFunction] = {}

    def get(self, n_steps: int, variant: Any = None) -> FastFunction:
        key = (int(n_steps), variant)
        fn = self._fns.get(key)
        if fn is None:
            python_fn, signature = self.builder(int(n_steps), variant)

            def traced(*args):
                self.n_traces += 1
                return python_fn(*args)

            compiled = tf.function(traced, input_signature=signature, jit_compile=self.jit_compile,
                                   reduce_retracing=False)
            fn = FastFunction(compiled.get_concrete_function())
            self._fns[key] = fn
        return fn

    def clear(self) -> None:
        self._fns.clear()


def stateless_seed() -> np.ndarray:
    """A fresh (2,) int64 seed for TF stateless random ops, drawn from NumPy's global generator."""
    return np.random.randint(0, 2 ** 31 - 1, size=(2,)).astype(np.int64)


# ---------------------------------------------------------------------------------------------------------------
# the algorithm base
# ---------------------------------------------------------------------------------------------------------------
class OffPolicyAlgorithm(OffPolicyRLModel):
    """
    Shared machinery of sbtf's DQN, SAC and TD3 (SB2 ``OffPolicyRLModel`` plus a multi-env collection loop).

    Subclasses implement ``_learn_start(total_timesteps)``, ``_select_actions(obs)`` (buffer actions, env actions),
    ``_train_events(...)`` and the usual model API.
    """

    _vec_normalize_env = None
    #: observation spaces the algorithm accepts
    _supported_observation_spaces = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete,
                                     gym.spaces.MultiBinary)

    def _check_spaces(self, observation_space: gym.Space, action_space: gym.Space) -> None:
        super()._check_spaces(observation_space, action_space)
        check_obs_space(observation_space, type(self).__name__)
        if isinstance(action_space, gym.spaces.Box) and not (np.all(np.isfinite(action_space.low))
                                                             and np.all(np.isfinite(action_space.high))):
            raise ValueError(f"Error: {type(self).__name__} rescales its [-1, 1] actions to the bounds of the action "
                             f"space, which must be finite; got {action_space!r}. Wrap the env in "
                             "gymnasium.wrappers.RescaleAction or give the Box finite low/high.")

    #: compile the train step with XLA: True, False or "auto" (XLA for Mlp networks whose layers are at most
    #: ``xla_max_layer`` wide; measured on CPU, XLA wins on small networks where per-op overhead dominates and loses on
    #: large ones, where TensorFlow's oneDNN matrix products beat XLA's)
    jit_compile = "auto"
    xla_max_layer = 128

    def _use_xla(self, policy) -> bool:
        if self.jit_compile in (True, False):
            return bool(self.jit_compile)
        sizes = list(getattr(policy, "layer_sizes", [])) or [0]
        return getattr(policy, "feature_extraction", "mlp") == "mlp" and max(sizes) <= self.xla_max_layer

    @property
    def n_traces(self) -> int:
        """How many times the compiled train functions were traced (constant after warm-up)."""
        cache = getattr(self, "_train_fns", None)
        return 0 if cache is None else cache.n_traces

    # ------------------------------------------------------------------ SB2 OffPolicyRLModel API
    def is_using_her(self) -> bool:
        """Check if is using HER (the replay buffer is HER's wrapper)."""
        return type(self.replay_buffer).__name__ == "HindsightExperienceReplayWrapper"

    def replay_buffer_add(self, obs_t, action, reward, obs_tp1, done, info) -> None:
        """
        Add a new transition to the replay buffer.

        :param obs_t: (np.ndarray) the last observation
        :param action: ([float]) the action
        :param reward: (float) the reward of the transition
        :param obs_tp1: (np.ndarray) the new observation
        :param done: (bool) is the episode done
        :param info: (dict) extra values used to compute the reward when using HER
        """
        kwargs = dict(info=info) if self.is_using_her() else {}
        self.replay_buffer.add(obs_t, action, reward, obs_tp1, float(done), **kwargs)

    def _make_replay_buffer(self):
        from sbtf.common.buffers import ReplayBuffer
        return ReplayBuffer(self.buffer_size)

    def _ensure_replay_buffer(self) -> None:
        """Create the replay buffer unless a compatible one exists (e.g. loaded with ``load_replay_buffer``)."""
        if self.replay_buffer is None:
            self.replay_buffer = self._make_replay_buffer()

    # ------------------------------------------------------------------ helpers for subclasses
    @staticmethod
    def _unnormalize_obs(vec_normalize, obs: np.ndarray) -> np.ndarray:
        """Invert ``VecNormalize.normalize_obs`` (exact unless the observation was clipped)."""
        if vec_normalize is None or not vec_normalize.norm_obs:
            return obs
        rms = vec_normalize.obs_rms
        return (np.asarray(obs, np.float64) * np.sqrt(rms.var + vec_normalize.epsilon) + rms.mean).astype(
            np.asarray(obs).dtype)

    def _transitions(self, obs_, new_obs, new_obs_, rewards_, dones, infos):
        """
        The next observations and done flags to store for one VecEnv step.

        :return: (next_obs to store, done flags to store (float32): terminated, not truncated)
        """
        next_obs = new_obs_
        store_dones = dones.astype(np.float32)
        if dones.any():
            next_obs = np.array(new_obs_, copy=True)
            for i in np.flatnonzero(dones):
                info = infos[i]
                terminal = info.get("terminal_observation")
                if terminal is not None:
                    next_obs[i] = self._unnormalize_obs(self._vec_normalize_env, terminal)
                if info.get("TimeLimit.truncated", False):
                    store_dones[i] = 0.0
        return next_obs, store_dones

    def _store(self, obs_, buffer_actions, rewards_, next_obs, store_dones, infos) -> None:
        if self.n_envs == 1:
            if self.is_using_her():
                self.replay_buffer_add(obs_[0], buffer_actions[0], float(rewards_[0]), next_obs[0],
                                       store_dones[0], infos[0])
            else:
                self.replay_buffer.add(obs_[0], buffer_actions[0], float(rewards_[0]), next_obs[0],
                                       store_dones[0])
        elif self.is_using_her():
            for i in range(self.n_envs):
                self.replay_buffer_add(obs_[i], buffer_actions[i], float(rewards_[i]), next_obs[i],
                                       store_dones[i], infos[i])
        else:
            self.replay_buffer.extend(obs_, buffer_actions, rewards_, next_obs, store_dones)

    # ------------------------------------------------------------------ hooks
    def _learn_start(self, total_timesteps: int) -> None:
        """Schedules etc. for a learn() call."""

    def _select_actions(self, obs: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """(actions to store in the buffer, actions for the env) for a batch of ``n_envs`` observations."""
        raise NotImplementedError

    def _on_dones(self, dones: np.ndarray) -> None:
        """Called after each VecEnv step in which some env finished an episode."""

    def _train_events(self, first_step: int, n_steps: int, total_timesteps: int, writer) -> Optional[np.ndarray]:
        """
        Train for the env steps ``first_step ... first_step + n_steps - 1`` of this learn() call
        (``self.num_timesteps`` already counts them). Returns the last training statistics (or None).
        """
        raise NotImplementedError

    def _log_values(self) -> List[Tuple[str, Any]]:
        """Extra (key, value) pairs for the verbose log."""
        return []

    def _stats_names(self) -> List[str]:
        return []

    # ------------------------------------------------------------------ the loop
    def _learn(self, total_timesteps: int, callback=None, log_interval: int = 100, tb_log_name: str = "run",
               reset_num_timesteps: bool = True, replay_wrapper=None, progress_bar: bool = False):
        from sbtf.common.vec_env import unwrap_vec_normalize

        with self._learning(callback, total_timesteps, tb_log_name, reset_num_timesteps,
                            progress_bar) as (callback, writer):
            self._vec_normalize_env = unwrap_vec_normalize(self.env)
            self._ensure_replay_buffer()
            if replay_wrapper is not None:
                self.replay_buffer = replay_wrapper(self.replay_buffer)
            self._learn_start(total_timesteps)

            env = self.env
            n_envs = self.n_envs
            vec_normalize = self._vec_normalize_env
            start_time = time.time()
            episode_rewards = deque(maxlen=100)
            episode_successes: deque = deque(maxlen=100)
            current_rewards = np.zeros(n_envs, dtype=np.float64)
            num_episodes = 0
            infos_values = None
            obs = env.reset()
            obs_ = vec_normalize.get_original_obs() if vec_normalize is not None else obs
            callback.on_training_start(locals(), globals())
            callback.on_rollout_start()
            n_iterations = int(math.ceil(total_timesteps / n_envs))
            for step in range(n_iterations):
                buffer_actions, env_actions = self._select_actions(obs)
                new_obs, rewards, dones, infos = env.step(env_actions)
                self.num_timesteps += n_envs
                # SB2 local names, for callbacks that read them
                action, rew, reward, done, info = buffer_actions, rewards, rewards, dones, infos
                callback.update_locals(locals())
                if callback.on_step() is False:
                    break
                if vec_normalize is not None:
                    new_obs_ = vec_normalize.get_original_obs()
                    rewards_ = vec_normalize.get_original_reward()
                else:
                    new_obs_, rewards_ = new_obs, rewards
                next_obs, store_dones = self._transitions(obs_, new_obs, new_obs_, rewards_, dones, infos)
                self._store(obs_, buffer_actions, rewards_, next_obs, store_dones, infos)
                obs = new_obs
                obs_ = new_obs_

                if writer is not None:
                    total_episode_reward_logger(self.episode_reward, np.asarray(rewards_).reshape((n_envs, 1)),
                                                dones.reshape((n_envs, 1)), writer, self.num_timesteps)
                current_rewards += rewards_
                any_done = bool(dones.any())
                if any_done:
                    for i in np.flatnonzero(dones):
                        episode_rewards.append(float(current_rewards[i]))
                        current_rewards[i] = 0.0
                        num_episodes += 1
                        maybe_ep_info = infos[i].get("episode")
                        if maybe_ep_info is not None:
                            self.ep_info_buf.append(maybe_ep_info)
                        maybe_is_success = infos[i].get("is_success")
                        if maybe_is_success is not None:
                            episode_successes.append(float(maybe_is_success))
                    self._on_dones(dones)

                stats = self._train_events(step * n_envs, n_envs, total_timesteps, writer)
                if stats is not None:
                    callback.on_rollout_end()
                    infos_values = stats
                    callback.on_rollout_start()

                if (self.verbose >= 1 and any_done and log_interval is not None
                        and num_episodes % log_interval < int(dones.sum())):
                    fps = int(self.num_timesteps / max(time.time() - start_time, 1e-9)) if reset_num_timesteps \
                        else int((step + 1) * n_envs / max(time.time() - start_time, 1e-9))
                    mean_reward = round(float(np.mean(episode_rewards)), 1) if episode_rewards else -np.inf
                    logger.logkv("episodes", num_episodes)
                    logger.logkv("mean 100 episode reward", mean_reward)
                    if len(self.ep_info_buf) > 0 and len(self.ep_info_buf[0]) > 0:
                        logger.logkv("ep_rewmean", safe_mean([ep_info["r"] for ep_info in self.ep_info_buf]))
                        logger.logkv("eplenmean", safe_mean([ep_info["l"] for ep_info in self.ep_info_buf]))
                    for key, value in self._log_values():
                        logger.logkv(key, value)
                    logger.logkv("fps", fps)
                    logger.logkv("time_elapsed", int(time.time() - start_time))
                    if len(episode_successes) > 0:
                        logger.logkv("success rate", np.mean(episode_successes))
                    if infos_values is not None:
                        for name, val in zip(self._stats_names(), np.asarray(infos_values).reshape(-1)):
                            logger.logkv(name, float(val))
                    logger.logkv("total timesteps", self.num_timesteps)
                    logger.dumpkvs()
            callback.on_training_end()
        return self

    @staticmethod
    def _count_multiples(low_exclusive: int, high_inclusive: int, freq: int) -> int:
        """How many multiples of ``freq`` lie in ``(low_exclusive, high_inclusive]``."""
        if high_inclusive <= low_exclusive:
            return 0
        return high_inclusive // freq - low_exclusive // freq


_LEARN_DOC = """
        Train the model for ``total_timesteps`` environment steps (summed over the envs of a VecEnv).

        :param total_timesteps: (int) The total number of samples to train on
        :param callback: (callable, [BaseCallback] or BaseCallback) called at every step
        :param log_interval: (int) The number of episodes before logging (verbose >= 1)
        :param tb_log_name: (str) the name of the run for tensorboard log
        :param reset_num_timesteps: (bool) whether or not to reset the current timestep number (used in logging)
        :param replay_wrapper: (callable) wraps the replay buffer (HER)
        :param progress_bar: (bool) show a progress bar (tqdm)
        :return: ({algo}) the trained model
        """


def learn_doc(algo: str) -> Callable:
    """Decorator: the shared ``learn`` docstring of the off-policy algorithms, returning an ``algo`` model."""
    def decorate(fn: Callable) -> Callable:
        fn.__doc__ = _LEARN_DOC.replace("{algo}", algo)
        return fn
    return decorate


class ActorCriticOffPolicyAlgorithm(OffPolicyAlgorithm):
    """
    Bookkeeping shared by SAC and TD3: learning-rate schedule, action noise, random exploration and the compiled
    K-gradient-step train call (sample K batches, pack them, unpack the statistics and the acting weights).

    Subclasses implement ``_explore_step(obs)`` (the policy's actions in [-1, 1] before action noise).
    """

    def _explore_step(self, obs: np.ndarray) -> np.ndarray:
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
        obs, actions, rewards, next_obs, dones = self.replay_buffer.sample(batch * n_steps,
                                                                           env=self._vec_normalize_env)
        k_b = (n_steps, batch)
        obs_dtype, obs_shape = self.policy_tf.obs_dtype, tuple(self.policy_tf.obs_shape)
        obs_pair = np.stack([obs.astype(obs_dtype, copy=False).reshape(k_b + obs_shape),
                             next_obs.astype(obs_dtype, copy=False).reshape(k_b + obs_shape)])
        seeds = np.random.randint(0, 2 ** 24, size=(n_steps, 2))
        floats = in_layout.pack([actions, rewards, dones, lr, np.asarray(flags, np.float32), seeds])
        out = fn(obs_pair, floats).numpy()
        return out_layout.unpack_np(out)


__all__ = ["OffPolicyAlgorithm", "ActorCriticOffPolicyAlgorithm", "learn_doc", "FusedAdam", "TrainFunctionCache", "FastFunction", "FlatLayout", "to_tensor", "polyak_update", "copy_variables", "huber_loss",
           "stateless_seed"]


# ---------------------------------------------------------------------------------------------------------------
# feed-forward actor / critics with SB2 names (shared by the SAC and TD3 policies)
# ---------------------------------------------------------------------------------------------------------------
from sbtf.common.off_policy_networks import ActorCriticNetworks  # noqa: E402,F401 (moved; re-exported)
