"""Proximal Policy Optimization (GPU/vectorised version), stable-baselines 2.x ``PPO2``.

The whole optimisation phase of one update (``noptepochs`` epochs of ``nminibatches`` shuffled
minibatches, each an Adam step on the clipped surrogate) runs inside one ``tf.function`` call
for feed-forward policies; recurrent policies run one compiled call per minibatch of whole
environment sequences, as SB2 does.
"""
from __future__ import annotations

import time
import warnings


import gymnasium as gym
import numpy as np
import tensorflow as tf

from sbtf import logger
from sbtf.common.base_class import DeferredTrainFunction, NStepActorCriticRLModel, SetVerbosity
from sbtf.common.math_util import explained_variance
from sbtf.common.optimizers import Adam, clip_grads
from sbtf.common.runners import AbstractEnvRunner, swap_and_flatten
from sbtf.common.schedules import get_schedule_fn
from sbtf.common.train_log import log_rollout_episode_rewards, record_episode_means
from sbtf.common import model_schema as ms
from sbtf.common.tf_util import xla_pays_off

LOSS_NAMES = ["policy_loss", "value_loss", "policy_entropy", "approxkl", "clipfrac"]


class PPO2(NStepActorCriticRLModel):
    """
    Proximal Policy Optimization algorithm (GPU version), https://arxiv.org/abs/1707.06347

    :param policy: (ActorCriticPolicy or str) The policy model to use (MlpPolicy, CnnPolicy, CnnLstmPolicy, ...)
    :param env: (Gym environment or str) The environment to learn from (if registered in Gym, can be str)
    :param gamma: (float) Discount factor
    :param n_steps: (int) The number of steps to run for each environment per update
        (i.e. batch size is n_steps * n_env where n_env is number of environment copies running in parallel)
    :param ent_coef: (float) Entropy coefficient for the loss calculation
    :param learning_rate: (float or callable) The learning rate, it can be a function of the remaining progress
    :param vf_coef: (float) Value function coefficient for the loss calculation
    :param max_grad_norm: (float) The maximum value for the gradient clipping
    :param lam: (float) Factor for trade-off of bias vs variance for Generalized Advantage Estimator
    :param nminibatches: (int) Number of training minibatches per update. For recurrent policies,
        the number of environments run in parallel should be a multiple of nminibatches.
    :param noptepochs: (int) Number of epoch when optimizing the surrogate
    :param cliprange: (float or callable) Clipping parameter, it can be a function of the remaining progress
    :param cliprange_vf: (float or callable) Clipping parameter for the value function. None (default): the same
        clipping as the policy (legacy OpenAI baselines behaviour); a negative value: no clipping.
    :param verbose: (int) the verbosity level: 0 none, 1 training information, 2 tensorflow debug
    :param tensorboard_log: (str) the log location for tensorboard (if None, no logging)
    :param _init_setup_model: (bool) Whether or not to build the network at the creation of the instance
    :param policy_kwargs: (dict) additional arguments to be passed to the policy on creation
    :param full_tensorboard_log: (bool) also log histograms of returns, advantages and observations
    :param seed: (int) Seed for the pseudo-random generators (python, numpy, tensorflow, env).
    :param n_cpu_tf_sess: (int) The number of threads for TensorFlow operations (set once per process)
    """

    _save_schema = dict(
        gamma=ms.Real(), n_steps=ms.Integer(1, ms.MAX_ROLLOUT), vf_coef=ms.Real(), ent_coef=ms.Real(),
        max_grad_norm=ms.Nullable(ms.Real()), learning_rate=ms.Schedule(), lam=ms.Real(), nminibatches=ms.Integer(1),
        noptepochs=ms.Integer(1), cliprange=ms.Schedule(), cliprange_vf=ms.Nullable(ms.Schedule()))

    def __init__(self, policy, env, gamma=0.99, n_steps=128, ent_coef=0.01, learning_rate=2.5e-4, vf_coef=0.5,
                 max_grad_norm=0.5, lam=0.95, nminibatches=4, noptepochs=4, cliprange=0.2, cliprange_vf=None,
                 verbose=0, tensorboard_log=None, _init_setup_model=True, policy_kwargs=None,
                 full_tensorboard_log=False, seed=None, n_cpu_tf_sess=None):
        self.learning_rate = learning_rate
        self.cliprange = cliprange
        self.cliprange_vf = cliprange_vf
        self.ent_coef = ent_coef
        self.vf_coef = vf_coef
        self.max_grad_norm = max_grad_norm
        self.gamma = gamma
        self.lam = lam
        self.nminibatches = nminibatches
        self.noptepochs = noptepochs
        super().__init__(policy, env, n_steps=n_steps, verbose=verbose, tensorboard_log=tensorboard_log,
                         _init_setup_model=_init_setup_model, policy_kwargs=policy_kwargs,
                         full_tensorboard_log=full_tensorboard_log, seed=seed, n_cpu_tf_sess=n_cpu_tf_sess)

    # ------------------------------------------------------------------ setup
    def _make_runner(self) -> "PPO2Runner":
        return PPO2Runner(env=self.env, model=self, n_steps=self.n_steps, gamma=self.gamma, lam=self.lam)

    def setup_model(self):
        with SetVerbosity(self.verbose):
            self.n_batch = self.n_envs * self.n_steps
            recurrent = bool(getattr(self.policy, "recurrent", False))
            if recurrent and self.n_envs % self.nminibatches != 0:
                raise ValueError("For recurrent policies, the number of environments run in parallel should be a "
                                 f"multiple of nminibatches (n_envs={self.n_envs}, nminibatches={self.nminibatches}).")
            if self.n_batch % self.nminibatches != 0:
                warnings.warn("In PPO2, the number of samples per update (n_envs * n_steps = "
                              f"{self.n_batch}) is not a multiple of nminibatches ({self.nminibatches}); "
                              f"{self.n_batch % self.nminibatches} samples per epoch are left out.")
            self._setup_policy(1, None)
            self.optimizer = Adam(self._variables, epsilon=1e-5)
            self._shuffle_gen = tf.random.Generator.from_seed(int(np.random.randint(0, 2 ** 31 - 1)))
            self._train_fn = DeferredTrainFunction(self)  # traced on the first update, not at load

    def _reseed_policy(self, seed: int) -> None:
        super()._reseed_policy(seed)
        if getattr(self, "_shuffle_gen", None) is not None:
            self._shuffle_gen.reset_from_seed(seed)

    # ------------------------------------------------------------------ losses
    def _minibatch_loss(self, obs, returns, masks, actions, values, neglogpacs, states, cliprange, cliprange_vf,
                        n_steps: int):
        policy = self.policy_tf
        advs = returns - values
        advs = (advs - tf.reduce_mean(advs)) / (tf.math.reduce_std(advs) + 1e-8)
        flat, vpred, _, _ = policy.forward(obs, states, masks, n_steps=n_steps)
        dist = policy.proba_distribution_from_flat(flat)
        neglogpac = dist.neglogp(actions)
        entropy = tf.reduce_mean(dist.entropy())
        vf_losses1 = tf.square(vpred - returns)
        if self._clip_vf_mode() == "none":
            vf_loss = 0.5 * tf.reduce_mean(vf_losses1)
        else:
            vpred_clipped = values + tf.clip_by_value(vpred - values, -cliprange_vf, cliprange_vf)
            vf_loss = 0.5 * tf.reduce_mean(tf.maximum(vf_losses1, tf.square(vpred_clipped - returns)))
        ratio = tf.exp(neglogpacs - neglogpac)
        pg_losses = -advs * ratio
        pg_losses2 = -advs * tf.clip_by_value(ratio, 1.0 - cliprange, 1.0 + cliprange)
        pg_loss = tf.reduce_mean(tf.maximum(pg_losses, pg_losses2))
        approxkl = 0.5 * tf.reduce_mean(tf.square(neglogpac - neglogpacs))
        clipfrac = tf.reduce_mean(tf.cast(tf.greater(tf.abs(ratio - 1.0), cliprange), tf.float32))
        loss = pg_loss - entropy * self.ent_coef + vf_loss * self.vf_coef
        return loss, tf.stack([pg_loss, vf_loss, entropy, approxkl, clipfrac])

    def _clip_vf_mode(self) -> str:
        if self.cliprange_vf is None:
            return "same"
        if isinstance(self.cliprange_vf, (float, int)) and self.cliprange_vf < 0:
            return "none"
        return "own"

    def _apply_minibatch(self, obs, returns, masks, actions, values, neglogpacs, states, lr, cliprange,
                         cliprange_vf, n_steps: int):
        with tf.GradientTape() as tape:
            loss, stats = self._minibatch_loss(obs, returns, masks, actions, values, neglogpacs, states, cliprange,
                                               cliprange_vf, n_steps)
        grads = tape.gradient(loss, self._variables)
        grads, _ = clip_grads(grads, self.max_grad_norm)
        self.optimizer.apply(grads, lr)
        return stats

    def _make_train_fn(self):
        policy = self.policy_tf
        pdtype = policy.pdtype
        act_shape = tuple(pdtype.sample_shape())
        act_dtype = pdtype.sample_dtype() if not isinstance(self.action_space, gym.spaces.Box) else tf.float32
        scalar = tf.TensorSpec((), tf.float32)

        if policy.recurrent:
            envs_per_batch = self.n_envs // self.nminibatches
            n_mb = envs_per_batch * self.n_steps
            vec = tf.TensorSpec((n_mb,), tf.float32)
            signature = [policy.obs_signature(n_mb), vec, vec, tf.TensorSpec((n_mb,) + act_shape, act_dtype), vec,
                         vec, tf.TensorSpec((envs_per_batch, policy.state_size), tf.float32), scalar, scalar, scalar]

            @tf.function(input_signature=signature)
            def train_minibatch(obs, returns, masks, actions, values, neglogpacs, states, lr, cliprange,
                                cliprange_vf):
                return self._apply_minibatch(obs, returns, masks, actions, values, neglogpacs, states, lr, cliprange,
                                             cliprange_vf, self.n_steps)

            return train_minibatch

        n_batch = self.n_batch
        nminibatches = int(self.nminibatches)
        batch_size = n_batch // nminibatches
        noptepochs = int(self.noptepochs)
        vec = tf.TensorSpec((n_batch,), tf.float32)
        signature = [policy.obs_signature(n_batch), vec, tf.TensorSpec((n_batch,) + act_shape, act_dtype), vec, vec,
                     scalar, scalar, scalar]

        @tf.function(input_signature=signature, jit_compile=xla_pays_off(policy))
        def train_epochs(obs, returns, actions, values, neglogpacs, lr, cliprange, cliprange_vf):
            stats = tf.zeros((len(LOSS_NAMES),), tf.float32)
            for _ in tf.range(noptepochs):
                perm = tf.argsort(self._shuffle_gen.uniform((n_batch,)))
                s_obs, s_returns, s_actions, s_values, s_neglogpacs = (
                    tf.gather(x, perm) for x in (obs, returns, actions, values, neglogpacs))
                for mb in tf.range(nminibatches):
                    start = mb * batch_size

                    def take(x):
                        return tf.slice(x, tf.concat([[start], tf.zeros(len(x.shape) - 1, tf.int32)], 0),
                                        [batch_size] + list(x.shape[1:]))

                    stats += self._apply_minibatch(
                        take(s_obs), take(s_returns), None, take(s_actions), take(s_values), take(s_neglogpacs),
                        None, lr, cliprange, cliprange_vf, 1)
            # the updated weights ride along, so acting needs no second TF call to refresh its NumPy copy
            return tf.concat([stats / float(noptepochs * nminibatches), policy.flat_weights_tf()], axis=0)

        return train_epochs

    def _train(self, rollout, lr_now: float, cliprange_now: float, cliprange_vf_now: float) -> np.ndarray:
        obs, returns, masks, actions, values, neglogpacs, states = rollout
        # FastFunction casts every input to its signature's dtype
        if not self.policy_tf.recurrent:
            out = self._train_fn(obs, returns, actions, values, neglogpacs, lr_now, cliprange_now,
                                 cliprange_vf_now).numpy()
            self.policy_tf.install_flat_weights(out[len(LOSS_NAMES):])
            return out[:len(LOSS_NAMES)]
        else:
            envs_per_batch = self.n_envs // self.nminibatches
            env_indices = np.arange(self.n_envs)
            flat_indices = np.arange(self.n_envs * self.n_steps).reshape(self.n_envs, self.n_steps)
            stats = np.zeros(len(LOSS_NAMES), np.float32)
            count = 0
            for _ in range(self.noptepochs):
                np.random.shuffle(env_indices)
                for start in range(0, self.n_envs, envs_per_batch):
                    mb_env_inds = env_indices[start:start + envs_per_batch]
                    mb_flat = flat_indices[mb_env_inds].ravel()
                    stats += self._train_fn(obs[mb_flat], returns[mb_flat], masks[mb_flat],
                                            actions[mb_flat], values[mb_flat], neglogpacs[mb_flat],
                                            states[mb_env_inds], lr_now, cliprange_now,
                                            cliprange_vf_now).numpy()
                    count += 1
            stats /= max(count, 1)
        self.policy_tf.mark_weights_changed()
        return stats

    # ------------------------------------------------------------------ learn
    def learn(self, total_timesteps, callback=None, log_interval=1, tb_log_name="PPO2", reset_num_timesteps=True,
              progress_bar: bool = False):
        lr_fn = get_schedule_fn(self.learning_rate)
        cliprange_fn = get_schedule_fn(self.cliprange)
        mode = self._clip_vf_mode()
        cliprange_vf_fn = get_schedule_fn(self.cliprange_vf) if mode == "own" else cliprange_fn

        with self._learning(callback, total_timesteps, tb_log_name, reset_num_timesteps,
                            progress_bar) as (callback, writer):
            t_first_start = time.time()
            n_updates = total_timesteps // self.n_batch
            callback.on_training_start(locals(), globals())
            for update in range(1, n_updates + 1):
                t_start = time.time()
                frac = 1.0 - (update - 1.0) / n_updates
                lr_now = lr_fn(frac)
                cliprange_now = cliprange_fn(frac)
                cliprange_vf_now = cliprange_vf_fn(frac)
                callback.on_rollout_start()
                rollout = self.runner.run(callback)
                obs, returns, masks, actions, values, neglogpacs, states, ep_infos, true_reward = rollout
                callback.on_rollout_end()
                if not self.runner.continue_training:
                    break
                self.ep_info_buf.extend(ep_infos)
                loss_vals = self._train((obs, returns, masks, actions, values, neglogpacs, states), lr_now,
                                        cliprange_now, cliprange_vf_now)
                t_now = time.time()
                fps = int(self.n_batch / max(t_now - t_start, 1e-9))
                if writer is not None:
                    log_rollout_episode_rewards(self, writer, true_reward, masks)
                    writer.add_scalars({f"loss/{name}": val for name, val in zip(LOSS_NAMES, loss_vals)},
                                       self.num_timesteps)
                    writer.add_scalars({"input_info/learning_rate": lr_now, "input_info/clip_range": cliprange_now,
                                        "input_info/discounted_rewards": float(np.mean(returns))},
                                       self.num_timesteps)
                    if self.full_tensorboard_log:
                        writer.add_histogram("input_info/discounted_rewards", returns, self.num_timesteps)
                        writer.add_histogram("input_info/advantage", returns - values, self.num_timesteps)
                if self.verbose >= 1 and (update % log_interval == 0 or update == 1):
                    explained_var = explained_variance(values, returns)
                    logger.logkv("serial_timesteps", update * self.n_steps)
                    logger.logkv("n_updates", update)
                    logger.logkv("total_timesteps", self.num_timesteps)
                    logger.logkv("fps", fps)
                    logger.logkv("explained_variance", float(explained_var))
                    record_episode_means(self.ep_info_buf)
                    logger.logkv("time_elapsed", t_start - t_first_start)
                    for loss_val, loss_name in zip(loss_vals, LOSS_NAMES):
                        logger.logkv(loss_name, float(loss_val))
                    logger.dumpkvs()
            callback.on_training_end()
            return self


