"""Advantage Actor Critic, stable-baselines 2.x ``A2C``: n-step returns, RMSProp (TF1 semantics),
one compiled train call per update."""
from __future__ import annotations

import time

import gymnasium as gym
import numpy as np
import tensorflow as tf

from sbtf.common.base_class import DeferredTrainFunction, NStepActorCriticRLModel, SetVerbosity
from sbtf.common.optimizers import check_rms_prop_style, clip_grads, make_rmsprop
from sbtf.common.runners import AbstractEnvRunner, swap_and_flatten
from sbtf.common.schedules import Scheduler
from sbtf.common.train_log import dump_update_log, log_rollout_episode_rewards
from sbtf.common import model_schema as ms
from sbtf.common.tf_util import xla_pays_off


class A2C(NStepActorCriticRLModel):
    """
    The A2C (Advantage Actor Critic) model class, https://arxiv.org/abs/1602.01783

    :param policy: (ActorCriticPolicy or str) The policy model to use (MlpPolicy, CnnPolicy, CnnLstmPolicy, ...)
    :param env: (Gym environment or str) The environment to learn from (if registered in Gym, can be str)
    :param gamma: (float) Discount factor
    :param n_steps: (int) The number of steps to run for each environment per update
        (i.e. batch size is n_steps * n_env where n_env is number of environment copies running in parallel)
    :param vf_coef: (float) Value function coefficient for the loss calculation
    :param ent_coef: (float) Entropy coefficient for the loss calculation
    :param max_grad_norm: (float) The maximum value for the gradient clipping
    :param learning_rate: (float) The learning rate
    :param alpha: (float)  RMSProp decay parameter (default: 0.99)
    :param momentum: (float) RMSProp momentum parameter (default: 0.0)
    :param epsilon: (float) RMSProp epsilon (stabilizes square root computation in denominator of RMSProp update)
    :param lr_schedule: (str) The type of scheduler for the learning rate update ('linear', 'constant',
        'double_linear_con', 'middle_drop' or 'double_middle_drop')
    :param verbose: (int) the verbosity level: 0 none, 1 training information, 2 tensorflow debug
    :param tensorboard_log: (str) the log location for tensorboard (if None, no logging)
    :param _init_setup_model: (bool) Whether or not to build the network at the creation of the instance
    :param policy_kwargs: (dict) additional arguments to be passed to the policy on creation
    :param full_tensorboard_log: (bool) also log histograms of returns and advantages
    :param seed: (int) Seed for the pseudo-random generators (python, numpy, tensorflow, env)
    :param n_cpu_tf_sess: (int) The number of threads for TensorFlow operations (set once per process)
    :param rms_prop_style: (str) sbtf extension: ``"tf"`` (default) is stable-baselines 2's TF1 RMSProp (mean
        square starting at 1, epsilon inside the square root); ``"torch"`` is PyTorch's RMSprop (mean square starting
        at 0, epsilon added after the square root), the optimizer of stable-baselines3's A2C
    """

    _save_schema = dict(
        gamma=ms.Real(), n_steps=ms.Integer(1, ms.MAX_ROLLOUT), vf_coef=ms.Real(), ent_coef=ms.Real(),
        max_grad_norm=ms.Nullable(ms.Real()), learning_rate=ms.Schedule(), alpha=ms.Real(), momentum=ms.Real(),
        epsilon=ms.Real(), lr_schedule=ms.AnyOf(ms.Text(), ms.Schedule()), rms_prop_style=ms.Text(("tf", "torch")))

    def __init__(self, policy, env, gamma=0.99, n_steps=5, vf_coef=0.25, ent_coef=0.01, max_grad_norm=0.5,
                 learning_rate=7e-4, alpha=0.99, momentum=0.0, epsilon=1e-5, lr_schedule="constant", verbose=0,
                 tensorboard_log=None, _init_setup_model=True, policy_kwargs=None, full_tensorboard_log=False,
                 seed=None, n_cpu_tf_sess=None, rms_prop_style="tf"):
        self.rms_prop_style = check_rms_prop_style(rms_prop_style)
        self.gamma = gamma
        self.vf_coef = vf_coef
        self.ent_coef = ent_coef
        self.max_grad_norm = max_grad_norm
        self.alpha = alpha
        self.momentum = momentum
        self.epsilon = epsilon
        self.lr_schedule = lr_schedule
        self.learning_rate = learning_rate
        self.learning_rate_schedule = None
        super().__init__(policy, env, n_steps=n_steps, verbose=verbose, tensorboard_log=tensorboard_log,
                         _init_setup_model=_init_setup_model, policy_kwargs=policy_kwargs,
                         full_tensorboard_log=full_tensorboard_log, seed=seed, n_cpu_tf_sess=n_cpu_tf_sess)

    def _make_runner(self) -> "A2CRunner":
        return A2CRunner(self.env, self, n_steps=self.n_steps, gamma=self.gamma)

    def setup_model(self):
        with SetVerbosity(self.verbose):
            self.n_batch = self.n_envs * self.n_steps
            self._setup_policy(self.n_steps, self.n_batch)
            self.optimizer = make_rmsprop(self.rms_prop_style, self._variables, decay=self.alpha,
                                          epsilon=self.epsilon, momentum=self.momentum)
            self._train_fn = DeferredTrainFunction(self)  # traced on the first update, not at load

    def _make_train_fn(self):
        policy = self.policy_tf
        pdtype = policy.pdtype
        n_batch = self.n_batch
        is_box = isinstance(self.action_space, gym.spaces.Box)
        act_dtype = tf.float32 if is_box else pdtype.sample_dtype()
        vec = tf.TensorSpec((n_batch,), tf.float32)
        state_size = policy.state_size if policy.recurrent else 1
        n_state = self.n_envs if policy.recurrent else 1
        signature = [policy.obs_signature(n_batch), tf.TensorSpec((n_batch,) + tuple(pdtype.sample_shape()), act_dtype),
                     vec, vec, vec, tf.TensorSpec((n_state, state_size), tf.float32), tf.TensorSpec((), tf.float32)]

        @tf.function(input_signature=signature, jit_compile=not policy.recurrent and xla_pays_off(policy),
                     autograph=False)
        def train_step(obs, actions, rewards, values, masks, states, lr):
            advs = rewards - values
            with tf.GradientTape() as tape:
                dist, vpred = self._rollout_distribution(obs, states, masks)
                neglogpac = dist.neglogp(actions)
                entropy = tf.reduce_mean(dist.entropy())
                pg_loss = tf.reduce_mean(advs * neglogpac)
                vf_loss = tf.reduce_mean(tf.square(vpred - rewards))
                loss = pg_loss - entropy * self.ent_coef + vf_loss * self.vf_coef
            grads = tape.gradient(loss, self._variables)
            grads, _ = clip_grads(grads, self.max_grad_norm)
            self.optimizer.apply(grads, lr)
            # the updated weights ride along, so acting needs no second TF call to refresh its NumPy copy
            return tf.concat([tf.stack([pg_loss, vf_loss, entropy]), policy.flat_weights_tf()], axis=0)

        return train_step

    def _train_step(self, obs, states, rewards, masks, actions, values, update, writer=None):
        """
        Applies a training step to the model.

        :return: (float, float, float) policy loss, value loss, policy entropy
        """
        cur_lr = None
        for _ in range(len(obs)):  # SB2 advances the schedule once per sample
            cur_lr = self.learning_rate_schedule.value()
        if states is None:
            states = np.zeros((1, 1), np.float32)
        # FastFunction gives every input its signature's dtype
        out = self._train_fn(obs, actions, rewards, values, masks, states, cur_lr).numpy()
        stats = out[:3]
        self.policy_tf.install_flat_weights(out[3:])
        if writer is not None:
            writer.add_scalars({"loss/policy_gradient_loss": stats[0], "loss/value_function_loss": stats[1],
                                "loss/entropy_loss": stats[2], "input_info/learning_rate": cur_lr,
                                "input_info/discounted_rewards": float(np.mean(rewards)),
                                "input_info/advantage": float(np.mean(rewards - values))}, self.num_timesteps)
            if self.full_tensorboard_log:
                writer.add_histogram("input_info/discounted_rewards", rewards, self.num_timesteps)
                writer.add_histogram("input_info/advantage", rewards - values, self.num_timesteps)
        return stats[0], stats[1], stats[2]

    def learn(self, total_timesteps, callback=None, log_interval=100, tb_log_name="A2C", reset_num_timesteps=True,
              progress_bar: bool = False):
        with self._learning(callback, total_timesteps, tb_log_name, reset_num_timesteps,
                            progress_bar) as (callback, writer):
            self.learning_rate_schedule = Scheduler(initial_value=self.learning_rate, n_values=total_timesteps,
                                                    schedule=self.lr_schedule)
            t_start = time.time()
            callback.on_training_start(locals(), globals())
            for update in range(1, total_timesteps // self.n_batch + 1):
                callback.on_rollout_start()
                rollout = self.runner.run(callback)
                obs, states, rewards, masks, actions, values, ep_infos, true_reward = rollout
                callback.update_locals(locals())
                callback.on_rollout_end()
                if not self.runner.continue_training:
                    break
                self.ep_info_buf.extend(ep_infos)
                _, value_loss, policy_entropy = self._train_step(obs, states, rewards, masks, actions, values,
                                                                 self.num_timesteps // self.n_batch, writer)
                fps = int((update * self.n_batch) / max(time.time() - t_start, 1e-9))
                if writer is not None:
                    log_rollout_episode_rewards(self, writer, true_reward, masks)
                if self.verbose >= 1 and (update % log_interval == 0 or update == 1):
                    dump_update_log(update, self, fps, {"policy_entropy": policy_entropy, "value_loss": value_loss},
                                    values, rewards)
        callback.on_training_end()
        return self


class A2CRunner(AbstractEnvRunner):
    """
    Collects ``n_steps`` per env and computes discounted n-step returns bootstrapped from the value of the
    last observation (SB2 ``A2CRunner``); time-limit truncations bootstrap from the terminal observation.

    :param env: (VecEnv) The environment to learn from
    :param model: (A2C) The model to learn
    :param n_steps: (int) The number of steps to run for each environment
    :param gamma: (float) Discount factor
    """

    def __init__(self, env, model, n_steps=5, gamma=0.99):
        super().__init__(env=env, model=model, n_steps=n_steps)
        self.gamma = gamma

    def _run(self):
        policy = self.model.policy_tf
        n_steps, n_envs = self.n_steps, self.n_envs
        is_box = isinstance(self.env.action_space, gym.spaces.Box)
        act_shape = tuple(policy.pdtype.sample_shape())
        mb_obs = np.zeros((n_steps, n_envs) + self.obs.shape[1:], dtype=self.obs.dtype)
        mb_rewards = np.zeros((n_steps, n_envs), dtype=np.float32)
        mb_true_rewards = np.zeros((n_steps, n_envs), dtype=np.float32)
        mb_actions = np.zeros((n_steps, n_envs) + act_shape, dtype=np.float32 if is_box else np.int64)
        mb_values = np.zeros((n_steps, n_envs), dtype=np.float32)
        mb_dones = np.zeros((n_steps + 1, n_envs), dtype=bool)
        mb_states = self.states
        ep_infos = []
        for step in range(n_steps):
            states_before = self.states
            actions, values, states = policy.act(self.obs, self.states, self.dones)
            mb_obs[step] = self.obs
            mb_actions[step] = actions
            mb_values[step] = values
            mb_dones[step] = self.dones
            clipped_actions = np.clip(actions, self.env.action_space.low, self.env.action_space.high) if is_box \
                else actions
            obs, rewards, dones, infos = self.env.step(clipped_actions)
            if not self._on_env_step(locals(), infos, ep_infos):
                return [None] * 8
            self.states = states
            self.dones = dones
            self.obs[:] = obs
            mb_true_rewards[step] = rewards
            mb_rewards[step] = self._bootstrap_truncated(rewards, dones, infos, self.gamma, states_before)
        mb_dones[n_steps] = self.dones
        mb_masks = mb_dones[:-1]
        step_dones = mb_dones[1:].astype(np.float32)
        last_values = policy.value(self.obs, self.states, self.dones)
        # discounted n-step returns: a done resets, the last step bootstraps unless done
        mb_returns = np.zeros_like(mb_rewards)
        running = last_values * (1.0 - step_dones[-1])
        for step in reversed(range(n_steps)):
            if step < n_steps - 1:
                running = running * (1.0 - step_dones[step])
            running = mb_rewards[step] + self.gamma * running
            mb_returns[step] = running
        mb_obs, mb_returns, mb_actions, mb_values, mb_masks, true_rewards = map(
            swap_and_flatten, (mb_obs, mb_returns, mb_actions, mb_values, mb_masks, mb_true_rewards))
        return mb_obs, mb_states, mb_returns, mb_masks, mb_actions, mb_values, ep_infos, true_rewards
