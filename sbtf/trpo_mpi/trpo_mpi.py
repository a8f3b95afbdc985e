"""Trust Region Policy Optimization, MPI version (stable-baselines 2.x ``TRPO``, ``trpo_mpi/trpo_mpi.py``).

Per iteration: one trajectory segment per process; the surrogate gradient ``g`` (averaged over MPI ranks); the
natural-gradient direction ``s = (F + cg_damping I)^-1 g`` by conjugate gradient on Fisher-vector products
(Hessian-vector products of the mean KL between the old and the new policy, on every 5th sample, averaged over
ranks); a step scaled to the KL radius ``max_kl`` and a backtracking line search (halving up to 10 times) that
needs an improved surrogate and a mean KL below ``1.5 * max_kl``; then ``vf_iters`` epochs of Adam (``MpiAdam``) on
the value function in minibatches of 128. GAIL (``sbtf.gail.GAIL``) is this class with ``using_gail=True``: the
reward comes from a discriminator trained after every ``g_step`` policy updates.

Speed: the surrogate and its gradient, the Fisher-vector product, each line-search evaluation and the value
function's minibatch steps are ``tf.function``\\ s with fixed input signatures (autograph off, explicit
``tf.while_loop``\\ s). The whole conjugate-gradient solve (every Fisher-vector product) and the whole value-function
fit are one compiled call each; under MPI the products and minibatch gradients are averaged over the ranks inside
those calls (``allreduce_tf``). Acting uses the policy's NumPy fast path.
"""
from __future__ import annotations

import functools
import time
from contextlib import contextmanager
from typing import Dict, Optional

import numpy as np
import tensorflow as tf

from sbtf import logger
from sbtf.common.base_class import SetVerbosity
from sbtf.common.cg import conjugate_gradient_tf
from sbtf.common.compile.fast_call import TrainStep
from sbtf.common.math_util import explained_variance
from sbtf.common.mpi_adam import MpiAdam
from sbtf.common.mpi.mpi_model import MpiActorCriticRLModel
from sbtf.common.mpi_util import allreduce_mean, allreduce_tf
from sbtf.common.storage.rollout import RolloutBatch
from sbtf.common.tf_util import (GetFlat, SetFromFlat, assign_from_flat, flat_size, flatgrad, minibatch_loop,
                                  unflatten_tensor)
from sbtf.common.compile.weight_tracking import track_writes
from sbtf.common.fileio import model_schema as ms
from sbtf.common.arg_checks import check_hyperparameters

LOSS_NAMES = ["optimgain", "meankl", "entloss", "surrgain", "entropy"]
VF_BATCH_SIZE = 128  # SB2's value-function minibatch size
FVP_SUBSAMPLE = 5  # Fisher-vector products on every 5th sample (Schulman's thesis, pp. 40-42)
LINE_SEARCH_STEPS = 10


