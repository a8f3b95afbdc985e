"""Proximal Policy Optimization, MPI version (stable-baselines 2.x ``PPO1``, ``ppo1/pposgd_simple.py``).

One environment per process; under ``mpirun -np N`` every rank collects ``timesteps_per_actorbatch`` steps and the
minibatch gradients are averaged over the ranks by ``MpiAdam`` (see ``sbtf.common.mpi.mpi_model``). The whole
optimisation phase (``optim_epochs`` epochs of shuffled minibatches, each an Adam step) runs in one compiled call;
under MPI each minibatch gradient is averaged over the ranks inside that call (``MpiAdam.update_tf``).
"""
from __future__ import annotations

import warnings
from typing import Dict

import numpy as np
import tensorflow as tf

from sbtf import logger
from sbtf.common.base_class import SetVerbosity
from sbtf.common.compile.fast_call import TrainStep
from sbtf.common.math_util import explained_variance
from sbtf.common.mpi_adam import MpiAdam
from sbtf.common.mpi.mpi_model import MpiActorCriticRLModel
from sbtf.common.mpi_moments import mpi_moments
from sbtf.common.storage.rollout import RolloutBatch
from sbtf.common.schedules import ProgressSchedule
from sbtf.common.tf_util import flatgrad, minibatch_loop
from sbtf.common.fileio import model_schema as ms
from sbtf.common.arg_checks import check_hyperparameters

LOSS_NAMES = ["pol_surr", "pol_entpen", "vf_loss", "kl", "ent"]


