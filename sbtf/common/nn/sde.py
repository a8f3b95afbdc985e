"""
Generalized State-Dependent Exploration (gSDE), with stable-baselines3's maths and argument names.

gSDE (Raffin et al., 2021) replaces independent Gaussian noise per step by a noise that is a function of the
policy's latent features ``z`` (the last layer of the pi network): ``action = mean(z) + z @ E`` where the exploration
matrix ``E`` (latent_dim x action_dim) is drawn from ``N(0, std**2)`` and kept for ``sde_sample_freq`` steps. The
action then has the distribution ``N(mean, sqrt(z**2 @ std**2 + 1e-6))`` per action dimension, so a gSDE policy's
flat distribution parameters are SB2's ``[mean, logstd]`` with ``logstd = 0.5 * log(z**2 @ std**2 + 1e-6)``:
log-probabilities, entropy and KL of the training code are the diagonal Gaussian's. ``z`` is not differentiated
through in that variance (SB3's ``learn_features=False``, the on-policy default).

``std`` comes from the free parameter ``log_std`` (latent_dim x action_dim with ``full_std=True``, else
latent_dim x 1 broadcast to every action): ``exp(log_std)``, or with ``use_expln=True``
``exp(log_std)`` below 0 and ``log1p(log_std) + 1`` above (keeps the std from growing too fast).

With ``squash_output=True`` (PPO2 and A2C; SB3's ``TanhBijector``) the action is ``tanh(mean + z @ E)`` in [-1, 1]
(deterministic: ``tanh(mean)``), rescaled to the Box bounds before it reaches the environment; its log-probability is
the Gaussian's at ``u = atanh(clip(a, -1 + eps, 1 - eps))`` (``eps`` float32's machine epsilon) minus
``sum log(1 - tanh(u)**2 + 1e-6)``, and it has no closed-form entropy: the algorithms use ``-mean(log_prob)`` of the
rollout's actions (:class:`SquashedSDEDistribution`).

Public names: :class:`SDEHead` (the pi head: mean layer + ``log_std``), :func:`sde_std`, :func:`sde_flat`,
:class:`ExplorationNoise` (the exploration matrices: the acting state), :class:`OnPolicySDEMixin` (``use_sde`` and
``sde_sample_freq`` of PPO2 and A2C), :func:`refuse_sde` (algorithms without gSDE), :class:`SquashedSDEDistribution`,
:func:`tanh_inverse`, :func:`squashed_neglogp_np`, :func:`scale_action`, :func:`unscale_action`.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

import gymnasium as gym
import keras
import numpy as np
import tensorflow as tf

from sbtf.common.tf_layers import Linear, SB2Layer, _affine_np

#: SB3's ``StateDependentNoiseDistribution.epsilon``: added to the variance (and to 1 - tanh(x)**2 when squashing)
SDE_EPSILON = 1e-6


class SDEHead(Linear):
    """
    The pi head of a gSDE policy: the mean ``x @ w + b`` (SB3's ``action_net``) and the free parameter ``log_std``
    (``model/pi/log_std:0``, shape (latent_dim, action_dim) with ``full_std`` else (latent_dim, 1)), initialised to
    ``log_std_init``.

    :param scope: (str) SB2 scope of the variables
    :param n_hidden: (int) action dimension
    :param log_std_init: (float) initial value of ``log_std``
    :param full_std: (bool) one std per (latent, action) pair, else one per latent unit
    :param use_expln: (bool) ``expln`` instead of ``exp`` to turn ``log_std`` into the std
    """

    def __init__(self, scope: str, n_hidden: int, log_std_init: float = 0.0, full_std: bool = True,
                 use_expln: bool = False, init_scale: float = 0.01, **kwargs):
        super().__init__(scope, n_hidden, init_scale=init_scale, **kwargs)
        self.log_std_init = float(log_std_init)
        self.full_std = bool(full_std)
        self.use_expln = bool(use_expln)

    def build(self, input_shape):
        super().build(input_shape)
        self.latent_dim = int(input_shape[-1])
        self.log_std = self.add_weight(name="log_std", shape=(self.latent_dim, self.n_hidden if self.full_std else 1),
                                       initializer=keras.initializers.Constant(self.log_std_init))

    @staticmethod
    def numpy_call(weights: Sequence[np.ndarray], x: np.ndarray) -> np.ndarray:
        """The mean in NumPy; ``weights`` are ``[w, b, log_std]``."""
        return _affine_np(x, weights[0], weights[1])


def sde_std(log_std, action_dim: int, use_expln: bool = False, full_std: bool = True, numpy: bool = False):
    """
    SB3's ``StateDependentNoiseDistribution.get_std``: the std matrix (latent_dim, action_dim) from ``log_std``.

    :param log_std: (array or tensor) the ``log_std`` parameter
    :param action_dim: (int) action dimension (the columns of a ``full_std=False`` std)
    :param use_expln: (bool) ``exp`` below 0, ``log1p(x) + 1`` above
    :param full_std: (bool) whether ``log_std`` already has one column per action
    :param numpy: (bool) NumPy inputs and outputs, else TensorFlow
    """
    xp_exp, xp_log1p, xp_where = (np.exp, np.log1p, np.where) if numpy else (tf.exp, tf.math.log1p, tf.where)
    if use_expln:
        positive = log_std > 0
        below = xp_exp(xp_where(positive, 0.0 * log_std, log_std))
        safe = xp_where(positive, log_std, 0.0 * log_std) + SDE_EPSILON
        std = xp_where(positive, xp_log1p(safe) + 1.0, below)
    else:
        std = xp_exp(log_std)
    if full_std:
        return std
    return std * (np.ones((1, action_dim), np.float32) if numpy else tf.ones((1, action_dim), tf.float32))


class SDELogStd(SB2Layer):
    """
    gSDE's free ``log_std`` parameter as a layer of its own (SAC's actor, whose heads are ``Dense`` layers): calling
    it on the latent features returns ``log_std`` (latent_dim, action_dim or 1), so acting paths find it.

    :param scope: (str) SB2 scope (the variable is ``<scope>/log_std``)
    :param action_dim: (int) action dimension
    :param log_std_init: (float) initial value
    :param full_std: (bool) one std per (latent, action) pair, else one per latent unit
    """

    def __init__(self, scope: str, action_dim: int, log_std_init: float = -3.0, full_std: bool = True, **kwargs):
        kwargs.setdefault("name", scope.replace("/", "__") + "__log_std")
        super().__init__(scope, **kwargs)
        self.action_dim = int(action_dim)
        self.log_std_init = float(log_std_init)
        self.full_std = bool(full_std)

    def build(self, input_shape):
        self.log_std = self.add_weight(name="log_std", shape=(int(input_shape[-1]),
                                                              self.action_dim if self.full_std else 1),
                                       initializer=keras.initializers.Constant(self.log_std_init))

    def call(self, inputs):
        return tf.convert_to_tensor(self.log_std)

    @staticmethod
    def numpy_call(weights: Sequence[np.ndarray], x: np.ndarray) -> np.ndarray:
        return weights[0]


def sde_log_std(latent, std, numpy: bool = False, learn_features: bool = True):
    """The per-action log std of gSDE's action distribution: ``0.5 * log(latent**2 @ std**2 + 1e-6)``
    (``learn_features=False`` stops the gradient through ``latent``, SB3's on-policy default)."""
    if numpy:
        return 0.5 * np.log(np.dot(np.square(latent), np.square(std)) + SDE_EPSILON)
    if not learn_features:
        latent = tf.stop_gradient(latent)
    return 0.5 * tf.math.log(tf.matmul(tf.square(latent), tf.square(std)) + SDE_EPSILON)


def gaussian_log_prob(x, mean, log_std):
    """Log-density of a diagonal Gaussian, summed over the last axis (TF)."""
    return tf.reduce_sum(-0.5 * tf.square((x - mean) * tf.exp(-log_std)) - log_std - 0.5 * np.log(2.0 * np.pi),
                         axis=-1)


def sde_flat(ops, head: SDEHead, mean, latent):
    """
    SB2-style flat parameters ``[mean, logstd]`` of a gSDE action distribution in the backend ``ops``:
    ``logstd = 0.5 * log(stop_gradient(latent)**2 @ std**2 + 1e-6)``.
    """
    std = sde_std(ops.weight(head, "log_std"), head.n_hidden, head.use_expln, head.full_std, numpy=ops.is_numpy)
    return ops.concat([mean, sde_log_std(latent, std, numpy=ops.is_numpy, learn_features=False)])


#: SB3's ``TanhBijector.inverse`` clips actions to [-1 + eps, 1 - eps] with ``eps = torch.finfo(float32).eps``
TANH_CLIP_EPS = float(np.finfo(np.float32).eps)


def clip_squashed(actions, numpy: bool = False):
    """Squashed actions clipped to [-1 + eps, 1 - eps] (SB3's ``TanhBijector.inverse`` clamps them before atanh)."""
    if numpy:
        return np.clip(np.asarray(actions, np.float32), -1.0 + TANH_CLIP_EPS, 1.0 - TANH_CLIP_EPS)
    return tf.clip_by_value(tf.cast(actions, tf.float32), -1.0 + TANH_CLIP_EPS, 1.0 - TANH_CLIP_EPS)


def tanh_inverse(actions, numpy: bool = False):
    """SB3's ``TanhBijector.inverse``: ``atanh(clip(a, -1 + eps, 1 - eps))`` written ``0.5 * (log1p(a) - log1p(-a))``.

    :param actions: (array or tensor) squashed actions in [-1, 1]
    :param numpy: (bool) NumPy input and output, else TensorFlow
    """
    a = clip_squashed(actions, numpy)
    if numpy:
        return 0.5 * (np.log1p(a) - np.log1p(-a))
    return 0.5 * (tf.math.log1p(a) - tf.math.log1p(-a))


def _squash_correction(clipped, numpy: bool = False):
    """SB3's ``log_prob_correction`` summed over actions: ``sum log(1 - tanh(u)**2 + 1e-6)`` at
    ``u = atanh(c)``, i.e. ``sum log((1 - c) * (1 + c) + 1e-6)`` for the clipped action ``c`` (the same number,
    without float32's rounding of ``tanh`` at the clip bound, so acting (NumPy) and training (TF) agree)."""
    if numpy:
        return np.sum(np.log((1.0 - clipped) * (1.0 + clipped) + SDE_EPSILON), axis=-1)
    return tf.reduce_sum(tf.math.log((1.0 - clipped) * (1.0 + clipped) + SDE_EPSILON), axis=-1)


def squashed_neglogp_np(flat: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """
    NumPy negative log-likelihood of squashed actions under ``tanh(N(mean, exp(logstd)))`` (SB3's
    ``StateDependentNoiseDistribution.log_prob`` with ``squash_output=True``).

    :param flat: (np.ndarray) flat parameters ``[mean, logstd]`` (batch, 2 * action_dim)
    :param actions: (np.ndarray) squashed actions in [-1, 1] (batch, action_dim)
    :return: (np.ndarray) (batch,) float32
    """
    mean, logstd = np.split(np.asarray(flat, np.float32), 2, axis=-1)
    gaussian = tanh_inverse(actions, numpy=True)
    neglogp = np.sum(0.5 * np.square((gaussian - mean) * np.exp(-logstd)) + logstd + 0.5 * np.log(2.0 * np.pi),
                     axis=-1)
    return (neglogp + _squash_correction(clip_squashed(actions, numpy=True), numpy=True)).astype(np.float32)


class SquashedSDEDistribution:
    """
    The action distribution of a gSDE policy with ``squash_output=True`` (TF, inside a train step): ``tanh`` of the
    diagonal Gaussian with flat parameters ``[mean, logstd]``. ``entropy()`` is None (no closed form, as in SB3):
    PPO2 and A2C then use ``-mean(log_prob)`` of the rollout's actions.

    :param flat: (tf.Tensor) flat parameters ``[mean, logstd]``
    """

    def __init__(self, flat):
        self.flat = flat
        self.mean, self.logstd = tf.split(flat, 2, axis=-1)

    def flatparam(self):
        return self.flat

    def mode(self):
        """``tanh(mean)`` (SB3's ``mode`` through the bijector)."""
        return tf.tanh(self.mean)

    def neglogp(self, x):
        return -gaussian_log_prob(tanh_inverse(x), self.mean, self.logstd) + _squash_correction(clip_squashed(x))

    def logp(self, x):
        return -self.neglogp(x)

    def entropy(self) -> None:
        """No analytical form: None (the caller estimates it with ``-mean(log_prob)``, as SB3's PPO and A2C)."""
        return None

    def kl(self, other):
        raise NotImplementedError("Error: the tanh-squashed gSDE distribution has no closed-form KL divergence.")

    def sample(self, seed=None):
        """``tanh(mean + std * eps)``: a sample with independent noise (gSDE's acting adds ``z @ E`` instead)."""
        if seed is None:
            noise = tf.random.normal(tf.shape(self.mean))
        else:
            noise = tf.random.stateless_normal(tf.shape(self.mean), seed=tf.stack([tf.cast(seed, tf.int32), 0]))
        return tf.tanh(self.mean + tf.exp(self.logstd) * noise)


def mean_entropy(dist, neglogp):
    """The entropy term of PPO2's and A2C's loss (TF): the mean of ``dist.entropy()``, or, for a distribution without
    a closed form (``entropy()`` is None: the tanh-squashed gSDE one), ``-mean(log_prob)`` of the rollout's actions
    (SB3's PPO and A2C)."""
    entropy = dist.entropy()
    if entropy is None:
        return tf.reduce_mean(neglogp)
    return tf.reduce_mean(entropy)


def scale_action(low: np.ndarray, high: np.ndarray, action: np.ndarray) -> np.ndarray:
    """SB3's ``BasePolicy.scale_action``: from the Box bounds to [-1, 1], ``2 * (a - low) / (high - low) - 1``."""
    return 2.0 * ((action - low) / (high - low)) - 1.0


def unscale_action(low: np.ndarray, high: np.ndarray, scaled_action: np.ndarray) -> np.ndarray:
    """SB3's ``BasePolicy.unscale_action``: from [-1, 1] to the Box bounds, ``low + 0.5 * (a + 1) * (high - low)``."""
    return low + 0.5 * (scaled_action + 1.0) * (high - low)


class ExplorationNoise:
    """
    The exploration matrices of a gSDE policy (its acting state): ``matrix`` (latent_dim, action_dim), used when the
    batch is one observation or does not match, and ``matrices`` (n_envs, latent_dim, action_dim), one per env, as
    SB3's ``sample_weights``. During a rollout (``start_rollout``) they are resampled before every ``sample_freq``-th
    step (-1 or 0: only at the rollout start).

    :param rng: (np.random.Generator) the policy's generator
    """

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.matrix: Optional[np.ndarray] = None
        self.matrices: Optional[np.ndarray] = None
        self.sample_freq = -1
        self.in_rollout = False
        self.steps = 0
        self.n_resets = 0  # how many times the matrices were sampled (tests, diagnostics)

    def reset(self, std: np.ndarray, n_envs: int) -> None:
        """Sample new matrices from ``N(0, std**2)`` (SB3's ``reset_noise``)."""
        std = np.asarray(std, np.float32)
        self.matrix = (std * self.rng.standard_normal(std.shape)).astype(np.float32)
        self.matrices = (std * self.rng.standard_normal((int(n_envs),) + std.shape)).astype(np.float32)
        self.n_resets += 1

    def start_rollout(self, std: np.ndarray, n_envs: int, sample_freq: int) -> None:
        """A rollout starts: new matrices; resample every ``sample_freq`` steps until ``end_rollout``."""
        self.sample_freq = int(sample_freq)
        self.in_rollout = True
        self.steps = 0
        self.reset(std, n_envs)

    def end_rollout(self) -> None:
        self.in_rollout = False

    def before_step(self, read_std: Callable[[], np.ndarray], batch: int) -> None:
        """Called before each stochastic action: resample when the frequency says so (or when never sampled)."""
        if self.matrix is None:
            self.reset(read_std(), batch)
        elif self.in_rollout:
            if self.sample_freq > 0 and self.steps > 0 and self.steps % self.sample_freq == 0:
                self.reset(read_std(), batch)
            self.steps += 1

    def noise(self, latent: np.ndarray) -> np.ndarray:
        """SB3's ``get_noise``: ``latent @ E`` (one matrix per row when the batch matches the matrices)."""
        if len(latent) == 1 or self.matrices is None or len(latent) != len(self.matrices):
            return np.dot(latent, self.matrix)
        return np.einsum("bi,bij->bj", latent, self.matrices)


class OnPolicySDEMixin:
    """
    ``use_sde`` and ``sde_sample_freq`` for an on-policy algorithm (PPO2, A2C): the policy is built with
    ``use_sde``, and each rollout starts with new exploration matrices, resampled every ``sde_sample_freq`` steps.
    """

    use_sde = False
    sde_sample_freq = -1

    def _make_policy(self, n_env, n_steps, n_batch):
        from sbtf.common.policies import FeedForwardPolicy

        if not self.use_sde:
            return super()._make_policy(n_env, n_steps, n_batch)
        if not (isinstance(self.policy_class, type) and issubclass(self.policy_class, FeedForwardPolicy)):
            raise ValueError(f"Error: use_sde=True in {type(self).__name__} needs a feed-forward policy "
                             "(MlpPolicy, CnnPolicy, MultiInputPolicy), "
                             f"got {getattr(self.policy_class, '__name__', self.policy_class)}"
                             " (gSDE has no recurrent form).")
        kwargs = dict(self.policy_kwargs, use_sde=True)
        return self.policy_class(None, self.observation_space, self.action_space, n_env, n_steps, n_batch, reuse=False,
                           **kwargs)

    def _collect_rollout(self, callback):
        policy = self.policy_tf
        if not self.use_sde:
            return super()._collect_rollout(callback)
        policy.sde_noise.start_rollout(policy.sde_std_matrix(), self.n_envs, self.sde_sample_freq)
        try:
            return super()._collect_rollout(callback)
        finally:
            policy.sde_noise.end_rollout()


def refuse_sde(algorithm: str, use_sde: bool) -> None:
    """Raise a clear error for ``use_sde=True`` on an algorithm without gSDE (as in stable-baselines3)."""
    if use_sde:
        raise sde_kwarg_error(algorithm)


#: the algorithms with gSDE (as in stable-baselines3: PPO, A2C, SAC; sb3-contrib: TQC, RecurrentPPO and TRPO -- whose
#: class name is also stable-baselines 2's, which has none: the model's error asks the class; stable-baselines 2's PPO2
#: in sbtf)
SDE_ALGORITHMS = ("PPO", "PPO2", "A2C", "SAC", "TQC", "RecurrentPPO")


def sde_kwarg_error(algorithm: str, has_sde: Optional[bool] = None) -> ValueError:
    """The error for ``policy_kwargs=dict(use_sde=...)``: gSDE is switched on by the algorithm's argument.

    :param algorithm: (str) the class name
    :param has_sde: (bool) whether the class takes ``use_sde`` (None: whether ``algorithm`` is in SDE_ALGORITHMS)
    """
    if algorithm in SDE_ALGORITHMS if has_sde is None else has_sde:
        return ValueError(f"Error: pass use_sde to {algorithm}(..., use_sde=True), not in policy_kwargs.")
    return ValueError(f"Error: {algorithm} does not support gSDE (use_sde); stable-baselines3 has gSDE for PPO, A2C "
                      "and SAC only, sb3-contrib for TQC, TRPO and RecurrentPPO (sbtf: sbtf.sb3.PPO / A2C / SAC, PPO2, "
                      "A2C, SAC, sbtf.contrib.TQC / TRPO / RecurrentPPO).")


class FeedForwardSDEMixin:
    """gSDE in ``FeedForwardPolicy`` (SB3's ``use_sde``): the policy_kwargs check, the squashed distribution and
    acting with exploration matrices; mixed into the policy before ``ActorCriticPolicy`` (its ``step`` / ``act`` /
    ``proba_distribution_from_flat`` are the fallbacks without gSDE)."""

    def _sde_settings(self, use_sde, log_std_init, use_expln, full_std, squash_output):
        """Check the gSDE policy_kwargs; the exploration noise (the acting state) when ``use_sde``."""
        if squash_output and not use_sde:
            raise ValueError("Error: squash_output=True is only available when using gSDE (use_sde=True).")
        if not use_sde:  # use_expln and full_std only matter with gSDE (ignored otherwise, as in SB3)
            return False, None
        if not isinstance(self.ac_space, gym.spaces.Box):
            raise ValueError(f"Error: gSDE (use_sde=True) needs a Box action space, got {self.ac_space!r}.")
        if squash_output:
            self.squash_output = True
            if not (np.all(np.isfinite(self.ac_space.low)) and np.all(np.isfinite(self.ac_space.high))):
                raise ValueError(f"Error: squash_output=True rescales actions from [-1, 1] to the action space's "
                                 f"bounds, which must be finite (got {self.ac_space!r}).")
        return True, ExplorationNoise(self.np_random)

    def proba_distribution_from_flat(self, flat):
        """The action distribution of flat parameters; tanh-squashed with ``squash_output`` (SB3's bijector)."""
        if self.squash_output:
            return SquashedSDEDistribution(flat)
        return super().proba_distribution_from_flat(flat)

    # --- gSDE acting (sbtf.common.nn.sde) ----------------------------------------------------------------
    def _sde_std(self, ops):
        head = self.pi_head
        return sde_std(ops.weight(head, "log_std"), head.n_hidden, head.use_expln, head.full_std, numpy=ops.is_numpy)

    def sde_std_matrix(self) -> np.ndarray:
        """The std of the exploration matrices (latent_dim, action_dim), NumPy."""
        return np.asarray(self._acting("sde_std"))

    def reset_noise(self, n_envs: int = 1) -> None:
        """Sample new exploration matrices (SB3's ``reset_noise``)."""
        self.sde_noise.reset(self.sde_std_matrix(), n_envs)

    def _sde_act(self, obs, deterministic: bool):
        """gSDE acting: ``mean + latent @ E`` (``mean`` when deterministic), through ``tanh`` with ``squash_output``;
        returns (actions, values, flat)."""
        flat, value, latent = self._acting("sde_network", self._prepare_obs(obs))
        mean = flat[:, :self.ac_space.shape[0]]
        if deterministic:
            action = mean.copy()
        else:
            self.sde_noise.before_step(self.sde_std_matrix, len(latent))
            action = (mean + self.sde_noise.noise(latent)).astype(np.float32)
        if self.squash_output:  # SB3's TanhBijector.forward; the env gets unscale_action(action)
            action = np.tanh(action)
        return action, value, flat

    def neglogp_np(self, flat: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """NumPy negative log-likelihood of ``actions`` (squashed ones in [-1, 1] with ``squash_output``)."""
        if self.squash_output:
            return squashed_neglogp_np(flat, actions)
        return self.pdtype.np_neglogp(flat, actions).astype(np.float32)

    def step(self, obs, state=None, mask=None, deterministic=False):
        if not self.use_sde:
            return super().step(obs, state, mask, deterministic)
        action, value, flat = self._sde_act(obs, deterministic)
        return action, value, None, self.neglogp_np(flat, action)

    def act(self, obs, state=None, mask=None, deterministic=False):
        if not self.use_sde:
            return super().act(obs, state, mask, deterministic)
        action, value, _ = self._sde_act(obs, deterministic)
        return action, value, None

__all__ = ["SDE_ALGORITHMS", "sde_kwarg_error", "SDE_EPSILON", "SDEHead", "SDELogStd", "sde_log_std",
           "gaussian_log_prob", "sde_std", "sde_flat", "ExplorationNoise", "OnPolicySDEMixin", "refuse_sde",
           "TANH_CLIP_EPS", "clip_squashed", "tanh_inverse", "squashed_neglogp_np", "SquashedSDEDistribution",
           "mean_entropy", "scale_action", "unscale_action", "FeedForwardSDEMixin"]