class TRPO(MpiActorCriticRLModel):
    """
    Trust Region Policy Optimization (https://arxiv.org/abs/1502.05477)

    :param policy: (ActorCriticPolicy or str) The policy model to use (MlpPolicy, CnnPolicy, ...; not recurrent)
    :param env: (Gym environment or str) The environment to learn from (if registered in Gym, can be str); one
        environment (for parallel collection run the script under ``mpirun -np N``)
    :param gamma: (float) the discount value
    :param timesteps_per_batch: (int) the number of timesteps to run per batch (horizon), per MPI process
    :param max_kl: (float) the Kullback-Leibler loss threshold
    :param cg_iters: (int) the number of iterations for the conjugate gradient calculation
    :param lam: (float) GAE factor
    :param entcoeff: (float) the weight for the entropy loss
    :param cg_damping: (float) the compute gradient dampening factor
    :param vf_stepsize: (float) the value function stepsize
    :param vf_iters: (int) the value function's number iterations for learning
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
        gamma=ms.Real(), timesteps_per_batch=ms.Integer(1), max_kl=ms.Real(), cg_iters=ms.Integer(1), lam=ms.Real(),
        entcoeff=ms.Real(), cg_damping=ms.Real(), vf_stepsize=ms.Schedule(), vf_iters=ms.Integer(0),
        hidden_size_adversary=ms.Integer(1), adversary_entcoeff=ms.Real(), expert_dataset=ms.Opaque(),
        g_step=ms.Integer(0), d_step=ms.Integer(0), d_stepsize=ms.Real(), using_gail=ms.Flag())

    _generator_attrs = ("_shuffle_gen",)

    def __init__(self, policy, env, gamma=0.99, timesteps_per_batch=1024, max_kl=0.01, cg_iters=10, lam=0.98,
                 entcoeff=0.0, cg_damping=1e-2, vf_stepsize=3e-4, vf_iters=3, verbose=0, tensorboard_log=None,
                 _init_setup_model=True, policy_kwargs=None, full_tensorboard_log=False,
                 seed=None, n_cpu_tf_sess=1):
        check_hyperparameters(type(self).__name__, locals())
        self.using_gail = False
        self.timesteps_per_batch = timesteps_per_batch
        self.cg_iters = cg_iters
        self.cg_damping = cg_damping
        self.gamma = gamma
        self.lam = lam
        self.max_kl = max_kl
        self.vf_iters = vf_iters
        self.vf_stepsize = vf_stepsize
        self.entcoeff = entcoeff
        self.tensorboard_log = tensorboard_log
        self.full_tensorboard_log = full_tensorboard_log

        # GAIL Params
        self.hidden_size_adversary = 100
        self.adversary_entcoeff = 1e-3
        self.expert_dataset = None
        self.g_step = 1
        self.d_step = 1
        self.d_stepsize = 3e-4

        self.loss_names = list(LOSS_NAMES)
        self.reward_giver = None
        self.vfadam = None
        self.d_adam = None
        self.timed = None
        self.allmean = None
        super().__init__(policy=policy, env=env, verbose=verbose, requires_vec_env=False,
                         _init_setup_model=_init_setup_model, policy_kwargs=policy_kwargs, seed=seed,
                         n_cpu_tf_sess=n_cpu_tf_sess)
        if _init_setup_model:
            self.setup_model()

    # ------------------------------------------------------------------ setup
    def _make_reward_giver(self):
        """The discriminator whose reward the generator is trained on (``using_gail``); GAIL provides it."""
        raise ValueError("Error: using_gail=True needs the GAIL class (sbtf.gail.GAIL), which provides the "
                         "discriminator; TRPO alone trains on the env's reward.")

    def setup_model(self):
        """
        Build the networks, optimizers and compiled train steps for the model's spaces (the constructor calls it
        unless ``_init_setup_model=False``; ``load`` calls it before restoring the parameters).
        """
        with SetVerbosity(self.verbose):
            self.set_random_seed(self.seed)
            if self.using_gail:
                self.reward_giver = self._make_reward_giver()
            self._setup_policies()

            named = self.policy_pi.named_parameters()
            # SB2: the policy step moves everything but the value function (and the unused q head) ...
            self._pi_vars = [v for name, v in named.items() if "/vf" not in name and "/q/" not in name]
            # ... and the value-function fit everything but the policy head
            self._vf_vars = [v for name, v in named.items() if "/pi" not in name and "/logstd" not in name]
            self.get_flat = GetFlat(self._pi_vars)
            self.set_from_flat = SetFromFlat(self._pi_vars)
            self.vfadam = MpiAdam(self._vf_vars, comm=self.comm)
            if self.using_gail:
                self.d_adam = MpiAdam(self.reward_giver.get_trainable_variables(), comm=self.comm)
            self.params = self.get_parameter_list()
            self._shuffle_gen = self._new_generator()
            self.allmean = lambda arr: allreduce_mean(np.asarray(arr), self.comm)
            self.timed = self._timed
            self._build_functions()

    def _named_parameters(self):
        params = self.policy_pi.named_parameters()
        params.update(self.old_policy.named_parameters(prefix="oldpi/model"))
        if self.using_gail and self.reward_giver is not None:
            params.update(self.reward_giver.named_parameters())
        return params

    @contextmanager
    def _timed(self, msg: str):
        if self._log_verbose():
            print(msg)
            start_time = time.time()
            yield
            print("done in {:.3f} seconds".format(time.time() - start_time))
        else:
            yield

    # ------------------------------------------------------------------ compiled maths
    def _distributions(self, obs):
        pi, oldpi = self.policy_pi, self.old_policy
        flat, vpred, _, _ = pi.forward(obs)
        old_flat, _, _, _ = oldpi.forward(obs)
        return (pi.proba_distribution_from_flat(flat), oldpi.proba_distribution_from_flat(tf.stop_gradient(old_flat)),
                vpred)

    def _losses(self, obs, actions, atarg):
        """SB2's TRPO losses: (optimgain, [optimgain, meankl, entbonus, surrgain, meanent])."""
        dist, old_dist, _ = self._distributions(obs)
        meankl = tf.reduce_mean(old_dist.kl(dist))
        meanent = tf.reduce_mean(dist.entropy())
        entbonus = self.entcoeff * meanent
        ratio = tf.exp(old_dist.neglogp(actions) - dist.neglogp(actions))  # advantage * pnew / pold
        surrgain = tf.reduce_mean(ratio * atarg)
        optimgain = surrgain + entbonus
        return optimgain, tf.stack([optimgain, meankl, entbonus, surrgain, meanent])

    def _mean_kl(self, obs):
        dist, old_dist, _ = self._distributions(obs)
        return tf.reduce_mean(old_dist.kl(dist))

    def _fvp(self, vec, obs):
        """Fisher-vector product: the Hessian of the mean KL(old || new) times ``vec`` (no damping)."""
        variables = self._pi_vars
        tangents = unflatten_tensor(vec, variables)
        with tf.GradientTape() as outer:
            with tf.GradientTape() as inner:
                kl = self._mean_kl(obs)
            grads = inner.gradient(kl, variables)
            gvp = tf.add_n([tf.reduce_sum(g * t) for g, t in zip(grads, tangents) if g is not None])
        return flatgrad(outer.gradient(gvp, variables), variables)

    def _lossandgrad(self, obs, actions, atarg):
        with tf.GradientTape() as tape:
            optimgain, losses = self._losses(obs, actions, atarg)
        return flatgrad(tape.gradient(optimgain, self._pi_vars), self._pi_vars), losses

    def _vf_lossandgrad(self, obs, ret):
        with tf.GradientTape() as tape:
            _, vpred, _, _ = self.policy_pi.forward(obs)
            vferr = tf.reduce_mean(tf.square(vpred - ret))
        return flatgrad(tape.gradient(vferr, self._vf_vars), self._vf_vars), vferr

    def _build_functions(self) -> None:
        obs_spec = self.policy_pi.obs_signature()
        act_spec = self._action_spec()
        vec = tf.TensorSpec((None,), tf.float32)
        scalar = tf.TensorSpec((), tf.float32)
        theta = tf.TensorSpec((flat_size(self._pi_vars),), tf.float32)
        cg_iters = int(self.cg_iters)
        vf_iters = int(self.vf_iters)

        # autograph is off everywhere: the loops are explicit tf.while_loops (tracing stays short)
        compile_fn = functools.partial(tf.function, autograph=False)
        self.compute_lossandgrad = compile_fn(self._lossandgrad, input_signature=[obs_spec, act_spec, vec])
        self.compute_losses = compile_fn(lambda obs, actions, atarg: self._losses(obs, actions, atarg)[1],
                                         input_signature=[obs_spec, act_spec, vec])
        self.compute_fvp = compile_fn(self._fvp, input_signature=[theta, obs_spec])
        self.compute_vflossandgrad = compile_fn(self._vf_lossandgrad, input_signature=[obs_spec, vec])

        def set_and_compute_losses(thnew, obs, actions, atarg):
            """A line-search trial: move the policy to ``thnew`` and evaluate the losses (one call)."""
            assign_from_flat(self._pi_vars, thnew)
            return self._losses(obs, actions, atarg)[1]

        # a tracked write: each trial marks the acting copies of the policy's variables stale first
        self._set_and_compute_losses = track_writes(compile_fn(set_and_compute_losses,
                                                               input_signature=[theta, obs_spec, act_spec, vec]))

        def natural_step(grad, obs_sub, damping):
            """The whole CG solve of (F + damping I) s = g, and s^T (F + damping I) s / 2 (products averaged over
            the ranks in the graph)."""
            def f_ax(v):
                return allreduce_tf(self._fvp(v, obs_sub), self.comm) + damping * v

            stepdir = conjugate_gradient_tf(f_ax, grad, cg_iters=cg_iters)
            shs = 0.5 * tf.reduce_sum(stepdir * f_ax(stepdir))
            return stepdir, shs

        self._natural_step = compile_fn(natural_step, input_signature=[theta, obs_spec, scalar])

        def fit_vf(obs, ret, stepsize):
            """``vf_iters`` epochs of shuffled minibatch Adam steps on the value function (gradients averaged over
            the ranks in the graph)."""
            n = tf.shape(obs)[0]
            batch = tf.minimum(n, VF_BATCH_SIZE)
            n_mb = n // batch
            perms = tf.argsort(self._shuffle_gen.uniform((vf_iters, n)), axis=1)  # one permutation per epoch

            def step(k):
                start = (k % n_mb) * batch
                idx = perms[k // n_mb, start:start + batch]
                grad, _ = self._vf_lossandgrad(tf.gather(obs, idx), tf.gather(ret, idx))
                return self.vfadam.update_tf(grad, stepsize)

            minibatch_loop(vf_iters * n_mb, step)
            return {}

        self._fit_vf = TrainStep(fit_vf, {"obs": obs_spec, "ret": vec, "stepsize": scalar}, name="trpo_fit_vf")

    # ------------------------------------------------------------------ one policy + value update
    def _fisher_vector_product(self, vec: np.ndarray, fvp_obs: np.ndarray) -> np.ndarray:
        """SB2's ``fisher_vector_product``: the product averaged over the ranks, plus ``cg_damping * vec`` (NumPy)."""
        return self.allmean(self.compute_fvp(vec.astype(np.float32), fvp_obs).numpy()) + self.cg_damping * vec

    def _update_policy(self, observation, action, atarg):
        """The natural-gradient step with line search; returns the losses after the step (averaged over ranks)."""
        fvp_obs = observation[::FVP_SUBSAMPLE]
        with self.timed("computegrad"):
            grad, lossbefore = self.compute_lossandgrad(observation, action, atarg)
        lossbefore = self.allmean(lossbefore.numpy())
        grad = self.allmean(grad.numpy())
        mean_losses = lossbefore
        if np.allclose(grad, 0):
            logger.log("Got zero gradient. not updating")
            return mean_losses
        with self.timed("conjugate_gradient"):
            stepdir, shs = self._natural_step(grad.astype(np.float32), fvp_obs, np.float32(self.cg_damping))
            stepdir, shs = stepdir.numpy().astype(np.float64), float(shs.numpy())
        if not np.isfinite(stepdir).all():
            raise FloatingPointError("TRPO: the conjugate-gradient step direction is not finite (NaN/inf in the "
                                     "Fisher-vector products); check the observations and rewards for NaNs.")
        # abs(shs) to avoid taking square root of negative values
        lagrange_multiplier = np.sqrt(abs(shs) / self.max_kl)
        fullstep = stepdir / lagrange_multiplier
        expectedimprove = grad.dot(fullstep)
        surrbefore = lossbefore[0]
        stepsize = 1.0
        thbefore = self.get_flat()
        thnew = thbefore
        for _ in range(LINE_SEARCH_STEPS):
            thnew = (thbefore + fullstep * stepsize).astype(np.float32)
            mean_losses = self.allmean(self._set_and_compute_losses(thnew, observation, action, atarg).numpy())
            surr, kl_loss = mean_losses[0], mean_losses[1]
            improve = surr - surrbefore
            logger.log("Expected: %.3f Actual: %.3f" % (expectedimprove, improve))
            if not np.isfinite(mean_losses).all():
                logger.log("Got non-finite value of losses -- bad!")
            elif kl_loss > self.max_kl * 1.5:
                logger.log("violated KL constraint. shrinking step.")
            elif improve < 0:
                logger.log("surrogate didn't improve. shrinking step.")
            else:
                logger.log("Stepsize OK!")
                break
            stepsize *= .5
        else:
            logger.log("couldn't compute a good step")
            self.set_from_flat(thbefore)
        return mean_losses

    def _update_vf(self, observation, tdlamret) -> None:
        self._fit_vf(obs=observation, ret=tdlamret, stepsize=np.float32(self.vf_stepsize))

    def _update_discriminator(self, observation, action) -> list:
        """GAIL: ``d_step`` Adam steps of the discriminator on generator vs expert minibatches; returns the losses."""
        batch_size = self.timesteps_per_batch // self.d_step
        d_losses = []  # list of tuples, each of which gives the loss for a minibatch
        n = len(observation)
        perm = np.random.permutation(n)
        for start in range(0, n - batch_size + 1, batch_size):
            idx = perm[start:start + batch_size]
            ob_batch, ac_batch = observation[idx], action[idx]
            ob_expert, ac_expert = self.expert_dataset.get_next_batch()
            # update running mean/std for reward_giver
            if self.reward_giver.normalize:
                self.reward_giver.obs_rms.update(np.concatenate((ob_batch.reshape(len(ob_batch), -1),
                                                                 np.asarray(ob_expert).reshape(len(ob_expert), -1)),
                                                                0))
            *newlosses, grad = self.reward_giver.lossandgrad(ob_batch, ac_batch, ob_expert, ac_expert)
            self.reward_giver.apply_gradient(self.d_adam, grad, self.d_stepsize)
            d_losses.append(newlosses)
        return d_losses

    def _initialize_dataloader(self) -> None:
        """Initialize dataloader."""
        batchsize = self.timesteps_per_batch // self.d_step
        self.expert_dataset.init_dataloader(batchsize)

    # ------------------------------------------------------------------ the on-policy loop's parts
    _episode_window = 40

    def _horizon(self) -> int:
        return int(self.timesteps_per_batch)

    def _rollouts_per_update(self) -> int:
        return int(self.g_step)  # g_step = 1 when not using GAIL

    def _on_learn_start(self, progress, callback) -> None:
        super()._on_learn_start(progress, callback)
        if self.using_gail:
            self._initialize_dataloader()

    def _on_update_start(self, progress) -> None:
        super()._on_update_start(progress)
        logger.log("Optimizing Policy...")

    def _collect_rollout(self, callback) -> Optional[RolloutBatch]:
        with self.timed("sampling"):
            return super()._collect_rollout(callback)

    def train(self, batch: RolloutBatch) -> Dict[str, float]:
        """
        The natural-gradient policy step with line search, then the value-function fit; returns the policy's losses
        after the step (averaged over the ranks).
        """
        self.assign_old_eq_new()
        mean_losses = self._update_policy(batch.observations, batch.actions, self._standardize(batch.advantages))
        with self.timed("vf"):
            self._update_vf(batch.observations, batch.returns)
        self._check_sync_every(20)
        return dict(zip(self.loss_names, (float(value) for value in mean_losses)))

    def _after_rollouts(self, batch: RolloutBatch, stats: Dict[str, float]) -> Dict[str, float]:
        d_stats = {}
        if self.using_gail:
            # ------------------ Update D ------------------
            logger.log("Optimizing Discriminator...")
            d_losses = self._update_discriminator(batch.observations, batch.actions)
            if d_losses:
                d_stats = {"d_" + name: float(value)
                           for name, value in zip(self.reward_giver.loss_name, np.mean(d_losses, axis=0))}
        return {**d_stats, **super()._after_rollouts(batch, stats)}

    def _tensorboard_scalars(self, batch: RolloutBatch, stats: Dict[str, float]) -> Dict[str, float]:
        return self._mpi_tensorboard_scalars(batch, stats, float(self.vf_stepsize),
                                             {"input_info/kl_clip_range": float(self.max_kl)})

    def _log_update(self, batch: RolloutBatch, stats: Dict[str, float]) -> None:
        for name in self.loss_names:
            logger.record_tabular(name, stats[name])
        logger.record_tabular("explained_variance_tdlam_before", explained_variance(batch.values, batch.returns))
        for name, value in stats.items():
            if name.startswith("d_"):
                logger.record_tabular(name, value)
        self._dump_iteration_log()

    def learn(self, total_timesteps, callback=None, log_interval=100, tb_log_name="TRPO", reset_num_timesteps=True,
              progress_bar: bool = False):
        """Train for ``total_timesteps`` environment steps, summed over the MPI ranks (SB2 signature; the loop is
        ``OnPolicyAlgorithm._learn``, whose docstring describes the parameters; ``log_interval`` is unused, as SB2)."""
        if self.using_gail and self.expert_dataset is None:
            raise ValueError("Error: GAIL learns from expert demonstrations: pass expert_dataset=ExpertDataset(...) "
                             "to the constructor (or to GAIL.load(..., expert_dataset=...)) before calling learn().")
        return self._learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar)


__all__ = ["TRPO"]
