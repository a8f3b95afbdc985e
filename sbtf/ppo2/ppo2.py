"""Proximal Policy Optimization (GPU/vectorised version), stable-baselines 2.x ``PPO2``.

The whole optimisation phase of one update (``noptepochs`` epochs of ``nminibatches`` shuffled
minibatches, each an Adam step on the clipped surrogate) runs inside one ``tf.function`` call
for feed-forward policies; recurrent policies run one compiled call per minibatch of whole
environment sequences, as SB2 does.
"""
from __future__ import annotations

import time
import warnings
from typing import Dict

import numpy as np
import tensorflow as tf

from sbtf import logger
from sbtf.common.base_class import SetVerbosity
from sbtf.common.compile.fast_call import TrainStep
from sbtf.common.math_util import explained_variance
from sbtf.common.nn.sde import OnPolicySDEMixin, mean_entropy
from sbtf.common.algo.on_policy import NStepActorCriticRLModel
from sbtf.common.optimizers import Adam, clip_grads
from sbtf.common.storage.rollout import RolloutBatch
from sbtf.common.runners import RolloutRunner
from sbtf.common.schedules import get_schedule_fn
from sbtf.common.algo.train_log import record_episode_means
from sbtf.common.fileio import model_schema as ms
from sbtf.common.tf_util import xla_pays_off
from sbtf.common.arg_checks import check_hyperparameters

LOSS_NAMES = ["policy_loss", "value_loss", "policy_entropy", "approxkl", "clipfrac"]


