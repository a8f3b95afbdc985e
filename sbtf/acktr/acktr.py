"""Actor Critic using Kronecker-Factored Trust Region, stable-baselines 2.x ``ACKTR``.

A2C's loss (or GAE advantages with ``gae_lambda``) optimised with K-FAC (``sbtf.acktr.kfac``): the Fisher
blocks of the policy and value layers come from a sampled Fisher loss (log-likelihood of the sampled actions,
plus a Gaussian-noise regression of the value output weighted by ``vf_fisher_coef``). One compiled call per
update computes the losses, the gradients, the Kronecker statistics, the eigen-decomposition when due and
the preconditioned, KL-clipped momentum step.
"""
from __future__ import annotations

from typing import Dict

import gymnasium as gym
import numpy as np
import tensorflow as tf

from sbtf.acktr.kfac import KfacOptimizer, factored_layers
from sbtf.common.base_class import SetVerbosity
from sbtf.common.compile.fast_call import TrainStep
from sbtf.common.algo.on_policy import NStepActorCriticRLModel
from sbtf.common.storage.rollout import RolloutBatch
from sbtf.common.schedules import ProgressSchedule
from sbtf.common.algo.train_log import dump_update_log
from sbtf.common.fileio import model_schema as ms
from sbtf.common.arg_checks import check_hyperparameters

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

    _not_saved_arguments = {"nprocs": "stable-baselines 2's deprecated name of n_cpu_tf_sess, which is stored"}
    _save_schema = dict(
        gamma=ms.Real(), gae_lambda=ms.Nullable(ms.Real()), n_steps=ms.Integer(1, ms.MAX_ROLLOUT), vf_coef=ms.Real(),
        ent_coef=ms.Real(),
        vf_fisher_coef=ms.Real(), max_grad_norm=ms.Nullable(ms.Real()), learning_rate=ms.Schedule(),
        kfac_clip=ms.Real(), lr_schedule=ms.AnyOf(ms.Text(), ms.Schedule()), kfac_update=ms.Integer(1),
        async_eigen_decomp=ms.Flag())

    _generator_attrs = ("_fisher_gen",)

    def __init__(self, policy, env, gamma=0.99, nprocs=None, n_steps=20, ent_coef=0.01, vf_coef=0.25,
                 vf_fisher_coef=1.0, learning_rate=0.25, max_grad_norm=0.5, kfac_clip=0.001, lr_schedule="linear",
                 verbose=0, tensorboard_log=None, _init_setup_model=True, async_eigen_decomp=False, kfac_update=1,
                 gae_lambda=None, policy_kwargs=None, full_tensorboard_log=False, seed=None, n_cpu_tf_sess=1):
        check_hyperparameters(type(self).__name__, locals())
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
        self._current_lr = None
        self.optim = None
        self.continuous_actions = False
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
        """
        Build the networks, optimizers and compiled train steps for the model's spaces (the constructor calls it
        unless ``_init_setup_model=False``; ``load`` calls it before restoring the parameters).
        """
        with SetVerbosity(self.verbose):
            self.continuous_actions = isinstance(self.action_space, gym.spaces.Box)
            self.n_batch = self.n_envs * self.n_steps
            policy = self._setup_policy(self.n_steps, self.n_batch)
            self.optim = KfacOptimizer(self._variables, factored_layers(policy), learning_rate=self.learning_rate,
                                       clip_kl=self.kfac_clip, momentum=0.9, kfac_update=self.kfac_update,
                                       epsilon=0.01, stats_decay=0.99, async_eigen_decomp=self.async_eigen_decomp,
                                       cold_iter=10, max_grad_norm=self.max_grad_norm, verbose=self.verbose)
            self._fisher_gen = self._new_generator()
            self._train_step = self._make_train_step()  # traced on the first update, not at load

    # ------------------------------------------------------------------ train step
    def _make_train_step(self) -> TrainStep:
        policy = self.policy_tf
        inputs = self._rollout_inputs(self.n_batch, ("advs", "returns", "masks"),
                                      n_states=self.n_envs if policy.recurrent else 1)
        inputs["lr"] = tf.TensorSpec((), tf.float32)
        optim = self.optim
        variables = self._variables

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
            values = [pg_loss, vf_loss, entropy, pg_fisher_loss, vf_fisher_loss, tf.cast(warm, tf.float32),
                      optim.v_f_v]
            return dict(zip(TRAIN_STATS, values))

        return TrainStep(train_step, inputs, name="acktr_train")

    # ------------------------------------------------------------------ the on-policy loop's parts
    def _on_learn_start(self, progress, callback) -> None:
        self.n_batch = self.n_envs * self.n_steps
        self.learning_rate_schedule = ProgressSchedule(self.learning_rate, self.lr_schedule)

    def _progress_remaining(self, progress) -> float:
        # SB2 advanced its Scheduler once per sample: an update used the value of its last sample
        return 1.0 - (progress.update * self.n_batch - 1.0) / progress.total_timesteps

    def _advantages(self, batch: RolloutBatch) -> np.ndarray:
        advs = batch.returns - batch.values
        if self.continuous_actions:  # normalised advantages (as the original continuous ACKTR)
            advs = (advs - advs.mean()) / (advs.std() + 1e-8)
        return advs

    def train(self, batch: RolloutBatch) -> Dict[str, float]:
        """One K-FAC step on the rollout; returns the losses, the Fisher losses and the optimizer's state."""
        if len(batch) == 0:
            raise ValueError("Error: the observation input array cannot be empty")
        self._current_lr = self.learning_rate_schedule(self._learn_progress.progress_remaining)
        out = self._train_step(obs=batch.observations, actions=batch.actions, advs=self._advantages(batch),
                               returns=batch.returns, masks=batch.masks, states=self._state_input(batch.states),
                               lr=self._current_lr)
        return {name: float(value) for name, value in out.items()}

    def _tensorboard_scalars(self, batch: RolloutBatch, stats: Dict[str, float]) -> Dict[str, float]:
        return {"loss/entropy_loss": stats["policy_entropy"], "loss/policy_gradient_loss": stats["policy_loss"],
                "loss/policy_gradient_fisher_loss": stats["policy_fisher_loss"],
                "loss/value_function_loss": stats["value_loss"],
                "loss/value_function_fisher_loss": stats["value_fisher_loss"],
                "loss/loss": stats["policy_loss"] + self.vf_coef * stats["value_loss"],
                "input_info/discounted_rewards": float(np.mean(batch.returns)),
                "input_info/learning_rate": self._current_lr,
                "input_info/advantage": float(np.mean(self._advantages(batch)))}

    def _tensorboard_histograms(self, batch: RolloutBatch) -> Dict[str, np.ndarray]:
        return {"input_info/discounted_rewards": batch.returns, "input_info/advantage": self._advantages(batch),
                "input_info/observation": batch.observations.astype(np.float32)}

    def _log_update(self, batch: RolloutBatch, stats: Dict[str, float]) -> None:
        dump_update_log(self._learn_progress.update, self, self._fps_since_start(),
                        {"policy_entropy": stats["policy_entropy"], "policy_loss": stats["policy_loss"],
                         "value_loss": stats["value_loss"]}, batch.values, batch.returns)

    def learn(self, total_timesteps, callback=None, log_interval=100, tb_log_name="ACKTR", reset_num_timesteps=True,
              progress_bar: bool = False):
        """Train for ``total_timesteps`` environment steps (SB2 signature and defaults; the loop is
        ``OnPolicyAlgorithm._learn``, whose docstring describes the parameters)."""
        return self._learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar)
