"""Advantage Actor Critic, stable-baselines 2.x ``A2C``: n-step returns, RMSProp (TF1 semantics),
one compiled train call per update."""
from __future__ import annotations

from typing import Dict

import numpy as np
import tensorflow as tf

from sbtf.common.base_class import SetVerbosity
from sbtf.common.compile.fast_call import TrainStep
from sbtf.common.nn.sde import OnPolicySDEMixin, mean_entropy
from sbtf.common.algo.on_policy import NStepActorCriticRLModel
from sbtf.common.optimizers import check_rms_prop_style, clip_grads, make_rmsprop
from sbtf.common.storage.rollout import RolloutBatch
from sbtf.common.runners import RolloutRunner
from sbtf.common.schedules import ProgressSchedule
from sbtf.common.algo.train_log import dump_update_log
from sbtf.common.fileio import model_schema as ms
from sbtf.common.arg_checks import check_hyperparameters


class A2C(OnPolicySDEMixin, NStepActorCriticRLModel):
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
    :param use_sde: (bool) generalized State-Dependent Exploration (gSDE, Box actions; see ``sbtf.common.nn.sde``)
    :param sde_sample_freq: (int) resample the gSDE exploration matrices every n steps (-1: only at rollout start)
    """

    _save_schema = dict(
        gamma=ms.Real(), n_steps=ms.Integer(1, ms.MAX_ROLLOUT), vf_coef=ms.Real(), ent_coef=ms.Real(),
        max_grad_norm=ms.Nullable(ms.Real()), learning_rate=ms.Schedule(), alpha=ms.Real(), momentum=ms.Real(),
        epsilon=ms.Real(), lr_schedule=ms.AnyOf(ms.Text(), ms.Schedule()), rms_prop_style=ms.Text(("tf", "torch")),
        use_sde=ms.Flag(), sde_sample_freq=ms.Integer(-1))

    def __init__(self, policy, env, gamma=0.99, n_steps=5, vf_coef=0.25, ent_coef=0.01, max_grad_norm=0.5,
                 learning_rate=7e-4, alpha=0.99, momentum=0.0, epsilon=1e-5, lr_schedule="constant", verbose=0,
                 tensorboard_log=None, _init_setup_model=True, policy_kwargs=None, full_tensorboard_log=False,
                 seed=None, n_cpu_tf_sess=None, rms_prop_style="tf", use_sde=False, sde_sample_freq=-1):
        check_hyperparameters(type(self).__name__, locals())
        self.use_sde = bool(use_sde)
        self.sde_sample_freq = int(sde_sample_freq)
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
        self._current_lr = None
        super().__init__(policy, env, n_steps=n_steps, verbose=verbose, tensorboard_log=tensorboard_log,
                         _init_setup_model=_init_setup_model, policy_kwargs=policy_kwargs,
                         full_tensorboard_log=full_tensorboard_log, seed=seed, n_cpu_tf_sess=n_cpu_tf_sess)

    def _make_runner(self) -> "A2CRunner":
        return A2CRunner(self.env, self, n_steps=self.n_steps, gamma=self.gamma)

    def setup_model(self):
        """
        Build the networks, optimizers and compiled train steps for the model's spaces (the constructor calls it
        unless ``_init_setup_model=False``; ``load`` calls it before restoring the parameters).
        """
        with SetVerbosity(self.verbose):
            self.n_batch = self.n_envs * self.n_steps
            self._setup_policy(self.n_steps, self.n_batch)
            self.optimizer = make_rmsprop(self.rms_prop_style, self._variables, decay=self.alpha,
                                          epsilon=self.epsilon, momentum=self.momentum)
            self._train_step = self._make_train_step()  # traced on the first update, not at load

    def _make_train_step(self) -> TrainStep:
        policy = self.policy_tf
        inputs = self._rollout_inputs(self.n_batch, ("returns", "values", "masks"),
                                      n_states=self.n_envs if policy.recurrent else 1)
        inputs["lr"] = tf.TensorSpec((), tf.float32)

        def train_step(obs, actions, returns, values, masks, states, lr):
            advs = returns - values
            with tf.GradientTape() as tape:
                dist, vpred = self._rollout_distribution(obs, states, masks)
                neglogpac = dist.neglogp(actions)
                entropy = mean_entropy(dist, neglogpac)  # SB3: -mean(log_prob) without closed form
                pg_loss = tf.reduce_mean(advs * neglogpac)
                vf_loss = tf.reduce_mean(tf.square(vpred - returns))
                loss = pg_loss - entropy * self.ent_coef + vf_loss * self.vf_coef
            grads = tape.gradient(loss, self._variables)
            grads, _ = clip_grads(grads, self.max_grad_norm)
            self.optimizer.apply(grads, lr)
            return {"policy_gradient_loss": pg_loss, "value_function_loss": vf_loss, "entropy": entropy}

        return TrainStep(train_step, inputs, name="a2c_train",
                         jit_compile=False)  # measured: XLA never pays for A2C (docs/benchmarks.md)

    # ------------------------------------------------------------------ the on-policy loop's parts
    def _on_learn_start(self, progress, callback) -> None:
        self.learning_rate_schedule = ProgressSchedule(self.learning_rate, self.lr_schedule)

    def _progress_remaining(self, progress) -> float:
        # SB2 advanced its Scheduler once per sample: an update used the value of its last sample
        return 1.0 - (progress.update * self.n_batch - 1.0) / progress.total_timesteps

    def train(self, batch: RolloutBatch) -> Dict[str, float]:
        """One RMSProp step on the rollout; returns the policy-gradient and value losses and the entropy."""
        self._current_lr = self.learning_rate_schedule(self._learn_progress.progress_remaining)
        out = self._train_step(obs=batch.observations, actions=batch.actions, returns=batch.returns,
                               values=batch.values, masks=batch.masks, states=self._state_input(batch.states),
                               lr=self._current_lr)
        return {name: float(value) for name, value in out.items()}

    def _tensorboard_scalars(self, batch: RolloutBatch, stats: Dict[str, float]) -> Dict[str, float]:
        return {"loss/policy_gradient_loss": stats["policy_gradient_loss"],
                "loss/value_function_loss": stats["value_function_loss"], "loss/entropy_loss": stats["entropy"],
                "input_info/learning_rate": self._current_lr,
                "input_info/discounted_rewards": float(np.mean(batch.returns)),
                "input_info/advantage": float(np.mean(batch.returns - batch.values))}

    def _tensorboard_histograms(self, batch: RolloutBatch) -> Dict[str, np.ndarray]:
        return {"input_info/discounted_rewards": batch.returns, "input_info/advantage": batch.returns - batch.values}

    def _log_update(self, batch: RolloutBatch, stats: Dict[str, float]) -> None:
        dump_update_log(self._learn_progress.update, self, self._fps_since_start(),
                        {"policy_entropy": stats["entropy"], "value_loss": stats["value_function_loss"]},
                        batch.values, batch.returns)

    def learn(self, total_timesteps, callback=None, log_interval=100, tb_log_name="A2C", reset_num_timesteps=True,
              progress_bar: bool = False):
        """Train for ``total_timesteps`` environment steps (SB2 signature and defaults; the loop is
        ``OnPolicyAlgorithm._learn``, whose docstring describes the parameters)."""
        return self._learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar)


class A2CRunner(RolloutRunner):
    """
    Collects ``n_steps`` per env and computes discounted n-step returns bootstrapped from the value of the
    last observation (SB2 ``A2CRunner``); time-limit truncations bootstrap from the terminal observation.
    ``run()`` returns a :class:`~sbtf.common.storage.rollout.RolloutBatch`.

    :param env: (VecEnv) The environment to learn from
    :param model: (A2C) The model to learn
    :param n_steps: (int) The number of steps to run for each environment
    :param gamma: (float) Discount factor
    """

    def __init__(self, env, model, n_steps=5, gamma=0.99):
        super().__init__(env=env, model=model, n_steps=n_steps, gamma=gamma)
