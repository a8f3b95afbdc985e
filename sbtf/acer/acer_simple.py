"""Actor-Critic with Experience Replay, stable-baselines 2.x ``ACER`` (Discrete actions).

Per update: one on-policy step on the rollout just collected, then ``Poisson(replay_ratio)`` steps on
rollouts drawn from the episodic replay buffer (``sbtf.acer.buffer``). Each step is one compiled call that
evaluates the policy (Q(s, .) from the ``q`` head, pi = softmax of the ``pi`` head) on ``n_steps + 1``
observations per env, computes Retrace targets, the truncated-importance-weight policy gradient with bias
correction, the efficient trust-region projection against a Polyak-averaged copy of the policy, and applies
RMSProp (TF1 semantics) followed by the Polyak update of the averaged copy.
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Dict, List, Optional

import gymnasium as gym
import numpy as np
import tensorflow as tf

from sbtf import logger
from sbtf.acer.buffer import Buffer
from sbtf.common.base_class import SetVerbosity
from sbtf.common.distributions import softmax_np
from sbtf.common.compile.fast_call import TrainStep
from sbtf.common.math_util import total_episode_reward_logger
from sbtf.common.algo.on_policy import NStepActorCriticRLModel
from sbtf.common.optimizers import RMSProp
from sbtf.common.runners import AbstractEnvRunner
from sbtf.common.schedules import ProgressSchedule
from sbtf.common.algo.train_log import record_episode_means
from sbtf.common.fileio import model_schema as ms
from sbtf.common.tf_util import xla_pays_off
from sbtf.common.arg_checks import check_hyperparameters

#: names of the train-step statistics (SB2's ``names_ops``), in the order the train step returns them
NAMES_OPS = ("loss", "loss_q", "entropy", "loss_policy", "loss_f", "loss_bc", "explained_variance", "norm_grads")
#: extra statistics of the trust-region version
TRUST_REGION_NAMES_OPS = ("norm_grads_q", "norm_grads_policy", "avg_norm_grads_f", "avg_norm_k", "avg_norm_g",
                          "avg_norm_k_dot_g", "avg_norm_adj")
#: trust-region statistics that need a second backward pass: only computed on the updates that are logged
SEPARATE_NORMS = ("norm_grads_q", "norm_grads_policy")


def get_by_index(input_tensor, idx):
    """
    ``input_tensor[i, idx[i]]`` for every row ``i``.

    :param input_tensor: (tf.Tensor) (batch, n)
    :param idx: (tf.Tensor) (batch,) integer indices
    :return: (tf.Tensor) (batch,)
    """
    return tf.gather(input_tensor, tf.cast(idx, tf.int32), axis=1, batch_dims=1)


def strip(var, n_envs: int, n_steps: int, flat: bool = False):
    """
    Removes the last step of each environment's sequence from an env-major batch of ``n_envs * (n_steps + 1)``.

    :param var: (tf.Tensor) the input tensor
    :param n_envs: (int) The number of environments
    :param n_steps: (int) The number of steps to run for each environment
    :param flat: (bool) If the input tensor is flat (batch,)
    :return: (tf.Tensor) the tensor without the last step of each sequence: ``n_envs * n_steps`` rows
    """
    if flat:
        return tf.reshape(tf.reshape(var, (n_envs, n_steps + 1))[:, :-1], (-1,))
    tail = tuple(int(d) for d in var.shape[1:])
    return tf.reshape(tf.reshape(var, (n_envs, n_steps + 1) + tail)[:, :-1], (n_envs * n_steps,) + tail)


def q_retrace(rewards, dones, q_i, values, rho_i, n_envs: int, n_steps: int, gamma: float):
    """
    Retrace targets (Munos et al. 2016) as in ACER, computed backwards over each environment's sequence:
    ``Q_ret = V(x_T)``; for t = T-1 .. 0: ``Q_ret = r_t + gamma * Q_ret * (1 - done_t)``, ``target_t = Q_ret``,
    then ``Q_ret = min(1, rho_t) * (Q_ret - Q(x_t, a_t)) + V(x_t)``.

    :param rewards: (tf.Tensor) rewards (n_envs * n_steps,), env-major
    :param dones: (tf.Tensor) done flags aligned with the rewards (n_envs * n_steps,)
    :param q_i: (tf.Tensor) Q values of the actions taken (n_envs * n_steps,)
    :param values: (tf.Tensor) state values (n_envs * (n_steps + 1),), the last of each env bootstraps
    :param rho_i: (tf.Tensor) importance weights pi(a_t|x_t) / mu(a_t|x_t) (n_envs * n_steps,)
    :param n_envs: (int) The number of environments
    :param n_steps: (int) The number of steps to run for each environment
    :param gamma: (float) The discount value
    :return: (tf.Tensor) the Retrace targets (n_envs * n_steps,)
    """
    rho_bar = tf.reshape(tf.minimum(1.0, rho_i), (n_envs, n_steps))
    reward_seq = tf.reshape(tf.cast(rewards, tf.float32), (n_envs, n_steps))
    done_seq = tf.reshape(tf.cast(dones, tf.float32), (n_envs, n_steps))
    q_is = tf.reshape(q_i, (n_envs, n_steps))
    value_sequence = tf.reshape(values, (n_envs, n_steps + 1))
    qret = value_sequence[:, -1]
    qrets = [None] * n_steps
    for i in range(n_steps - 1, -1, -1):
        qret = reward_seq[:, i] + gamma * qret * (1.0 - done_seq[:, i])
        qrets[i] = qret
        qret = (rho_bar[:, i] * (qret - q_is[:, i])) + value_sequence[:, i]
    return tf.reshape(tf.stack(qrets, axis=1), (-1,))


def policy_objective_grad(f, actions, coef_f, coef_bc, ent_coef: float, eps: float = 1e-6):
    """
    Closed-form gradient w.r.t. the action probabilities ``f`` of ACER's policy objective
    ``sum_n [log(f[n, a_n] + eps) coef_f[n] + sum_k log(f[n, k] + eps) coef_bc[n, k] + ent_coef H(f[n])]``
    with ``H(p) = -sum_k p_k log(p_k + eps)`` (= ``-(loss_f + loss_bc - ent_coef * entropy) * n_batch``), the
    ``g`` that the efficient trust region projects.

    :param f: (tf.Tensor) action probabilities (batch, n_act)
    :param actions: (tf.Tensor) actions taken (batch,)
    :param coef_f: (tf.Tensor) truncated-importance-weighted advantages (batch,) (constants)
    :param coef_bc: (tf.Tensor) bias-correction coefficients (batch, n_act) (constants)
    :param ent_coef: (float) entropy coefficient
    :param eps: (float) the epsilon inside the logarithms
    :return: (tf.Tensor) (batch, n_act)
    """
    n_act = int(f.shape[-1])
    one_hot = tf.one_hot(tf.cast(actions, tf.int32), n_act, dtype=f.dtype)
    return (one_hot * tf.reshape(coef_f, (-1, 1)) + coef_bc) / (f + eps) \
        - ent_coef * (tf.math.log(f + eps) + f / (f + eps))


def q_explained_variance(q_pred, q_true):
    """Explained variance of the Q values (SB2 ``q_explained_variance``), over both axes."""
    _, var_y = tf.nn.moments(q_true, axes=[0, 1])
    _, var_pred = tf.nn.moments(q_true - q_pred, axes=[0, 1])
    return 1.0 - (var_pred / var_y)


def avg_norm(tensor):
    """Mean over the batch of the L2 norm of each row."""
    return tf.reduce_mean(tf.sqrt(tf.reduce_sum(tf.square(tensor), axis=-1)))


@dataclass
class AcerRollout:
    """
    One ACER rollout, laid out per environment (``(n_envs, n_steps[+1], ...)``), as the replay buffer stores it.

    :param observations: observations, ``(n_envs, n_steps + 1) + obs_shape`` (the last one bootstraps)
    :param actions: actions, ``(n_envs, n_steps)``
    :param rewards: rewards with time-limit bootstraps, ``(n_envs, n_steps)``
    :param mus: the behaviour policy's action probabilities, ``(n_envs, n_steps, n_act)``
    :param dones: done flags aligned with the rewards, ``(n_envs, n_steps)``
    :param masks: episode-start flags (recurrent state resets), ``(n_envs, n_steps + 1)``
    :param states: the recurrent states at the start of the rollout (None for feed-forward policies)
    :param episode_infos: the Monitor infos of the episodes that ended in the rollout
    :param true_rewards: the environment's rewards, ``(n_envs, n_steps)``
    """

    observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    mus: np.ndarray
    dones: np.ndarray
    masks: np.ndarray
    states: Optional[np.ndarray]
    episode_infos: List[dict]
    true_rewards: np.ndarray


class EpisodeStats:
    """
    Running episode statistics computed from the rollouts (SB2 ``EpisodeStats``): mean length and reward of the
    last 40 finished episodes.

    :param n_steps: (int) The number of steps to run for each environment
    :param n_envs: (int) The number of environments
    """

    def __init__(self, n_steps: int, n_envs: int):
        self.episode_rewards: list[list[float]] = [[] for _ in range(n_envs)]
        self.len_buffer: deque = deque(maxlen=40)
        self.rewbuffer: deque = deque(maxlen=40)
        self.n_steps = n_steps
        self.n_envs = n_envs

    def feed(self, rewards, masks) -> None:
        """
        :param rewards: ([float]) rewards (n_envs, n_steps)
        :param masks: ([bool]) done flags (n_envs, n_steps)
        """
        rewards = np.reshape(rewards, (self.n_envs, self.n_steps))
        masks = np.reshape(masks, (self.n_envs, self.n_steps))
        for i in range(self.n_envs):
            for j in range(self.n_steps):
                self.episode_rewards[i].append(float(rewards[i][j]))
                if masks[i][j]:
                    self.len_buffer.append(len(self.episode_rewards[i]))
                    self.rewbuffer.append(sum(self.episode_rewards[i]))
                    self.episode_rewards[i] = []

    def mean_length(self) -> float:
        return float(np.mean(self.len_buffer)) if self.len_buffer else 0.0

    def mean_reward(self) -> float:
        return float(np.mean(self.rewbuffer)) if self.rewbuffer else 0.0


class ACER(NStepActorCriticRLModel):
    """
    The ACER (Actor-Critic with Experience Replay) model class, https://arxiv.org/abs/1611.01224

    :param policy: (ActorCriticPolicy or str) The policy model to use (MlpPolicy, CnnPolicy, CnnLstmPolicy, ...)
    :param env: (Gym environment or str) The environment to learn from (if registered in Gym, can be str)
    :param gamma: (float) The discount value
    :param n_steps: (int) The number of steps to run for each environment per update
        (i.e. batch size is n_steps * n_env where n_env is number of environment copies running in parallel)
    :param num_procs: (int) The number of threads for TensorFlow operations (deprecated: use ``n_cpu_tf_sess``)
    :param q_coef: (float) The weight for the loss on the Q value
    :param ent_coef: (float) The weight for the entropy loss
    :param max_grad_norm: (float) The clipping value for the maximum gradient
    :param learning_rate: (float) The initial learning rate for the RMS prop optimizer
    :param lr_schedule: (str) The type of scheduler for the learning rate update ('linear', 'constant',
        'double_linear_con', 'middle_drop' or 'double_middle_drop')
    :param rprop_alpha: (float) RMSProp decay parameter (default: 0.99)
    :param rprop_epsilon: (float) RMSProp epsilon (stabilizes square root computation in denominator of RMSProp
        update) (default: 1e-5)
    :param buffer_size: (int) The buffer size in number of steps
    :param replay_ratio: (float) The number of replay learning per on policy learning on average,
        using a poisson distribution
    :param replay_start: (int) The minimum number of steps in the buffer, before learning replay
    :param correction_term: (float) Importance weight clipping factor (default: 10)
    :param trust_region: (bool) Whether or not algorithms estimates the gradient KL divergence
        between the old and updated policy and uses it to determine step size  (default: True)
    :param alpha: (float) The decay rate for the Exponential moving average of the parameters
    :param delta: (float) max KL divergence between the old policy and updated policy (default: 1)
    :param verbose: (int) the verbosity level: 0 none, 1 training information, 2 tensorflow debug
    :param tensorboard_log: (str) the log location for tensorboard (if None, no logging)
    :param _init_setup_model: (bool) Whether or not to build the network at the creation of the instance
    :param policy_kwargs: (dict) additional arguments to be passed to the policy on creation
    :param full_tensorboard_log: (bool) also log histograms of rewards, advantages and mu's
    :param seed: (int) Seed for the pseudo-random generators (python, numpy, tensorflow, env)
    :param n_cpu_tf_sess: (int) The number of threads for TensorFlow operations (set once per process)
    """

    _supported_action_spaces = (gym.spaces.Discrete,)
    #: compile the feed-forward train step with XLA (about twice as fast per call, a few seconds to compile;
    #: recurrent policies are never XLA-compiled)
    _jit_compile = True
    _not_saved_arguments = {"num_procs": "stable-baselines 2's deprecated name of n_cpu_tf_sess, which is stored"}
    _save_schema = dict(
        gamma=ms.Real(), n_steps=ms.Integer(1, ms.MAX_ROLLOUT), q_coef=ms.Real(), ent_coef=ms.Real(),
        max_grad_norm=ms.Nullable(ms.Real()), learning_rate=ms.Schedule(),
        lr_schedule=ms.AnyOf(ms.Text(), ms.Schedule()),
        rprop_alpha=ms.Real(), rprop_epsilon=ms.Real(), replay_ratio=ms.Real(), replay_start=ms.Integer(0),
        buffer_size=ms.Integer(1), correction_term=ms.Real(), trust_region=ms.Flag(), alpha=ms.Real(), delta=ms.Real())

    def __init__(self, policy, env, gamma=0.99, n_steps=20, num_procs=None, q_coef=0.5, ent_coef=0.01,
                 max_grad_norm=10, learning_rate=7e-4, lr_schedule="linear", rprop_alpha=0.99, rprop_epsilon=1e-5,
                 buffer_size=5000, replay_ratio=4, replay_start=1000, correction_term=10.0, trust_region=True,
                 alpha=0.99, delta=1, verbose=0, tensorboard_log=None, _init_setup_model=True, policy_kwargs=None,
                 full_tensorboard_log=False, seed=None, n_cpu_tf_sess=1):
        check_hyperparameters(type(self).__name__, locals())
        n_cpu_tf_sess = self._renamed_n_cpu("num_procs", num_procs, n_cpu_tf_sess)
        self.replay_ratio = replay_ratio
        self.buffer_size = buffer_size
        self.replay_start = replay_start
        self.gamma = gamma
        self.alpha = alpha
        self.correction_term = correction_term
        self.q_coef = q_coef
        self.ent_coef = ent_coef
        self.trust_region = trust_region
        self.delta = delta
        self.max_grad_norm = max_grad_norm
        self.rprop_alpha = rprop_alpha
        self.rprop_epsilon = rprop_epsilon
        self.learning_rate = learning_rate
        self.lr_schedule = lr_schedule

        self.polyak_model = None
        self.learning_rate_schedule = None
        self.names_ops = None
        self.n_act = None
        self._train_step_diag = None
        self._current_lr = None
        self._episode_stats: Optional[EpisodeStats] = None
        self._value_fn = None
        self._buffer: Optional[Buffer] = None
        self._polyak_pairs: list = []
        super().__init__(policy, env, n_steps=n_steps, verbose=verbose, tensorboard_log=tensorboard_log,
                         _init_setup_model=_init_setup_model, policy_kwargs=policy_kwargs,
                         full_tensorboard_log=full_tensorboard_log, seed=seed, n_cpu_tf_sess=n_cpu_tf_sess)

    # ------------------------------------------------------------------ environment
    def _make_runner(self) -> "_Runner":
        return _Runner(env=self.env, model=self, n_steps=self.n_steps)

    def _requires_same_n_envs(self) -> bool:
        return True

    def set_env(self, env) -> None:
        """
        Set a new environment; ACER needs the same number of environments as the model was built with (the
        replay buffer and the train step are laid out per environment).
        """
        if env is not None and self.n_envs is not None:
            env = self._make_vec_env(env)
            if env.num_envs != self.n_envs:
                raise ValueError(f"Error: the environment passed must have the same number of environments as the "
                                 f"model was trained on ({self.n_envs}, got {env.num_envs}). This is due to ACER not "
                                 "being capable of changing the number of environments.")
        super().set_env(env)

    def _on_env_changed(self) -> None:
        """A new environment (with as many envs as before): a new runner and an empty replay buffer."""
        self._runner = None
        self._buffer = None  # experience of another env

    def _check_action_space(self) -> None:
        if not isinstance(self.action_space, gym.spaces.Discrete):
            raise NotImplementedError(f"Error: ACER does not support action space {self.action_space!r} "
                                      f"({type(self.action_space).__name__}); ACER only supports Discrete action "
                                      "spaces (as stable-baselines 2.x).")

    # ------------------------------------------------------------------ setup
    def setup_model(self):
        """
        Build the networks, optimizers and compiled train steps for the model's spaces (the constructor calls it
        unless ``_init_setup_model=False``; ``load`` calls it before restoring the parameters).
        """
        with SetVerbosity(self.verbose):
            self._check_action_space()
            self.n_act = int(self.action_space.n)
            self.n_batch = self.n_envs * self.n_steps
            n_batch_train = self.n_envs * (self.n_steps + 1)
            self._setup_policy(self.n_steps + 1, n_batch_train)
            # the Polyak-averaged policy: a second instance of the policy whose weights are the moving averages
            # (never saved, as SB2); it starts equal to the policy
            self.polyak_model = self.policy_class(None, self.observation_space, self.action_space, self.n_envs,
                                            self.n_steps + 1, n_batch_train, reuse=True, **self.policy_kwargs)
            self.polyak_model.trainable = False
            shadows = list(self.polyak_model.named_parameters().values())
            if len(shadows) != len(self._variables):
                raise RuntimeError("Error: the averaged ACER policy does not have the policy's parameters.")
            self._polyak_pairs = list(zip(self._variables, shadows))
            self._sync_polyak()
            self.optimizer = RMSProp(self._variables, decay=self.rprop_alpha, epsilon=self.rprop_epsilon)
            self.names_ops = list(NAMES_OPS) + (list(TRUST_REGION_NAMES_OPS) if self.trust_region else [])
            self._value_fn = self._make_value_fn()
            self._train_step = self._make_train_step()  # traced on the first update, not at load
            self._train_step_diag = None

    def _sync_polyak(self) -> None:
        """Reset the averaged policy to the current parameters (at set-up, after loading or pretraining)."""
        for var, shadow in self._polyak_pairs:
            shadow.assign(var)

    def _on_parameters_loaded(self) -> None:
        super()._on_parameters_loaded()
        self._sync_polyak()

    def _make_value_fn(self):
        """Compiled ACER state value ``V(x) = sum_a pi(a|x) Q(x, a)`` (used to bootstrap time-limit cuts)."""
        policy = self.policy_tf
        state_size = policy.state_size if policy.recurrent else 1

        @tf.function(input_signature=[policy.obs_signature(), tf.TensorSpec((None, state_size), tf.float32),
                                      tf.TensorSpec((None,), tf.float32)], autograph=False)
        def acer_value(obs, state, mask):
            flat, _, q_value, _ = policy.forward(obs, state if policy.recurrent else None, mask, n_steps=1)
            return tf.reduce_sum(tf.nn.softmax(flat) * q_value, axis=-1)

        return acer_value

    def acer_value(self, obs, state=None, mask=None) -> np.ndarray:
        """ACER's state value ``sum_a pi(a|x) Q(x, a)`` of a batch of observations (NumPy)."""
        obs = np.asarray(obs).astype(self.policy_tf.obs_dtype, copy=False).reshape((-1,) + self.policy_tf.obs_shape)
        n = obs.shape[0]
        if self.policy_tf.recurrent:
            state = np.zeros((n, self.policy_tf.state_size), np.float32) if state is None else \
                np.asarray(state, np.float32)
            mask = np.zeros((n,), np.float32) if mask is None else np.asarray(mask, np.float32).reshape(-1)
        else:
            state = np.zeros((n, 1), np.float32)
            mask = np.zeros((n,), np.float32)
        return self._value_fn(obs, state, mask).numpy()

    def _stat_names(self, diagnostics: bool) -> list:
        """Names of the values returned by the train step (``diagnostics``: with the separate gradient norms)."""
        if diagnostics or not self.trust_region:
            return list(self.names_ops)
        return [name for name in self.names_ops if name not in SEPARATE_NORMS]

    def _make_train_step(self, diagnostics: bool = False) -> TrainStep:
        """
        The compiled train step. The trust-region gradient is back-propagated in one pass (policy and Q parts
        together); with ``diagnostics`` the two parts are back-propagated separately to report their norms
        (SB2's ``norm_grads_q``, ``norm_grads_policy``), which costs a second backward pass.
        """
        policy = self.policy_tf
        polyak = self.polyak_model
        n_envs, n_steps, n_act = self.n_envs, self.n_steps, self.n_act
        n_batch = n_envs * n_steps
        n_train = n_envs * (n_steps + 1)
        recurrent = policy.recurrent
        state_size = policy.state_size if recurrent else 1
        n_state = n_envs if recurrent else 1
        vec = tf.TensorSpec((n_batch,), tf.float32)
        inputs = {"obs": policy.obs_signature(n_train), "actions": tf.TensorSpec((n_batch,), tf.int64),
                  "rewards": vec, "dones": vec, "mus": tf.TensorSpec((n_batch, n_act), tf.float32),
                  "states": tf.TensorSpec((n_state, state_size), tf.float32),
                  "masks": tf.TensorSpec((n_train,), tf.float32), "lr": tf.TensorSpec((), tf.float32)}
        names = self._stat_names(diagnostics)
        variables = self._variables
        pairs = self._polyak_pairs
        optimizer = self.optimizer
        gamma, c_term, delta = float(self.gamma), float(self.correction_term), float(self.delta)
        q_coef, ent_coef, alpha = float(self.q_coef), float(self.ent_coef), float(self.alpha)
        trust_region = bool(self.trust_region)
        max_grad_norm = self.max_grad_norm
        jit = bool(self._jit_compile) and not recurrent and xla_pays_off(policy)
        eps = 1e-6

        def _forward(model, obs, states, masks):
            if recurrent:
                return model.forward(obs, states, masks, n_steps=n_steps + 1)
            return model.forward(obs)

        def _policy_losses(f, actions, adv, rho, rho_i, q_value, value):
            """Truncated importance sampling with bias correction, and the entropy, as functions of pi = f."""
            coef_f = tf.stop_gradient(adv * tf.minimum(c_term, rho_i))
            adv_bc = q_value - tf.reshape(value, (n_batch, 1))
            coef_bc = tf.stop_gradient(adv_bc * tf.nn.relu(1.0 - (c_term / (rho + eps))) * f)
            loss_f = -tf.reduce_mean(tf.math.log(get_by_index(f, actions) + eps) * coef_f)
            # IMP: this is a sum, as an expectation w.r.t. f
            loss_bc = -tf.reduce_mean(tf.reduce_sum(tf.math.log(f + eps) * coef_bc, axis=1))
            entropy = tf.reduce_mean(-tf.reduce_sum(f * tf.math.log(f + eps), axis=1))
            return loss_f, loss_bc, entropy, coef_f, coef_bc

        def train_step(obs, actions, rewards, dones, mus, states, masks, lr):
            polyak_flat = _forward(polyak, obs, states, masks)[0]
            f_polyak = strip(tf.nn.softmax(polyak_flat), n_envs, n_steps)
            with tf.GradientTape(persistent=diagnostics) as tape:
                flat, _, q_full, _ = _forward(policy, obs, states, masks)
                proba_full = tf.nn.softmax(flat)
                value_full = tf.reduce_sum(proba_full * q_full, axis=-1)
                f = strip(proba_full, n_envs, n_steps)
                q_value = strip(q_full, n_envs, n_steps)
                q_i = get_by_index(q_value, actions)
                rho = tf.stop_gradient(f / (mus + eps))
                rho_i = get_by_index(rho, actions)
                qret = tf.stop_gradient(q_retrace(rewards, dones, q_i, value_full, rho_i, n_envs, n_steps, gamma))
                value = tf.stop_gradient(strip(value_full, n_envs, n_steps, flat=True))
                adv = qret - value
                loss_f, loss_bc, entropy, coef_f, coef_bc = _policy_losses(f, actions, adv, rho, rho_i, q_value,
                                                                            value)
                loss_policy = loss_f + loss_bc
                loss_q = tf.reduce_mean(tf.square(qret - q_i) * 0.5)
                loss = loss_policy + q_coef * loss_q - ent_coef * entropy
                if trust_region:
                    # gradient of -(loss_policy - ent_coef * entropy) * n_batch w.r.t. phi = f
                    grad = policy_objective_grad(f, actions, coef_f, coef_bc, ent_coef, eps)
                    # gradient of KL(f_polyak || f) w.r.t. f
                    kl_grad = -f_polyak / (f + eps)
                    k_dot_g = tf.reduce_sum(kl_grad * grad, axis=-1)
                    adj = tf.maximum(0.0, (k_dot_g - delta) / (tf.reduce_sum(tf.square(kl_grad), axis=-1) + eps))
                    tr_stats = [avg_norm(kl_grad), avg_norm(grad), tf.reduce_mean(tf.abs(k_dot_g)),
                                tf.reduce_mean(tf.abs(adj))]
                    grad = grad - tf.reshape(adj, (n_batch, 1)) * kl_grad
                    # trust-region adjusted gradients w.r.t. f, back-propagated through f
                    grads_f = tf.stop_gradient(-grad / n_batch)
                    surrogate_policy = tf.reduce_sum(f * grads_f)
                    surrogate_q = loss_q * q_coef
                    surrogate = surrogate_policy + surrogate_q
            if trust_region and diagnostics:
                grads_policy = tape.gradient(surrogate_policy, variables)
                grads_q = tape.gradient(surrogate_q, variables)
                grads = [g2 if g1 is None else (g1 if g2 is None else g1 + g2)
                         for g1, g2 in zip(grads_policy, grads_q)]
                extra = [tf.linalg.global_norm([g for g in grads_q if g is not None]),
                         tf.linalg.global_norm([g for g in grads_policy if g is not None]),
                         avg_norm(grads_f) * n_batch] + tr_stats
            elif trust_region:
                grads = tape.gradient(surrogate, variables)
                extra = [avg_norm(grads_f) * n_batch] + tr_stats
            else:
                grads = tape.gradient(loss, variables)
                extra = []
            del tape
            present = [g for g in grads if g is not None]
            if max_grad_norm is not None:
                clipped, norm_grads = tf.clip_by_global_norm(present, max_grad_norm)
            else:
                clipped, norm_grads = present, tf.linalg.global_norm(present)
            it = iter(clipped)
            grads = [None if g is None else next(it) for g in grads]
            optimizer.apply(grads, lr)
            # Polyak averaging after the gradient step (tf.train.ExponentialMovingAverage(alpha))
            for var, shadow in pairs:
                shadow.assign_sub((1.0 - alpha) * (shadow - var))
            explained_variance = q_explained_variance(tf.reshape(q_i, (n_envs, n_steps)),
                                                      tf.reshape(qret, (n_envs, n_steps)))
            values = [loss, loss_q, entropy, loss_policy, loss_f, loss_bc, explained_variance, norm_grads] + extra
            return dict(zip(names, values))

        # XLA whatever the length of the run: measured about twice as fast per call (docs/acer_acktr.md)
        return TrainStep(train_step, inputs, networks=(policy,), jit_compile=jit,
                         name="acer_train_diagnostics" if diagnostics else "acer_train", xla_min_gradient_steps=0)

    # ------------------------------------------------------------------ training
    def _train_on(self, rollout: AcerRollout, diagnostics: bool = False) -> Dict[str, float]:
        """
        One train step on a rollout (collected now or replayed) at the current learning rate.

        :param rollout: (AcerRollout) the rollout
        :param diagnostics: (bool) also compute the separate gradient norms of the trust-region version
        :return: ({str: float}) the statistics (SB2's ``names_ops``)
        """
        n_train = self.n_envs * (self.n_steps + 1)
        diagnostics = bool(diagnostics and self.trust_region)
        if diagnostics and self._train_step_diag is None:
            self._train_step_diag = self._make_train_step(diagnostics=True)
        train_step = self._train_step_diag if diagnostics else self._train_step
        out = train_step(obs=rollout.observations.reshape((n_train,) + rollout.observations.shape[2:]),
                         actions=rollout.actions.reshape(-1), rewards=rollout.rewards.reshape(-1),
                         dones=rollout.dones.reshape(-1), mus=rollout.mus.reshape((self.n_batch, self.n_act)),
                         states=self._state_input(rollout.states), masks=rollout.masks.reshape(-1),
                         lr=self._current_lr)
        return {name: float(value) for name, value in out.items()}

    # ------------------------------------------------------------------ the on-policy loop's parts
    def _n_updates(self, total_timesteps: int) -> Optional[int]:
        return -(-int(total_timesteps) // self.n_batch)  # SB2: range(0, total_timesteps, n_batch)

    def _progress_remaining(self, progress) -> float:
        # SB2: value_steps(steps collected in this learn() call, the new rollout included)
        return 1.0 - (progress.update * self.n_batch) / progress.total_timesteps

    def _is_log_update(self, update: int, log_interval: int) -> bool:
        return self.verbose >= 1 and (update - 1) % log_interval == 0

    def _on_learn_start(self, progress, callback) -> None:
        self.learning_rate_schedule = ProgressSchedule(self.learning_rate, self.lr_schedule)
        self._episode_stats = EpisodeStats(self.n_steps, self.n_envs)
        if self.replay_ratio > 0 and self._buffer is None:
            self._buffer = Buffer(env=self.env, n_steps=self.n_steps, size=self.buffer_size)

    def _record_rollout(self, batch: AcerRollout, writer) -> None:
        self.ep_info_buf.extend(batch.episode_infos)
        self._episode_stats.feed(batch.true_rewards, batch.dones)
        if self.replay_ratio > 0:
            self._buffer.put(batch.observations, batch.actions, batch.rewards, batch.mus, batch.dones, batch.masks,
                             batch.states)
        if writer is not None:
            total_episode_reward_logger(self.episode_reward, batch.true_rewards, batch.dones, writer,
                                        self.num_timesteps)

    def train(self, batch: AcerRollout) -> Dict[str, float]:
        """The on-policy step on the rollout just collected (with the diagnostics when the update is logged)."""
        self._current_lr = self.learning_rate_schedule(self._learn_progress.progress_remaining)
        return self._train_on(batch, diagnostics=self._learn_progress.log_now)

    def _after_rollouts(self, batch: AcerRollout, stats: Dict[str, float]) -> Dict[str, float]:
        """The replay phase: ``Poisson(replay_ratio)`` steps on rollouts drawn from the buffer (once it is warm)."""
        buffer = self._buffer if self.replay_ratio > 0 else None
        if buffer is not None and buffer.has_atleast(self.replay_start):
            for _ in range(np.random.poisson(self.replay_ratio)):
                obs, actions, rewards, mus, dones, masks, states = buffer.get()
                self._train_on(AcerRollout(observations=obs, actions=actions, rewards=rewards, mus=mus, dones=dones,
                                           masks=masks, states=states, episode_infos=[], true_rewards=rewards))
        return {}

    def _tensorboard_scalars(self, batch: AcerRollout, stats: Dict[str, float]) -> Dict[str, float]:
        return {"loss/entropy_loss": stats["entropy"], "loss/policy_gradient_loss": stats["loss_policy"],
                "loss/value_function_loss": stats["loss_q"], "loss/loss": stats["loss"],
                "input_info/rewards": float(np.mean(batch.rewards)), "input_info/learning_rate": self._current_lr,
                "input_info/action_probability": float(np.mean(batch.mus))}

    def _tensorboard_histograms(self, batch: AcerRollout) -> Dict[str, np.ndarray]:
        n_train = self.n_envs * (self.n_steps + 1)
        return {"input_info/rewards": batch.rewards.reshape(-1),
                "input_info/action_probability": batch.mus.reshape((self.n_batch, self.n_act)),
                "input_info/observation": batch.observations.reshape(
                    (n_train,) + batch.observations.shape[2:]).astype(np.float32)}

    def _log_update(self, batch: AcerRollout, stats: Dict[str, float]) -> None:
        progress = self._learn_progress
        steps = (progress.update - 1) * self.n_batch
        logger.record_tabular("total_timesteps", self.num_timesteps)
        logger.record_tabular("fps", int(steps / max(time.time() - progress.t_start, 1e-9)))
        # IMP: In EpisodicLife env, during training, we get done=True at each loss of life,
        # not just at the terminal state. Thus, this is mean until end of life, not end of episode.
        # For true episode rewards, see the monitor files in the log folder.
        logger.record_tabular("mean_episode_length", self._episode_stats.mean_length())
        logger.record_tabular("mean_episode_reward", self._episode_stats.mean_reward())
        record_episode_means(self.ep_info_buf)
        for name, value in stats.items():
            logger.record_tabular(name, float(value))
        logger.dump_tabular()

    def learn(self, total_timesteps, callback=None, log_interval=100, tb_log_name="ACER", reset_num_timesteps=True,
              progress_bar: bool = False):
        """Train for ``total_timesteps`` environment steps (SB2 signature and defaults; the loop is
        ``OnPolicyAlgorithm._learn``, whose docstring describes the parameters)."""
        return self._learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar)


