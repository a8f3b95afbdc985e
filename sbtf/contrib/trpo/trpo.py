"""Trust Region Policy Optimization with sb3-contrib's arguments (``sb3_contrib.TRPO``) on sbtf's core.

One update: the policy objective's gradient ``g``, the natural direction ``s = (F + cg_damping I)^-1 g`` by conjugate
gradient on Fisher-vector products (:func:`sbtf.common.cg.conjugate_gradient_tf` and
:func:`sbtf.common.nn.fisher.hessian_vector_product`, the code SB2's ``TRPO`` uses), the largest step
``sqrt(2 target_kl / s^T F s)`` shrunk by ``line_search_shrinking_factor`` until ``KL(new || old) < target_kl`` and the
objective improved (at most ``line_search_max_iter`` trials) -- all of it in one compiled call; then
``n_critic_updates`` epochs of Adam minibatch steps on the value function (a second compiled call).

stable-baselines 2's ``TRPO`` (``sbtf.TRPO``, MPI, ``timesteps_per_batch``/``max_kl``) is a different class and stays
as it is; this one is ``sbtf.contrib.TRPO``.
"""
from __future__ import annotations

from typing import Dict, Optional

import gymnasium as gym
import numpy as np
import tensorflow as tf

from sbtf.common.fileio import model_schema as ms
from sbtf.common.base_class import SetVerbosity
from sbtf.common.cg import conjugate_gradient_tf
from sbtf.common.compile.fast_call import TrainStep
from sbtf.common.nn.fisher import hessian_vector_product
from sbtf.common.optimizers import Adam
from sbtf.common.policies import ActorCriticPolicy
from sbtf.common.runners import RolloutRunner
from sbtf.common.schedules import get_schedule_fn
from sbtf.common.nn.sde import OnPolicySDEMixin, SquashedSDEDistribution
from sbtf.common.tf_util import assign_from_flat, flatgrad, flatten_tensors
from sbtf.sb3.common.on_policy_algorithm import Sb3OnPolicyAlgorithm, warn_truncated_minibatch
from sbtf.common.arg_checks import check_hyperparameters

__all__ = ["TRPO", "sb3_policy_kwargs_to_sb2"]

POLICY_STATS = ("policy_objective", "kl_divergence_loss", "is_line_search_success")


def sb3_policy_kwargs_to_sb2(policy_kwargs: Optional[dict]) -> dict:
    """
    sb3's actor-critic ``policy_kwargs`` as the keywords of sbtf's ``FeedForwardPolicy``: ``net_arch=[64, 64]``
    (separate policy and value networks of those sizes, sb3 >= 1.8) or ``dict(pi=..., vf=...)`` becomes
    ``[dict(pi=..., vf=...)]``; ``activation_fn`` becomes ``act_fun``. SB2 forms (``net_arch=[..., dict(...)]``,
    ``act_fun``, ``layers``) pass through.
    """
    kwargs = dict(policy_kwargs or {})
    net_arch = kwargs.get("net_arch")
    if isinstance(net_arch, dict):
        kwargs["net_arch"] = [dict(pi=list(net_arch.get("pi", [])), vf=list(net_arch.get("vf", [])))]
    elif isinstance(net_arch, (list, tuple)) and all(isinstance(s, (int, np.integer)) for s in net_arch):
        kwargs["net_arch"] = [dict(pi=list(net_arch), vf=list(net_arch))]
    if "activation_fn" in kwargs:
        kwargs["act_fun"] = kwargs.pop("activation_fn")
    if kwargs.pop("ortho_init", True) is not True:
        raise ValueError("ortho_init=False is not available in sbtf: its layers are initialised orthogonally")
    return kwargs