class PPO2(OnPolicySDEMixin, NStepActorCriticRLModel):
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
    :param use_sde: (bool) generalized State-Dependent Exploration (gSDE, Box actions; see ``sbtf.common.nn.sde``)
    :param sde_sample_freq: (int) resample the gSDE exploration matrices every n steps (-1: only at rollout start)
    """

    _save_schema = dict(
        gamma=ms.Real(), n_steps=ms.Integer(1, ms.MAX_ROLLOUT), vf_coef=ms.Real(), ent_coef=ms.Real(),
        max_grad_norm=ms.Nullable(ms.Real()), learning_rate=ms.Schedule(), lam=ms.Real(), nminibatches=ms.Integer(1),
        noptepochs=ms.Integer(1), cliprange=ms.Schedule(), cliprange_vf=ms.Nullable(ms.Schedule()),
        use_sde=ms.Flag(), sde_sample_freq=ms.Integer(-1))

    _generator_attrs = ("_shuffle_gen",)

    def __init__(self, policy, env, gamma=0.99, n_steps=128, ent_coef=0.01, learning_rate=2.5e-4, vf_coef=0.5,
                 max_grad_norm=0.5, lam=0.95, nminibatches=4, noptepochs=4, cliprange=0.2, cliprange_vf=None,
                 verbose=0, tensorboard_log=None, _init_setup_model=True, policy_kwargs=None,
                 full_tensorboard_log=False, seed=None, n_cpu_tf_sess=None, use_sde=False, sde_sample_freq=-1):
        check_hyperparameters(type(self).__name__, locals())
        self.use_sde = bool(use_sde)
        self.sde_sample_freq = int(sde_sample_freq)
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
        self._current_lr = self._current_cliprange = None
        super().__init__(policy, env, n_steps=n_steps, verbose=verbose, tensorboard_log=tensorboard_log,
                         _init_setup_model=_init_setup_model, policy_kwargs=policy_kwargs,
                         full_tensorboard_log=full_tensorboard_log, seed=seed, n_cpu_tf_sess=n_cpu_tf_sess)

    # ------------------------------------------------------------------ setup
    def _make_runner(self) -> "PPO2Runner":
        return PPO2Runner(env=self.env, model=self, n_steps=self.n_steps, gamma=self.gamma, lam=self.lam)

    def setup_model(self):
        """
        Build the networks, optimizers and compiled train steps for the model's spaces (the constructor calls it
        unless ``_init_setup_model=False``; ``load`` calls it before restoring the parameters).
        """
        with SetVerbosity(self.verbose):
            self.n_batch = self.n_envs * self.n_steps
            recurrent = bool(getattr(self.policy_class, "recurrent", False))
            if recurrent and self.n_envs % self.nminibatches != 0:
                raise ValueError("For recurrent policies, the number of environments run in parallel should be a "
                                 f"multiple of nminibatches (n_envs={self.n_envs}, nminibatches={self.nminibatches}).")
            if self.n_batch % self.nminibatches != 0:
                warnings.warn("In PPO2, the number of samples per update (n_envs * n_steps = "
                              f"{self.n_batch}) is not a multiple of nminibatches ({self.nminibatches}); "
                              f"{self.n_batch % self.nminibatches} samples per epoch are left out.")
            self._setup_policy(1, None)
            self.optimizer = Adam(self._variables, epsilon=1e-5)
            self._shuffle_gen = self._new_generator()
            self._train_step = self._make_train_step()  # traced on the first update, not at load

    # ------------------------------------------------------------------ losses
    def _minibatch_loss(self, obs, returns, masks, actions, values, neglogpacs, states, cliprange, cliprange_vf,
                        n_steps: int):
        policy = self.policy_tf
        advs = returns - values
        advs = (advs - tf.reduce_mean(advs)) / (tf.math.reduce_std(advs) + 1e-8)
        flat, vpred, _, _ = policy.forward(obs, states, masks, n_steps=n_steps)
        dist = policy.proba_distribution_from_flat(flat)
        neglogpac = dist.neglogp(actions)
        entropy = mean_entropy(dist, neglogpac)  # SB3: -mean(log_prob) without closed form
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

    def _make_train_step(self) -> TrainStep:
        policy = self.policy_tf
        scalar = tf.TensorSpec((), tf.float32)
        schedules = {"lr": scalar, "cliprange": scalar, "cliprange_vf": scalar}

        if policy.recurrent:
            envs_per_batch = self.n_envs // self.nminibatches
            n_mb = envs_per_batch * self.n_steps
            inputs = {**self._rollout_inputs(n_mb, ("returns", "masks", "values", "neglogpacs"),
                                             n_states=envs_per_batch), **schedules}

            def train_minibatch(obs, returns, masks, actions, values, neglogpacs, states, lr, cliprange,
                                cliprange_vf):
                stats = self._apply_minibatch(obs, returns, masks, actions, values, neglogpacs, states, lr, cliprange,
                                              cliprange_vf, self.n_steps)
                return dict(zip(LOSS_NAMES, tf.unstack(stats)))

            return TrainStep(train_minibatch, inputs, name="ppo2_train_minibatch")

        n_batch = self.n_batch
        nminibatches = int(self.nminibatches)
        batch_size = n_batch // nminibatches
        noptepochs = int(self.noptepochs)
        inputs = {**self._rollout_inputs(n_batch, ("returns", "values", "neglogpacs")), **schedules}

        def train_epochs(obs, returns, actions, values, neglogpacs, lr, cliprange, cliprange_vf):
            """Every epoch's shuffled minibatch Adam steps, in one call; the mean statistics over the minibatches.
            With one minibatch an epoch is one step on the whole rollout (its loss is a mean: no shuffle needed).
            The loops are explicit ``tf.while_loop``\\ s (no autograph: tracing stays short)."""
            def whole_batch_epoch(index, stats):
                return index + 1, stats + self._apply_minibatch(obs, returns, None, actions, values, neglogpacs,
                                                                None, lr, cliprange, cliprange_vf, 1)

            def epoch(index, stats):
                perm = tf.argsort(self._shuffle_gen.uniform((n_batch,)))
                s_obs, s_returns, s_actions, s_values, s_neglogpacs = (
                    tf.gather(x, perm) for x in (obs, returns, actions, values, neglogpacs))

                def minibatch(mb, stats):
                    start = mb * batch_size

                    def take(x):
                        return tf.slice(x, tf.concat([[start], tf.zeros(len(x.shape) - 1, tf.int32)], 0),
                                        [batch_size] + list(x.shape[1:]))

                    return mb + 1, stats + self._apply_minibatch(
                        take(s_obs), take(s_returns), None, take(s_actions), take(s_values), take(s_neglogpacs),
                        None, lr, cliprange, cliprange_vf, 1)

                _, stats = tf.while_loop(lambda mb, _: mb < nminibatches, minibatch, (tf.constant(0), stats))
                return index + 1, stats

            _, stats = tf.while_loop(lambda index, _: index < noptepochs,
                                     whole_batch_epoch if nminibatches == 1 else epoch,
                                     (tf.constant(0), tf.zeros((len(LOSS_NAMES),), tf.float32)))
            return dict(zip(LOSS_NAMES, tf.unstack(stats / float(noptepochs * nminibatches))))

        return TrainStep(train_epochs, inputs, networks=(policy,), name="ppo2_train_epochs",
                         jit_compile=xla_pays_off(policy))

    # ------------------------------------------------------------------ the on-policy loop's parts
    def _gradient_steps_per_update(self) -> int:
        return int(self.noptepochs) * int(self.nminibatches)

    def _on_learn_start(self, progress, callback) -> None:
        self._lr_fn = get_schedule_fn(self.learning_rate)
        self._cliprange_fn = get_schedule_fn(self.cliprange)
        mode = self._clip_vf_mode()
        self._cliprange_vf_fn = get_schedule_fn(self.cliprange_vf) if mode == "own" else self._cliprange_fn

    def train(self, batch: RolloutBatch) -> Dict[str, float]:
        """``noptepochs`` epochs of minibatch Adam steps on the clipped surrogate; returns the mean statistics."""
        frac = self._learn_progress.progress_remaining
        self._current_lr, self._current_cliprange = self._lr_fn(frac), self._cliprange_fn(frac)
        schedules = dict(lr=self._current_lr, cliprange=self._current_cliprange,
                         cliprange_vf=self._cliprange_vf_fn(frac))
        if not self.policy_tf.recurrent:
            out = self._train_step(obs=batch.observations, returns=batch.returns, actions=batch.actions,
                                   values=batch.values, neglogpacs=batch.neg_log_probs, **schedules)
            return {name: float(out[name]) for name in LOSS_NAMES}
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
                out = self._train_step(obs=batch.observations[mb_flat], returns=batch.returns[mb_flat],
                                       masks=batch.masks[mb_flat], actions=batch.actions[mb_flat],
                                       values=batch.values[mb_flat], neglogpacs=batch.neg_log_probs[mb_flat],
                                       states=batch.states[mb_env_inds], **schedules)
                stats += np.array([out[name] for name in LOSS_NAMES], np.float32)
                count += 1
        stats /= max(count, 1)
        return {name: float(value) for name, value in zip(LOSS_NAMES, stats)}

    def _tensorboard_scalars(self, batch: RolloutBatch, stats: Dict[str, float]) -> Dict[str, float]:
        return {**{f"loss/{name}": stats[name] for name in LOSS_NAMES},
                "input_info/learning_rate": self._current_lr, "input_info/clip_range": self._current_cliprange,
                "input_info/discounted_rewards": float(np.mean(batch.returns))}

    def _tensorboard_histograms(self, batch: RolloutBatch) -> Dict[str, np.ndarray]:
        return {"input_info/discounted_rewards": batch.returns, "input_info/advantage": batch.returns - batch.values}

    def _log_update(self, batch: RolloutBatch, stats: Dict[str, float]) -> None:
        progress = self._learn_progress
        fps = int(self.n_batch / max(time.time() - progress.t_update_start, 1e-9))
        logger.logkv("serial_timesteps", progress.update * self.n_steps)
        logger.logkv("n_updates", progress.update)
        logger.logkv("total_timesteps", self.num_timesteps)
        logger.logkv("fps", fps)
        logger.logkv("explained_variance", float(explained_variance(batch.values, batch.returns)))
        record_episode_means(self.ep_info_buf)
        logger.logkv("time_elapsed", progress.t_update_start - progress.t_start)
        for name in LOSS_NAMES:
            logger.logkv(name, float(stats[name]))
        logger.dumpkvs()

    def learn(self, total_timesteps, callback=None, log_interval=1, tb_log_name="PPO2", reset_num_timesteps=True,
              progress_bar: bool = False):
        """Train for ``total_timesteps`` environment steps (SB2 signature and defaults; the loop is
        ``OnPolicyAlgorithm._learn``, whose docstring describes the parameters)."""
        return self._learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar)


class PPO2Runner(RolloutRunner):
    """
    Collects ``n_steps`` per env and computes GAE(lambda) returns (SB2 ``ppo2.Runner``), bootstrapping
    time-limit truncations from the value of the terminal observation. ``run()`` returns a
    :class:`~sbtf.common.storage.rollout.RolloutBatch`.

    :param env: (VecEnv) The environment to learn from
    :param model: (PPO2) The model to learn
    :param n_steps: (int) The number of steps to run for each environment
    :param gamma: (float) Discount factor
    :param lam: (float) Factor for trade-off of bias vs variance for Generalized Advantage Estimator
    """

    def __init__(self, *, env, model, n_steps, gamma, lam):
        super().__init__(env=env, model=model, n_steps=n_steps, gamma=gamma, lam=lam, with_neg_log_probs=True)


Runner = PPO2Runner