class _Runner(AbstractEnvRunner):
    """
    Collects ``n_steps`` per env with the behaviour policy's probabilities ``mu`` (SB2 ACER ``_Runner``).

    A time-limit truncation (``infos[i]["TimeLimit.truncated"]``) is kept as a done flag, and the reward of that
    step gets ``gamma * V(terminal_observation)`` with ACER's value ``sum_a pi(a|x) Q(x, a)``, so the Retrace
    target bootstraps instead of treating the cut as a termination.

    :param env: (VecEnv) The environment to learn from
    :param model: (ACER) The model to learn
    :param n_steps: (int) The number of steps to run for each environment
    """

    def __init__(self, env, model, n_steps):
        super().__init__(env=env, model=model, n_steps=n_steps)
        self.n_act = env.action_space.n
        self.n_batch = self.n_envs * n_steps
        self.batch_ob_shape = (self.n_envs * (n_steps + 1),) + env.observation_space.shape

    def _bootstrap_truncated_acer(self, rewards, dones, infos, states_before):
        truncated = [i for i in np.flatnonzero(dones)
                     if infos[i].get("TimeLimit.truncated", False) and infos[i].get("terminal_observation") is not None]
        if not truncated:
            return rewards
        terminal_obs = np.stack([np.asarray(infos[i]["terminal_observation"]) for i in truncated])
        state = states_before[truncated] if states_before is not None else None
        values = self.model.acer_value(terminal_obs, state)
        rewards = rewards.astype(np.float32, copy=True)
        rewards[truncated] += self.model.gamma * values.astype(np.float32)
        return rewards

    def _run(self):
        """
        Run one rollout.

        :return: (AcerRollout) the rollout (None when a callback stopped training during it)
        """
        policy = self.model.policy_tf
        n_steps, n_envs = self.n_steps, self.n_envs
        mb_obs = np.zeros((n_steps + 1, n_envs) + self.obs.shape[1:], dtype=self.obs.dtype)
        mb_actions = np.zeros((n_steps, n_envs), dtype=np.int64)
        mb_mus = np.zeros((n_steps, n_envs, self.n_act), dtype=np.float32)
        mb_rewards = np.zeros((n_steps, n_envs), dtype=np.float32)
        mb_true_rewards = np.zeros((n_steps, n_envs), dtype=np.float32)
        mb_dones = np.zeros((n_steps + 1, n_envs), dtype=bool)
        start_states = None if self.states is None else np.array(self.states, dtype=np.float32, copy=True)
        ep_infos = []
        for step in range(n_steps):
            states_before = self.states
            if policy.recurrent:
                # one compiled call gives the distribution and the next state
                _, _, states, _, flat = policy._run_tf(self.obs, self.states, self.dones, True)
            else:
                flat = policy.flat_params(self.obs)
                states = None
            actions = policy.pdtype.np_sample(flat, policy.np_random)
            mb_obs[step] = self.obs
            mb_actions[step] = actions
            mb_mus[step] = softmax_np(flat)
            mb_dones[step] = self.dones
            obs, rewards, dones, infos = self.env.step(actions)
            if not self._on_env_step(locals(), infos, ep_infos):
                return None
            mb_true_rewards[step] = rewards
            mb_rewards[step] = self._bootstrap_truncated_acer(np.asarray(rewards, np.float32), dones, infos,
                                                              states_before)
            self.states = states
            self.dones = dones
            self.obs[:] = obs
        mb_obs[n_steps] = self.obs
        mb_dones[n_steps] = self.dones

        mb_obs = mb_obs.swapaxes(1, 0)
        mb_actions = mb_actions.swapaxes(1, 0)
        mb_rewards = mb_rewards.swapaxes(1, 0)
        mb_true_rewards = mb_true_rewards.swapaxes(1, 0)
        mb_mus = mb_mus.swapaxes(1, 0)
        mb_dones = mb_dones.swapaxes(1, 0)
        mb_masks = mb_dones  # Used for stateful models like LSTM's to mask state when done
        mb_dones = mb_dones[:, 1:]  # Used for calculating returns. The dones array is now aligned with rewards
        # shapes are now [n_envs, n_steps(+1), ...]
        return AcerRollout(observations=mb_obs, actions=mb_actions, rewards=mb_rewards, mus=mb_mus, dones=mb_dones,
                           masks=mb_masks, states=start_states, episode_infos=ep_infos, true_rewards=mb_true_rewards)
