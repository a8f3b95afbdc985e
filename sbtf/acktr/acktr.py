"""Actor Critic using Kronecker-Factored Trust Region, stable-baselines 2.x ``ACKTR``.

A2C's loss (or GAE advantages with ``gae_lambda``) optimised with K-FAC (``sbtf.acktr.kfac``): the Fisher
blocks of the policy and value layers come from a sampled Fisher loss (log-likelihood of the sampled actions,
plus a Gaussian-noise regression of the value output weighted by ``vf_fisher_coef``). One compiled call per
update computes the losses, the gradients, the Kronecker statistics, the eigen-decomposition when due and
the preconditioned, KL-clipped momentum step.
"""
from __future__ import annotations

import time

import gymnasium as gym
import numpy as np
import tensorflow as tf

from sbtf.acktr.kfac import KfacOptimizer, factored_layers
from sbtf.common.base_class import DeferredTrainFunction, NStepActorCriticRLModel, SetVerbosity
from sbtf.common.schedules import Scheduler
from sbtf.common.train_log import dump_update_log, log_rollout_episode_rewards
from sbtf.common import model_schema as ms

#: names of the values returned by the train step, in order
TRAIN_STATS = ("policy_loss", "value_loss", "policy_entropy", "policy_fisher_loss", "value_fisher_loss",
               "kfac_warm", "kfac_vFv")