class PPO2Runner(AbstractEnvRunner):
    """
    Collects ``n_steps`` per env and computes GAE(lambda) returns (SB2 ``ppo2.Runner``), bootstrapping
    time-limit truncations from the value of the terminal observation.

    :param env: (VecEnv) The environment to learn from
    :param model: (PPO2) The model to learn
    :param n_steps: (int) The number of steps to run for each environment
    :param gamma: (float) Discount factor
    :param lam: (float) Factor for trade-off of bias vs variance for Generalized Advantage Estimator
    """

    def __init__(self, *, env, model, n_steps, gamma, lam):
        super().__init__(env=env, model=model, n_steps=n_steps)
        self.lam = lam
        self.gamma = gamma

    def _run(self):
        policy = self.model.policy_tf
        n_steps, n_envs = self.n_steps, self.n_envs
        act_shape = tuple(policy.pdtype.sample_shape())
        is_box = isinstance(self.env.action_space, gym.spaces.Box)
        mb_obs = np.zeros((n_steps, n_envs) + self.obs.shape[1:], dtype=self.obs.dtype)
        mb_rewards = np.zeros((n_steps, n_envs), dtype=np.float32)
        mb_true_rewards = np.zeros((n_steps, n_envs), dtype=np.float32)
        mb_actions = np.zeros((n_steps, n_envs) + act_shape, dtype=np.float32 if is_box else np.int64)
        mb_values = np.zeros((n_steps, n_envs), dtype=np.float32)
        mb_neglogpacs = np.zeros((n_steps, n_envs), dtype=np.float32)
        mb_dones = np.zeros((n_steps, n_envs), dtype=bool)
        mb_states = self.states
        ep_infos = []
        for step in range(n_steps):
            states_before = self.states
            actions, values, self.states, neglogpacs = policy.step(self.obs, self.states, self.dones)
            mb_obs[step] = self.obs
            mb_actions[step] = actions
            mb_values[step] = values
            mb_neglogpacs[step] = neglogpacs
            mb_dones[step] = self.dones
            clipped_actions = np.clip(actions, self.env.action_space.low, self.env.action_space.high) if is_box \
                else actions
            obs, rewards, self.dones, infos = self.env.step(clipped_actions)
            self.obs[:] = obs
            if not self._on_env_step(locals(), infos, ep_infos):
                return [None] * 9
            mb_true_rewards[step] = rewards
            mb_rewards[step] = self._bootstrap_truncated(rewards, self.dones, infos, self.gamma, states_before)
        last_values = policy.value(self.obs, self.states, self.dones)
        # discount/bootstrap off value fn (GAE)
        mb_advs = np.zeros_like(mb_rewards)
        last_gae_lam = 0.0
        for step in reversed(range(n_steps)):
            if step == n_steps - 1:
                nextnonterminal = 1.0 - self.dones.astype(np.float32)
                nextvalues = last_values
            else:
                nextnonterminal = 1.0 - mb_dones[step + 1].astype(np.float32)
                nextvalues = mb_values[step + 1]
            delta = mb_rewards[step] + self.gamma * nextvalues * nextnonterminal - mb_values[step]
            mb_advs[step] = last_gae_lam = delta + self.gamma * self.lam * nextnonterminal * last_gae_lam
        mb_returns = mb_advs + mb_values
        mb_obs, mb_returns, mb_dones, mb_actions, mb_values, mb_neglogpacs, true_reward = \
            map(swap_and_flatten, (mb_obs, mb_returns, mb_dones, mb_actions, mb_values, mb_neglogpacs,
                                   mb_true_rewards))
        return mb_obs, mb_returns, mb_dones, mb_actions, mb_values, mb_neglogpacs, mb_states, ep_infos, true_reward


Runner = PPO2Runner