class TRPO(OnPolicySDEMixin, Sb3OnPolicyAlgorithm):
    """
    Trust Region Policy Optimization (TRPO), sb3-contrib's arguments and defaults.

    Paper: https://arxiv.org/abs/1502.05477

    :param policy: (str or class) ``"MlpPolicy"``, ``"CnnPolicy"``, ``"MultiInputPolicy"`` or an
        ``ActorCriticPolicy`` subclass
    :param env: (gymnasium.Env, VecEnv or str) the environment
    :param learning_rate: (float or callable) the learning rate of the value function's Adam optimiser
    :param n_steps: (int) steps per environment per update
    :param batch_size: (int) minibatch size of the value function's updates
    :param gamma: (float) discount factor
    :param cg_max_steps: (int) maximum number of conjugate-gradient iterations
    :param cg_damping: (float) damping added to the Fisher matrix (``F + cg_damping I``)
    :param line_search_shrinking_factor: (float) step-size reduction per line-search trial
    :param line_search_max_iter: (int) maximum number of line-search trials
    :param n_critic_updates: (int) epochs of value-function updates per rollout
    :param gae_lambda: (float) factor of the Generalized Advantage Estimator
    :param use_sde: (bool) generalized State-Dependent Exploration (gSDE, Box actions; :mod:`sbtf.common.nn.sde`)
    :param sde_sample_freq: (int) resample the gSDE exploration matrices every n steps (-1: only at rollout start)
    :param normalize_advantage: (bool) normalise the advantages
    :param target_kl: (float) the trust region: the largest KL divergence between the old and the new policy
    :param sub_sampling_factor: (int) use every ``sub_sampling_factor``-th sample of the rollout for the policy step
    :param stats_window_size: (int) the number of episodes the ``rollout/`` means are taken over
    :param tensorboard_log: (str) TensorBoard folder (None: none)
    :param policy_kwargs: (dict) arguments of the policy (sb3's ``net_arch``, ``activation_fn``)
    :param verbose: (int) 0 none, 1 training information
    :param seed: (int) seed of the random generators
    :param _init_setup_model: (bool) build the networks now
    """

    policy_base = ActorCriticPolicy
    _generator_attrs = ("_shuffle_gen",)
    _save_schema = dict(
        learning_rate=ms.Schedule(), n_steps=ms.Integer(1, ms.MAX_ROLLOUT), batch_size=ms.Integer(1),
        gamma=ms.Real(), cg_max_steps=ms.Integer(1), cg_damping=ms.Real(), line_search_shrinking_factor=ms.Real(),
        line_search_max_iter=ms.Integer(1), n_critic_updates=ms.Integer(0), gae_lambda=ms.Real(),
        use_sde=ms.Flag(), sde_sample_freq=ms.Integer(-1), normalize_advantage=ms.Flag(), target_kl=ms.Real(),
        sub_sampling_factor=ms.Integer(1),
        stats_window_size=ms.Integer(1))

    def __init__(self, policy, env, learning_rate=1e-3, n_steps: int = 2048, batch_size: int = 128,
                 gamma: float = 0.99, cg_max_steps: int = 15, cg_damping: float = 0.1,
                 line_search_shrinking_factor: float = 0.8, line_search_max_iter: int = 10,
                 n_critic_updates: int = 10, gae_lambda: float = 0.95, use_sde: bool = False,
                 sde_sample_freq: int = -1, normalize_advantage: bool = True,
                 target_kl: float = 0.01, sub_sampling_factor: int = 1, stats_window_size: int = 100,
                 tensorboard_log: Optional[str] = None, policy_kwargs: Optional[dict] = None, verbose: int = 0,
                 seed: Optional[int] = None, _init_setup_model: bool = True):
        check_hyperparameters(type(self).__name__, locals())
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.cg_max_steps = cg_max_steps
        self.cg_damping = cg_damping
        self.line_search_shrinking_factor = line_search_shrinking_factor
        self.line_search_max_iter = line_search_max_iter
        self.n_critic_updates = n_critic_updates
        self.normalize_advantage = normalize_advantage
        self.target_kl = target_kl
        self.sub_sampling_factor = sub_sampling_factor
        self.use_sde = bool(use_sde)
        self.sde_sample_freq = int(sde_sample_freq)
        super().__init__(policy, env, n_steps=n_steps, gamma=gamma, gae_lambda=gae_lambda,
                         stats_window_size=stats_window_size, tensorboard_log=tensorboard_log,
                         policy_kwargs=policy_kwargs, verbose=verbose, seed=seed, _init_setup_model=_init_setup_model)
        if self.env is not None:  # sb3-contrib's check, made when an env is given (construction, load with env)
            warn_truncated_minibatch(int(batch_size), int(n_steps), int(self.n_envs))

    # ------------------------------------------------------------------ files: named by the command-line name
    #: the algorithm name written in (and required of) model files: ``TRPO`` is stable-baselines 2's
    FILE_ALGO_NAME = "trpo_contrib"

    # ------------------------------------------------------------------ setup
    def _make_policy(self, n_env: int, n_steps: int, n_batch: Optional[int]) -> ActorCriticPolicy:
        if not (isinstance(self.policy_class, type) and issubclass(self.policy_class, ActorCriticPolicy)):
            raise ValueError("Error: the policy of TRPO must be a subclass of ActorCriticPolicy, "
                             f"got {self.policy_class!r}")
        if getattr(self.policy_class, "recurrent", False):
            raise ValueError("TRPO (sb3-contrib) takes feed-forward policies only, got a recurrent policy")
        kwargs = sb3_policy_kwargs_to_sb2(self.policy_kwargs)
        if self.use_sde:  # gSDE is switched on by the algorithm's argument (policy_kwargs may tune it)
            kwargs["use_sde"] = True
        return self.policy_class(None, self.observation_space, self.action_space, n_env, n_steps, n_batch, reuse=False,
                                 **kwargs)

    def _make_runner(self) -> RolloutRunner:
        return RolloutRunner(env=self.env, model=self, n_steps=self.n_steps, gamma=self.gamma, lam=self.gae_lambda,
                             with_neg_log_probs=True)

    def setup_model(self):
        """
        Build the networks, optimizers and compiled train steps for the model's spaces (the constructor calls it
        unless ``_init_setup_model=False``; ``load`` calls it before restoring the parameters).
        """
        with SetVerbosity(self.verbose):
            self.n_batch = self.n_envs * self.n_steps
            if self.normalize_advantage and self.n_batch <= 1:
                raise ValueError(f"`n_steps * n_envs` must be greater than 1. Currently n_steps={self.n_steps} and "
                                 f"n_envs={self.n_envs}")
            self._setup_policy(1, None)
            names = list(self.policy_tf.named_parameters())
            params = self.policy_tf.parameter_list()
            is_critic = [("/vf" in name) or ("/q/" in name) for name in names]
            self._actor_vars = [v for v, critic in zip(params, is_critic) if not critic]
            self._critic_vars = [v for v, name in zip(params, names) if "/vf" in name]
            self.optimizer = Adam(self._critic_vars, epsilon=1e-5)
            self._shuffle_gen = self._new_generator()
            self._policy_step = self._make_policy_step()
            self._train_step = self._critic_step = self._make_critic_step()

    def _make_train_step(self):
        """A new environment with another batch size: new compiled steps (traced on first use)."""
        self._policy_step = self._make_policy_step()
        self._critic_step = self._make_critic_step()
        return self._critic_step

    # ------------------------------------------------------------------ the policy step (one compiled call)
    def _objective_and_kl(self, obs, actions, advantages, old_log_probs, old_flat):
        policy = self.policy_tf
        flat, _, _, _ = policy.forward(obs)
        dist = policy.proba_distribution_from_flat(flat)
        old_dist = policy.proba_distribution_from_flat(old_flat)
        ratio = tf.exp(-dist.neglogp(actions) - old_log_probs)
        if isinstance(dist, SquashedSDEDistribution):  # SB3 takes the KL of the Gaussians before the tanh
            kl = _gaussian_kl(dist.mean, dist.logstd, old_dist.mean, old_dist.logstd)
        else:
            kl = dist.kl(old_dist)
        return tf.reduce_mean(advantages * ratio), tf.reduce_mean(kl)

    def _make_policy_step(self) -> TrainStep:
        policy = self.policy_tf
        n = len(range(0, int(self.n_batch), int(self.sub_sampling_factor)))
        is_box = isinstance(self.action_space, gym.spaces.Box)
        act_dtype = tf.float32 if is_box else policy.pdtype.sample_dtype()
        vec = tf.TensorSpec((n,), tf.float32)
        inputs = {"obs": policy.obs_signature(n),
                  "actions": tf.TensorSpec((n,) + tuple(policy.pdtype.sample_shape()), act_dtype),
                  "advantages": vec, "old_log_probs": vec}
        actor = self._actor_vars
        cg_max_steps, damping = int(self.cg_max_steps), float(self.cg_damping)
        target_kl, shrink = float(self.target_kl), float(self.line_search_shrinking_factor)
        max_iter = int(self.line_search_max_iter)

        def policy_step(obs, actions, advantages, old_log_probs):
            if self.normalize_advantage:
                mean, var = tf.nn.moments(advantages, axes=[0])
                count = tf.cast(tf.shape(advantages)[0], tf.float32)
                advantages = (advantages - mean) / (tf.sqrt(var * count / (count - 1.0)) + 1e-8)
            old_flat = tf.stop_gradient(policy.forward(obs)[0])

            def objective_and_kl():
                return self._objective_and_kl(obs, actions, advantages, old_log_probs, old_flat)

            with tf.GradientTape() as tape:
                objective, _ = objective_and_kl()
            grad = flatgrad(tape.gradient(objective, actor), actor)

            def fisher_product(vector):
                return hessian_vector_product(lambda: objective_and_kl()[1], actor, vector) + damping * vector

            direction = conjugate_gradient_tf(fisher_product, grad, cg_iters=cg_max_steps)
            max_step = tf.sqrt(2.0 * target_kl / tf.reduce_sum(direction * fisher_product(direction)))
            original = flatten_tensors([tf.identity(v) for v in actor], actor)

            def trial(i, coeff, success, new_objective, kl):
                assign_from_flat(actor, original + coeff * max_step * direction)  # (ordered by tf.function)
                new_objective, kl = objective_and_kl()
                success = tf.logical_and(kl < target_kl, new_objective > objective)
                return i + 1, tf.where(success, coeff, coeff * shrink), success, new_objective, kl

            _, _, success, new_objective, kl = tf.while_loop(
                lambda i, _c, success, _o, _k: tf.logical_and(i < max_iter, tf.logical_not(success)), trial,
                (tf.constant(0), tf.constant(1.0), tf.constant(False), objective, tf.constant(0.0)))
            restore = tf.cond(success, lambda: tf.constant(0), lambda: _assign(actor, original))
            with tf.control_dependencies([restore]):
                return {"policy_objective": tf.where(success, new_objective, objective),
                        "kl_divergence_loss": tf.where(success, kl, 0.0),
                        "is_line_search_success": tf.cast(success, tf.float32)}

        return TrainStep(policy_step, inputs, name="trpo_contrib_policy_step",
                         jit_compile=False)

    # ------------------------------------------------------------------ the critic step (one compiled call)
    def _make_critic_step(self) -> TrainStep:
        """
        Every epoch's shuffled minibatch Adam steps on the value function, in one compiled call (sb3-contrib's
        ``for epoch: for minibatch in rollout_buffer.get(batch_size)``, with the permutations drawn in-graph).

        When ``batch_size`` divides the rollout, each epoch gathers the shuffled rollout once as
        ``(n_minibatches, batch_size, ...)`` and a minibatch is one row of it; otherwise the last minibatch is shorter,
        as sb3-contrib's. The call is not XLA-compiled: measured on the zoo's Pendulum case (2048 samples, 15 epochs of
        16 minibatches, MLP 64x64), XLA ran the Adam steps no faster (36-37 CPU-ms per call either way) and cost 0.6 s
        more to compile; with minibatches cut by a dynamic slice out of the flat rollout it was ~12x slower (470 ms).
        """
        policy = self.policy_tf
        n_batch = int(self.n_batch)
        batch_size = min(int(self.batch_size), n_batch)
        n_minibatches = -(-n_batch // batch_size)
        even = n_batch % batch_size == 0
        n_epochs = int(self.n_critic_updates)
        critic = self._critic_vars
        inputs = {"obs": policy.obs_signature(n_batch), "returns": tf.TensorSpec((n_batch,), tf.float32),
                  "lr": tf.TensorSpec((), tf.float32)}

        def adam_step(mb_obs, mb_returns, lr):
            with tf.GradientTape() as tape:
                _, values, _, _ = policy.forward(mb_obs)
                loss = tf.reduce_mean(tf.square(mb_returns - values))
            self.optimizer.apply(tape.gradient(loss, critic), lr)
            return loss

        def critic_step(obs, returns, lr):
            def epoch(index, total):
                perm = tf.argsort(self._shuffle_gen.uniform((n_batch,)))
                if even:  # minibatch k = rows k * batch_size ... of the shuffled rollout, as one row of a reshape
                    s_obs = tf.reshape(tf.gather(obs, perm), (n_minibatches, batch_size) + tuple(obs.shape[1:]))
                    s_returns = tf.reshape(tf.gather(returns, perm), (n_minibatches, batch_size))

                    def minibatch(mb, total):
                        return mb + 1, total + adam_step(tf.gather(s_obs, mb), tf.gather(s_returns, mb), lr)
                else:
                    def minibatch(mb, total):
                        start = mb * batch_size
                        idx = perm[start:tf.minimum(start + batch_size, n_batch)]
                        return mb + 1, total + adam_step(tf.gather(obs, idx), tf.gather(returns, idx), lr)

                _, total = tf.while_loop(lambda mb, _t: mb < n_minibatches, minibatch, (tf.constant(0), total))
                return index + 1, total

            _, total = tf.while_loop(lambda i, _t: i < n_epochs, epoch, (tf.constant(0), tf.constant(0.0)))
            return {"value_loss": total / float(max(n_epochs * n_minibatches, 1))}

        return TrainStep(critic_step, inputs, name="trpo_contrib_critic_step",
                         jit_compile=False)

    # ------------------------------------------------------------------ the on-policy loop's parts
    def _on_learn_start(self, progress, callback) -> None:
        self._lr_fn = get_schedule_fn(self.learning_rate)

    def train(self, batch) -> Dict[str, float]:
        """The natural-gradient policy step with line search, then the value function's epochs."""
        frac = self._sb3_progress_remaining()
        self._current_lr = self._lr_fn(frac)
        sub = slice(None, None, int(self.sub_sampling_factor))
        out = self._policy_step(obs=batch.observations[sub], actions=batch.actions[sub],
                                advantages=batch.advantages[sub], old_log_probs=-batch.neg_log_probs[sub])
        stats = {name: float(out[name]) for name in POLICY_STATS}
        if self.n_critic_updates > 0:
            stats["value_loss"] = float(self._critic_step(obs=batch.observations, returns=batch.returns,
                                                          lr=self._current_lr)["value_loss"])
        head = getattr(self.policy_tf, "pi_head", None)
        if hasattr(head, "logstd"):
            stats["std"] = float(np.exp(head.logstd.numpy()).mean())
        self._n_train_updates += 1
        return stats

    def learn(self, total_timesteps, callback=None, log_interval: int = 1, tb_log_name: str = "TRPO",
              reset_num_timesteps: bool = True, progress_bar: bool = False):
        """
        Train for ``total_timesteps`` environment steps (sb3-contrib's signature and defaults).

        :param total_timesteps: (int) the number of environment steps to train for
        :param callback: (callable, [BaseCallback] or BaseCallback) called at every step
        :param log_interval: (int) the number of updates between log blocks (verbose >= 1)
        :param tb_log_name: (str) the name of the run for TensorBoard
        :param reset_num_timesteps: (bool) whether to reset ``num_timesteps``
        :param progress_bar: (bool) show a progress bar (tqdm)
        :return: the trained model (``self``)
        """
        return self._learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar)


def _gaussian_kl(mean, logstd, old_mean, old_logstd) -> tf.Tensor:
    """KL(new || old) of two diagonal Gaussians, summed over the action dimensions."""
    return tf.reduce_sum(old_logstd - logstd + (tf.exp(2.0 * logstd) + tf.square(mean - old_mean))
                         / (2.0 * tf.exp(2.0 * old_logstd)) - 0.5, axis=-1)


def _assign(variables, flat) -> tf.Tensor:
    assign_from_flat(variables, flat)
    return tf.constant(1)