class PPO1(MpiActorCriticRLModel):
    """
    Proximal Policy Optimization algorithm (MPI version).
    Paper: https://arxiv.org/abs/1707.06347

    :param policy: (ActorCriticPolicy or str) The policy model to use (MlpPolicy, CnnPolicy, ...; not recurrent)
    :param env: (Gym environment or str) The environment to learn from (if registered in Gym, can be str); one
        environment (for parallel collection run the script under ``mpirun -np N``)
    :param gamma: (float) discount factor
    :param timesteps_per_actorbatch: (int) timesteps per actor per update
    :param clip_param: (float) clipping parameter epsilon
    :param entcoeff: (float) the entropy loss weight
    :param optim_epochs: (float) the optimizer's number of epochs
    :param optim_stepsize: (float) the optimizer's stepsize
    :param optim_batchsize: (int) the optimizer's the batch size (at most ``timesteps_per_actorbatch``)
    :param lam: (float) advantage estimation
    :param adam_epsilon: (float) the epsilon value for the adam optimizer
    :param schedule: (str) The type of scheduler for the learning rate and clip range update: 'linear' (to 0 at
        ``total_timesteps``) or 'constant'
    :param verbose: (int) the verbosity level: 0 none, 1 training information, 2 tensorflow debug
    :param tensorboard_log: (str) the log location for tensorboard (if None, no logging; rank 0 only)
    :param _init_setup_model: (bool) Whether or not to build the network at the creation of the instance
    :param policy_kwargs: (dict) additional arguments to be passed to the policy on creation
    :param full_tensorboard_log: (bool) also log histograms of returns, advantages and observations
    :param seed: (int) Seed for the pseudo-random generators (python, numpy, tensorflow, env); MPI rank ``r`` uses
        ``seed + 10000 * r``.
    :param n_cpu_tf_sess: (int) The number of threads for TensorFlow operations (default 1, as SB2; applied to the
        process when TensorFlow has not started yet)
    """

    _save_schema = dict(
        gamma=ms.Real(), timesteps_per_actorbatch=ms.Integer(1), clip_param=ms.Real(), entcoeff=ms.Real(),
        optim_epochs=ms.Integer(1), optim_stepsize=ms.Schedule(), optim_batchsize=ms.Integer(1), lam=ms.Real(),
        adam_epsilon=ms.Real(), schedule=ms.AnyOf(ms.Text(), ms.Schedule()))

    _generator_attrs = ("_shuffle_gen",)

    def __init__(self, policy, env, gamma=0.99, timesteps_per_actorbatch=256, clip_param=0.2, entcoeff=0.01,
                 optim_epochs=4, optim_stepsize=1e-3, optim_batchsize=64, lam=0.95, adam_epsilon=1e-5,
                 schedule='linear', verbose=0, tensorboard_log=None, _init_setup_model=True,
                 policy_kwargs=None, full_tensorboard_log=False, seed=None, n_cpu_tf_sess=1):
        check_hyperparameters(type(self).__name__, locals())
        self.gamma = gamma
        self.timesteps_per_actorbatch = timesteps_per_actorbatch
        self.clip_param = clip_param
        self.entcoeff = entcoeff
        self.optim_epochs = optim_epochs
        self.optim_stepsize = optim_stepsize
        self.optim_batchsize = optim_batchsize
        self.lam = lam
        self.adam_epsilon = adam_epsilon
        self.schedule = schedule
        self.tensorboard_log = tensorboard_log
        self.full_tensorboard_log = full_tensorboard_log
        self.loss_names = list(LOSS_NAMES)
        self.adam = None
        self._train_step = None
        super().__init__(policy=policy, env=env, verbose=verbose, requires_vec_env=False,
                         _init_setup_model=_init_setup_model, policy_kwargs=policy_kwargs, seed=seed,
                         n_cpu_tf_sess=n_cpu_tf_sess)
        if _init_setup_model:
            self.setup_model()

    # ------------------------------------------------------------------ setup
    def setup_model(self):
        """
        Build the networks, optimizers and compiled train steps for the model's spaces (the constructor calls it
        unless ``_init_setup_model=False``; ``load`` calls it before restoring the parameters).
        """
        with SetVerbosity(self.verbose):
            self.set_random_seed(self.seed)
            self._setup_policies()
            self.params = self.get_parameter_list()
            self._variables = list(self.policy_pi.named_parameters().values())
            self.adam = MpiAdam(self._variables, epsilon=self.adam_epsilon, comm=self.comm)
            self._shuffle_gen = self._new_generator()
            self._train_step = self._make_train_step()  # traced on the first update, not at load

    def _batch_size(self) -> int:
        n = int(self.timesteps_per_actorbatch)
        batch = int(self.optim_batchsize or n)
        if batch > n:
            warnings.warn(f"PPO1: optim_batchsize ({batch}) is larger than timesteps_per_actorbatch ({n}); using "
                          f"minibatches of {n}.")
            batch = n
        return batch

    def _losses(self, obs, actions, atarg, ret, lrmult):
        """SB2's PPO1 losses: (total loss, [pol_surr, pol_entpen, vf_loss, kl, ent])."""
        pi, oldpi = self.policy_pi, self.old_policy
        clip_param = self.clip_param * lrmult
        flat, vpred, _, _ = pi.forward(obs)
        old_flat, _, _, _ = oldpi.forward(obs)
        dist = pi.proba_distribution_from_flat(flat)
        old_dist = oldpi.proba_distribution_from_flat(tf.stop_gradient(old_flat))
        meankl = tf.reduce_mean(old_dist.kl(dist))
        meanent = tf.reduce_mean(dist.entropy())
        pol_entpen = (-self.entcoeff) * meanent
        ratio = tf.exp(old_dist.neglogp(actions) - dist.neglogp(actions))  # pnew / pold
        surr1 = ratio * atarg
        surr2 = tf.clip_by_value(ratio, 1.0 - clip_param, 1.0 + clip_param) * atarg
        pol_surr = -tf.reduce_mean(tf.minimum(surr1, surr2))  # PPO's pessimistic surrogate (L^CLIP)
        vf_loss = tf.reduce_mean(tf.square(vpred - ret))
        total_loss = pol_surr + pol_entpen + vf_loss
        return total_loss, tf.stack([pol_surr, pol_entpen, vf_loss, meankl, meanent])

    def _lossandgrad(self, obs, actions, atarg, ret, lrmult):
        with tf.GradientTape() as tape:
            total_loss, losses = self._losses(obs, actions, atarg, ret, lrmult)
        grads = tape.gradient(total_loss, self._variables)
        return flatgrad(grads, self._variables), losses

    def _make_train_step(self) -> TrainStep:
        batch_size = self._batch_size()
        epochs = int(self.optim_epochs)

        def _eval_losses(obs, actions, atarg, ret, lrmult, perm):
            """Losses of every full minibatch of ``perm`` (n_minibatches, 5), SB2's "Evaluating losses"."""
            n_mb = tf.shape(perm)[0] // batch_size

            def body(mb, out):
                idx = perm[mb * batch_size:(mb + 1) * batch_size]
                _, losses = self._losses(tf.gather(obs, idx), tf.gather(actions, idx), tf.gather(atarg, idx),
                                         tf.gather(ret, idx), lrmult)
                return mb + 1, out.write(mb, losses)

            _, out = tf.while_loop(lambda mb, _: mb < n_mb, body,
                                   (tf.constant(0), tf.TensorArray(tf.float32, size=n_mb, element_shape=(5,))))
            return out.stack()

        def train_epochs(obs, actions, atarg, ret, lrmult, stepsize):
            """Every epoch's shuffled minibatch Adam steps (gradients averaged over the ranks in the graph), then
            the evaluation pass, in one call."""
            n = tf.shape(obs)[0]
            n_mb = n // batch_size
            perms = tf.cast(tf.argsort(self._shuffle_gen.uniform((epochs + 1, n)), axis=1), tf.int32)

            def step(k):
                start = (k % n_mb) * batch_size
                idx = perms[k // n_mb, start:start + batch_size]
                grad, _ = self._lossandgrad(tf.gather(obs, idx), tf.gather(actions, idx), tf.gather(atarg, idx),
                                            tf.gather(ret, idx), lrmult)
                return self.adam.update_tf(grad, stepsize)

            minibatch_loop(epochs * n_mb, step)
            with tf.control_dependencies([self.adam.step_variable.read_value()]):
                return {"losses": _eval_losses(obs, actions, atarg, ret, lrmult, perms[epochs])}

        vec, scalar = tf.TensorSpec((None,), tf.float32), tf.TensorSpec((), tf.float32)
        inputs = {"obs": self.policy_pi.obs_signature(), "actions": self._action_spec(), "atarg": vec, "ret": vec,
                  "lrmult": scalar, "stepsize": scalar}
        # autograph is off: the loops are explicit tf.while_loops (tracing stays short)
        return TrainStep(train_epochs, inputs, name="ppo1_train")

    # ------------------------------------------------------------------ the on-policy loop's parts
    def _horizon(self) -> int:
        return int(self.timesteps_per_actorbatch)

    def _on_learn_start(self, progress, callback) -> None:
        super()._on_learn_start(progress, callback)
        self._lrmult_schedule = ProgressSchedule(1.0, self.schedule)

    def train(self, batch: RolloutBatch) -> Dict[str, float]:
        """
        The optimisation phase of one iteration (old policy <- policy, then the epochs of minibatch Adam steps);
        returns the evaluation pass's losses averaged over the minibatches and the ranks.
        """
        self._lrmult = lrmult = self._lrmult_schedule(self._learn_progress.progress_remaining)
        self.assign_old_eq_new()  # set old parameter values to new parameter values
        logger.log("Optimizing...")
        out = self._train_step(obs=batch.observations, actions=batch.actions,
                               atarg=self._standardize(batch.advantages), ret=batch.returns,
                               lrmult=np.float32(lrmult), stepsize=np.float32(self.optim_stepsize * lrmult))
        logger.log("Evaluating losses...")
        mean_losses, _, _ = mpi_moments(out["losses"], axis=0, comm=self.comm)
        self._check_sync_every(20)
        return dict(zip(self.loss_names, (float(value) for value in mean_losses)))

    def _tensorboard_scalars(self, batch: RolloutBatch, stats: Dict[str, float]) -> Dict[str, float]:
        return self._mpi_tensorboard_scalars(batch, stats, float(self.optim_stepsize * self._lrmult),
                                             {"input_info/clip_range": float(self.clip_param * self._lrmult)})

    def _log_update(self, batch: RolloutBatch, stats: Dict[str, float]) -> None:
        for name in self.loss_names:
            logger.record_tabular("loss_" + name, stats[name])
        logger.record_tabular("ev_tdlam_before", explained_variance(batch.values, batch.returns))
        self._dump_iteration_log()

    def learn(self, total_timesteps, callback=None, log_interval=100, tb_log_name="PPO1", reset_num_timesteps=True,
              progress_bar: bool = False):
        """Train for ``total_timesteps`` environment steps, summed over the MPI ranks (SB2 signature; the loop is
        ``OnPolicyAlgorithm._learn``, whose docstring describes the parameters; ``log_interval`` is unused, as SB2)."""
        if self.schedule not in ("linear", "constant"):
            raise ValueError(f"Error: PPO1 schedule must be 'linear' or 'constant', got {self.schedule!r}")
        return self._learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar)


__all__ = ["PPO1"]