class ACKTR(NStepActorCriticRLModel):
    """
    The ACKTR (Actor Critic using Kronecker-Factored Trust Region) model class, https://arxiv.org/abs/1708.05144

    :param policy: (ActorCriticPolicy or str) The policy model to use (MlpPolicy, CnnPolicy, CnnLstmPolicy, ...)
    :param env: (Gym environment or str) The environment to learn from (if registered in Gym, can be str)
    :param gamma: (float) Discount factor
    :param nprocs: (int) The number of threads for TensorFlow operations (deprecated: use ``n_cpu_tf_sess``)
    :param n_steps: (int) The number of steps to run for each environment
    :param ent_coef: (float) The weight for the entropy loss
    :param vf_coef: (float) The weight for the loss on the value function
    :param vf_fisher_coef: (float) The weight for the fisher loss on the value function
    :param learning_rate: (float) The initial learning rate of the K-FAC optimizer
    :param max_grad_norm: (float) The clipping value for the maximum gradient (cold-start steps)
    :param kfac_clip: (float) gradient clipping for Kullback-Leibler
    :param lr_schedule: (str) The type of scheduler for the learning rate update ('linear', 'constant',
        'double_linear_con', 'middle_drop' or 'double_middle_drop')
    :param verbose: (int) the verbosity level: 0 none, 1 training information, 2 tensorflow debug
    :param tensorboard_log: (str) the log location for tensorboard (if None, no logging)
    :param _init_setup_model: (bool) Whether or not to build the network at the creation of the instance
    :param async_eigen_decomp: (bool) accepted for SB2 compatibility; the eigen-decomposition is computed
        synchronously in the train step (see ``sbtf.acktr.kfac``)
    :param kfac_update: (int) update kfac after kfac_update steps
    :param gae_lambda: (float) Factor for trade-off of bias vs variance for Generalized Advantage Estimator.
        If None (default), then the classic advantage will be used instead of GAE
    :param policy_kwargs: (dict) additional arguments to be passed to the policy on creation
    :param full_tensorboard_log: (bool) also log histograms of returns and advantages
    :param seed: (int) Seed for the pseudo-random generators (python, numpy, tensorflow, env)
    :param n_cpu_tf_sess: (int) The number of threads for TensorFlow operations (set once per process)
    """

    _save_schema = dict(
        gamma=ms.Real(), gae_lambda=ms.Nullable(ms.Real()), n_steps=ms.Integer(1, ms.MAX_ROLLOUT), vf_coef=ms.Real(), ent_coef=ms.Real(),
        vf_fisher_coef=ms.Real(), max_grad_norm=ms.Nullable(ms.Real()), learning_rate=ms.Schedule(),
        kfac_clip=ms.Real(), lr_schedule=ms.AnyOf(ms.Text(), ms.Schedule()), kfac_update=ms.Integer(1),
        async_eigen_decomp=ms.Flag())

    def __init__(self, policy, env, gamma=0.99, nprocs=None, n_steps=20, ent_coef=0.01, vf_coef=0.25,
                 vf_fisher_coef=1.0, learning_rate=0.25, max_grad_norm=0.5, kfac_clip=0.001, lr_schedule="linear",
                 verbose=0, tensorboard_log=None, _init_setup_model=True, async_eigen_decomp=False, kfac_update=1,
                 gae_lambda=None, policy_kwargs=None, full_tensorboard_log=False, seed=None, n_cpu_tf_sess=1):
        n_cpu_tf_sess = self._renamed_n_cpu("nprocs", nprocs, n_cpu_tf_sess)
        self.gamma = gamma
        self.ent_coef = ent_coef
        self.vf_coef = vf_coef
        self.vf_fisher_coef = vf_fisher_coef
        self.kfac_clip = kfac_clip
        self.max_grad_norm = max_grad_norm
        self.learning_rate = learning_rate
        self.lr_schedule = lr_schedule
        self.async_eigen_decomp = async_eigen_decomp
        self.kfac_update = kfac_update
        self.gae_lambda = gae_lambda
        self.learning_rate_schedule = None
        self.optim = None
        self.continuous_actions = False
        self._act_dtype = None
        self._fisher_gen = None
        super().__init__(policy, env, n_steps=n_steps, verbose=verbose, tensorboard_log=tensorboard_log,
                         _init_setup_model=_init_setup_model, policy_kwargs=policy_kwargs,
                         full_tensorboard_log=full_tensorboard_log, seed=seed, n_cpu_tf_sess=n_cpu_tf_sess)

    # ------------------------------------------------------------------ setup
    def _make_runner(self):
        if self.gae_lambda is not None:
            from sbtf.ppo2.ppo2 import PPO2Runner
            return PPO2Runner(env=self.env, model=self, n_steps=self.n_steps, gamma=self.gamma, lam=self.gae_lambda)
        from sbtf.a2c.a2c import A2CRunner
        return A2CRunner(self.env, self, n_steps=self.n_steps, gamma=self.gamma)

    def setup_model(self):
        with SetVerbosity(self.verbose):
            self.continuous_actions = isinstance(self.action_space, gym.spaces.Box)
            self.n_batch = self.n_envs * self.n_steps
            policy = self._setup_policy(self.n_steps, self.n_batch)
            self.optim = KfacOptimizer(self._variables, factored_layers(policy), learning_rate=self.learning_rate,
                                       clip_kl=self.kfac_clip, momentum=0.9, kfac_update=self.kfac_update,
                                       epsilon=0.01, stats_decay=0.99, async_eigen_decomp=self.async_eigen_decomp,
                                       cold_iter=10, max_grad_norm=self.max_grad_norm, verbose=self.verbose)
            self._fisher_gen = tf.random.Generator.from_seed(int(np.random.randint(0, 2 ** 31 - 1)))
            self._train_fn = DeferredTrainFunction(self)  # traced on the first update, not at load

    def _reseed_policy(self, seed: int) -> None:
        super()._reseed_policy(seed)
        if self._fisher_gen is not None:
            self._fisher_gen.reset_from_seed(seed)

    # ------------------------------------------------------------------ train step
    def _build_train_fn(self) -> None:
        """Trace the train step once; hot calls go through its concrete function (``_train_step`` casts the inputs
        to the signature's dtypes itself)."""
        self._train_tf = self._make_train_fn()
        self._train_fn = self._train_tf.get_concrete_function()

    def _make_train_fn(self):
        policy = self.policy_tf
        pdtype = policy.pdtype
        n_batch = self.n_batch
        act_dtype = tf.float32 if isinstance(self.action_space, gym.spaces.Box) else pdtype.sample_dtype()
        self._act_dtype = tf.as_dtype(act_dtype).as_numpy_dtype
        vec = tf.TensorSpec((n_batch,), tf.float32)
        state_size = policy.state_size if policy.recurrent else 1
        n_state = self.n_envs if policy.recurrent else 1
        signature = [policy.obs_signature(n_batch),
                     tf.TensorSpec((n_batch,) + tuple(pdtype.sample_shape()), act_dtype), vec, vec, vec,
                     tf.TensorSpec((n_state, state_size), tf.float32), tf.TensorSpec((), tf.float32)]
        optim = self.optim
        variables = self._variables

        @tf.function(input_signature=signature, autograph=False)
        def train_step(obs, actions, advs, returns, masks, states, lr):
            with optim.record() as recorder, tf.GradientTape(persistent=True) as tape:
                dist, vpred = self._rollout_distribution(obs, states, masks)
                neg_log_prob = dist.neglogp(actions)
                entropy = tf.reduce_mean(dist.entropy())
                pg_loss = tf.reduce_mean(advs * neg_log_prob) - self.ent_coef * entropy
                vf_loss = tf.reduce_mean(tf.square(vpred - returns))
                train_loss = pg_loss + self.vf_coef * vf_loss
                # sampled Fisher loss: log-likelihood of the (policy-sampled) actions and a Gaussian around V
                pg_fisher_loss = -tf.reduce_mean(neg_log_prob)
                sample_net = vpred + self._fisher_gen.normal(tf.shape(vpred))
                vf_fisher_loss = -self.vf_fisher_coef * tf.reduce_mean(tf.square(vpred - tf.stop_gradient(sample_net)))
                joint_fisher_loss = pg_fisher_loss + vf_fisher_loss
            grads = tape.gradient(train_loss, variables)
            warm = optim.step(grads, joint_fisher_loss, tape, recorder, lr)
            del tape
            return tf.stack([pg_loss, vf_loss, entropy, pg_fisher_loss, vf_fisher_loss, tf.cast(warm, tf.float32),
                             optim.v_f_v])

        return train_step

    def _train_step(self, obs, states, rewards, masks, actions, values, update, writer=None):
        """
        Applies a training step to the model.

        :return: (float, float, float) policy loss, value loss, policy entropy
        """
        if len(obs) == 0:
            raise ValueError("Error: the observation input array cannot be empty")
        advs = rewards - values
        if self.continuous_actions:  # normalised advantages (as the original continuous ACKTR)
            advs = (advs - advs.mean()) / (advs.std() + 1e-8)
        current_lr = None
        for _ in range(len(obs)):  # SB2 advances the schedule once per sample
            current_lr = self.learning_rate_schedule.value()
        if states is None:
            states = np.zeros((1, 1), np.float32)
        stats = self._train_fn(obs.astype(self.policy_tf.obs_dtype, copy=False),
                               np.asarray(actions).astype(self._act_dtype, copy=False),
                               advs.astype(np.float32), rewards.astype(np.float32), masks.astype(np.float32),
                               np.asarray(states, np.float32), np.float32(current_lr)).numpy()
        self.policy_tf.mark_weights_changed()
        if writer is not None:
            step = self.num_timesteps
            writer.add_scalars({"loss/entropy_loss": stats[2], "loss/policy_gradient_loss": stats[0],
                                "loss/policy_gradient_fisher_loss": stats[3], "loss/value_function_loss": stats[1],
                                "loss/value_function_fisher_loss": stats[4],
                                "loss/loss": stats[0] + self.vf_coef * stats[1],
                                "input_info/discounted_rewards": float(np.mean(rewards)),
                                "input_info/learning_rate": current_lr,
                                "input_info/advantage": float(np.mean(advs))}, step)
            if self.full_tensorboard_log:
                writer.add_histogram("input_info/discounted_rewards", rewards, step)
                writer.add_histogram("input_info/advantage", advs, step)
                writer.add_histogram("input_info/observation", obs.astype(np.float32), step)
        return stats[0], stats[1], stats[2]

    # ------------------------------------------------------------------ learn
    def learn(self, total_timesteps, callback=None, log_interval=100, tb_log_name="ACKTR", reset_num_timesteps=True,
              progress_bar: bool = False):
        from sbtf.ppo2.ppo2 import PPO2Runner

        with self._learning(callback, total_timesteps, tb_log_name, reset_num_timesteps,
                            progress_bar) as (callback, writer):
            self.n_batch = self.n_envs * self.n_steps
            self.learning_rate_schedule = Scheduler(initial_value=self.learning_rate, n_values=total_timesteps,
                                                    schedule=self.lr_schedule)
            t_start = time.time()
            callback.on_training_start(locals(), globals())
            for update in range(1, total_timesteps // self.n_batch + 1):
                callback.on_rollout_start()
                rollout = self.runner.run(callback)
                if isinstance(self.runner, PPO2Runner):  # GAE
                    obs, returns, masks, actions, values, _, states, ep_infos, true_reward = rollout
                else:
                    obs, states, returns, masks, actions, values, ep_infos, true_reward = rollout
                callback.update_locals(locals())
                callback.on_rollout_end()
                if not self.runner.continue_training:
                    break
                self.ep_info_buf.extend(ep_infos)
                policy_loss, value_loss, policy_entropy = self._train_step(
                    obs, states, returns, masks, actions, values, self.num_timesteps // (self.n_batch + 1), writer)
                fps = int((update * self.n_batch) / max(time.time() - t_start, 1e-9))
                if writer is not None:
                    log_rollout_episode_rewards(self, writer, true_reward, masks)
                if self.verbose >= 1 and (update % log_interval == 0 or update == 1):
                    dump_update_log(update, self, fps, {"policy_entropy": policy_entropy, "policy_loss": policy_loss,
                                                        "value_loss": value_loss}, values, returns)
        callback.on_training_end()
        return self
