"""Probability distributions under stable-baselines 2.x names, backed by TensorFlow Probability.

A ``*ProbabilityDistributionType`` knows, for one action space, the shape of the flat
parameter vector, how to build the policy head (Keras layers with SB2 names) and how to turn
flat parameters into a ``*ProbabilityDistribution`` (TF, for training). Each type also has a
NumPy twin (``np_mode``/``np_sample``/``np_neglogp``) used to act without a TensorFlow call.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import gymnasium as gym
import numpy as np
import tensorflow as tf

from sbtf.common.tf_layers import GaussianHead, Linear

if TYPE_CHECKING:  # for annotations only: the import itself is deferred to first use (see _tfd)
    import tensorflow_probability as tfp


def _tfd():
    """``tfp.distributions``, imported on first use: TensorFlow Probability's import costs ~1 s, and loading a model
    to act (the NumPy path) or most of ``import sbtf`` never needs it."""
    import tensorflow_probability as tfp  # pylint: disable=import-outside-toplevel

    return tfp.distributions

_LOG_2PI = float(np.log(2.0 * np.pi))


class ProbabilityDistribution:
    """A distribution over actions (TF tensors), SB2 interface."""

    def flatparam(self) -> tf.Tensor:
        raise NotImplementedError

    def mode(self) -> tf.Tensor:
        raise NotImplementedError

    def neglogp(self, x) -> tf.Tensor:
        raise NotImplementedError

    def logp(self, x) -> tf.Tensor:
        return -self.neglogp(x)

    def kl(self, other: "ProbabilityDistribution") -> tf.Tensor:
        raise NotImplementedError

    def entropy(self) -> tf.Tensor:
        raise NotImplementedError

    def sample(self, seed=None) -> tf.Tensor:
        raise NotImplementedError


class _TFPDistribution(ProbabilityDistribution):
    """A distribution backed by one TensorFlow Probability distribution ``self.dist`` over ``action_dtype`` actions."""

    #: dtype the actions are cast to before ``log_prob``
    action_dtype = tf.float32
    dist: "tfp.distributions.Distribution"

    def neglogp(self, x):
        return -self.dist.log_prob(tf.cast(x, self.action_dtype))

    def kl(self, other):
        return self.dist.kl_divergence(other.dist)

    def entropy(self):
        return self.dist.entropy()

    def sample(self, seed=None):
        return self.dist.sample(seed=seed)


class CategoricalProbabilityDistribution(_TFPDistribution):
    """Categorical over ``n`` actions from logits (``tfd.Categorical``)."""

    action_dtype = tf.int64

    def __init__(self, logits):
        self.logits = logits
        self.dist = _tfd().Categorical(logits=logits, dtype=tf.int64)

    def flatparam(self):
        return self.logits

    def mode(self):
        return tf.argmax(self.logits, axis=-1)


class MultiCategoricalProbabilityDistribution(ProbabilityDistribution):
    """Independent categoricals, one per MultiDiscrete component."""

    def __init__(self, nvec, flat):
        self.nvec = [int(n) for n in nvec]
        self.flat = flat
        self.categoricals = [CategoricalProbabilityDistribution(p) for p in tf.split(flat, self.nvec, axis=-1)]

    def flatparam(self):
        return self.flat

    def mode(self):
        return tf.stack([p.mode() for p in self.categoricals], axis=-1)

    def neglogp(self, x):
        x = tf.cast(x, tf.int64)
        return tf.add_n([p.neglogp(x[..., i]) for i, p in enumerate(self.categoricals)])

    def kl(self, other):
        return tf.add_n([p.kl(q) for p, q in zip(self.categoricals, other.categoricals)])

    def entropy(self):
        return tf.add_n([p.entropy() for p in self.categoricals])

    def sample(self, seed=None):
        return tf.stack([p.sample(seed=seed) for p in self.categoricals], axis=-1)


class DiagGaussianProbabilityDistribution(_TFPDistribution):
    """Diagonal Gaussian; flat parameters are ``concat[mean, logstd]`` as in SB2."""

    def __init__(self, flat):
        self.flat = flat
        self.mean, self.logstd = tf.split(flat, 2, axis=-1)
        self.std = tf.exp(self.logstd)
        self.dist = _tfd().Independent(_tfd().Normal(loc=self.mean, scale=self.std), reinterpreted_batch_ndims=1)

    def flatparam(self):
        return self.flat

    def mode(self):
        return self.mean


class BernoulliProbabilityDistribution(_TFPDistribution):
    """Independent Bernoullis from logits (MultiBinary)."""

    def __init__(self, logits):
        self.logits = logits
        self.probabilities = tf.sigmoid(logits)
        self.dist = _tfd().Independent(_tfd().Bernoulli(logits=logits, dtype=tf.float32), reinterpreted_batch_ndims=1)

    def flatparam(self):
        return self.logits

    def mode(self):
        return tf.round(self.probabilities)


class ProbabilityDistributionType:
    """Parametrised family of distributions for one action space."""

    #: dtype of actions fed to ``neglogp`` during training
    action_dtype = tf.float32

    def probability_distribution_class(self):
        raise NotImplementedError

    def proba_distribution_from_flat(self, flat) -> ProbabilityDistribution:
        return self.probability_distribution_class()(flat)

    def param_shape(self) -> list[int]:
        raise NotImplementedError

    def sample_shape(self) -> list[int]:
        raise NotImplementedError

    def sample_dtype(self):
        raise NotImplementedError

    def make_heads(self, init_scale: float = 1.0, init_bias: float = 0.0) -> tuple[Linear, Linear]:
        """Keras layers for the ``pi`` head (flat parameters) and the ``q`` head (Q-values, used by ACER)."""
        n = self.param_shape()[0]
        return (Linear("pi", n, init_scale=init_scale, init_bias=init_bias),
                Linear("q", n, init_scale=init_scale, init_bias=init_bias))

    def flat_from_head(self, pi_head, pi_out):
        """Flat distribution parameters from the output of the ``pi`` head."""
        return pi_out

    # NumPy twins -----------------------------------------------------------------------
    def np_mode(self, flat: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def np_sample(self, flat: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def np_neglogp(self, flat: np.ndarray, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError


def _np_log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


class CategoricalProbabilityDistributionType(ProbabilityDistributionType):
    action_dtype = tf.int64

    def __init__(self, n_cat: int):
        self.n_cat = int(n_cat)

    def probability_distribution_class(self):
        return CategoricalProbabilityDistribution

    def param_shape(self):
        return [self.n_cat]

    def sample_shape(self):
        return []

    def sample_dtype(self):
        return tf.int64

    def np_mode(self, flat):
        return flat.argmax(axis=-1)

    def np_sample(self, flat, rng):
        # Gumbel-max, as SB2's CategoricalProbabilityDistribution.sample
        uniform = rng.random(flat.shape, dtype=np.float32)
        return (flat - np.log(-np.log(uniform + 1e-20) + 1e-20)).argmax(axis=-1)

    def np_neglogp(self, flat, x):
        # log-sum-exp minus the chosen logit (both shifted by the row maximum): the same values as
        # -log_softmax[x], with one fancy index instead of take_along_axis (a third cheaper per acting step)
        shifted = flat - flat.max(axis=-1, keepdims=True)
        rows = np.arange(len(shifted))
        return np.log(np.exp(shifted).sum(axis=-1)) - shifted[rows, np.asarray(x, np.int64).reshape(-1)]


class MultiCategoricalProbabilityDistributionType(ProbabilityDistributionType):
    action_dtype = tf.int64

    def __init__(self, n_vec):
        self.n_vec = np.asarray(n_vec).astype(np.int64)
        self._splits = np.cumsum(self.n_vec)[:-1]

    def proba_distribution_from_flat(self, flat):
        return MultiCategoricalProbabilityDistribution(self.n_vec, flat)

    def param_shape(self):
        return [int(sum(self.n_vec))]

    def sample_shape(self):
        return [len(self.n_vec)]

    def sample_dtype(self):
        return tf.int64

    def np_mode(self, flat):
        return np.stack([p.argmax(axis=-1) for p in np.split(flat, self._splits, axis=-1)], axis=-1)

    def np_sample(self, flat, rng):
        cat = CategoricalProbabilityDistributionType.np_sample
        return np.stack([cat(self, p, rng) for p in np.split(flat, self._splits, axis=-1)], axis=-1)

    def np_neglogp(self, flat, x):
        parts = np.split(flat, self._splits, axis=-1)
        total = np.zeros(flat.shape[0], dtype=np.float32)
        cat = CategoricalProbabilityDistributionType.np_neglogp
        for i, p in enumerate(parts):
            total += cat(self, p, x[:, i])
        return total


class DiagGaussianProbabilityDistributionType(ProbabilityDistributionType):
    def __init__(self, size: int):
        self.size = int(size)

    def probability_distribution_class(self):
        return DiagGaussianProbabilityDistribution

    def param_shape(self):
        return [2 * self.size]

    def sample_shape(self):
        return [self.size]

    def sample_dtype(self):
        return tf.float32

    def make_heads(self, init_scale=1.0, init_bias=0.0):
        return (GaussianHead("pi", self.size, init_scale=init_scale, init_bias=init_bias),
                Linear("q", self.size, init_scale=init_scale, init_bias=init_bias))

    def flat_from_head(self, pi_head, pi_out):
        return tf.concat([pi_out, pi_out * 0.0 + pi_head.logstd], axis=1)

    def np_mode(self, flat):
        return flat[:, : self.size]

    def np_sample(self, flat, rng):
        mean, logstd = flat[:, : self.size], flat[:, self.size:]
        return mean + np.exp(logstd) * rng.standard_normal(mean.shape, dtype=np.float32)

    def np_neglogp(self, flat, x):
        mean, logstd = flat[:, : self.size], flat[:, self.size:]
        return (0.5 * np.sum(np.square((x - mean) / np.exp(logstd)), axis=-1)
                + 0.5 * _LOG_2PI * self.size + np.sum(logstd, axis=-1))


class BernoulliProbabilityDistributionType(ProbabilityDistributionType):
    def __init__(self, size: int):
        self.size = int(size)

    def probability_distribution_class(self):
        return BernoulliProbabilityDistribution

    def param_shape(self):
        return [self.size]

    def sample_shape(self):
        return [self.size]

    def sample_dtype(self):
        return tf.int32

    def np_mode(self, flat):
        return np.round(1.0 / (1.0 + np.exp(-flat)))

    def np_sample(self, flat, rng):
        return (rng.random(flat.shape, dtype=np.float32) < 1.0 / (1.0 + np.exp(-flat))).astype(np.float32)

    def np_neglogp(self, flat, x):
        # sigmoid cross-entropy with logits, summed over components
        return np.sum(np.maximum(flat, 0) - flat * x + np.log1p(np.exp(-np.abs(flat))), axis=-1)


def make_proba_dist_type(ac_space: gym.Space) -> ProbabilityDistributionType:
    """
    The distribution type for an action space.

    :param ac_space: (gymnasium.Space) Box, Discrete, MultiDiscrete or MultiBinary
    :return: (ProbabilityDistributionType)
    """
    if isinstance(ac_space, gym.spaces.Box):
        if len(ac_space.shape) != 1:
            raise ValueError(f"Error: the action space must be a vector (1-D Box), got shape {ac_space.shape}")
        return DiagGaussianProbabilityDistributionType(ac_space.shape[0])
    if isinstance(ac_space, gym.spaces.Discrete):
        return CategoricalProbabilityDistributionType(ac_space.n)
    if isinstance(ac_space, gym.spaces.MultiDiscrete):
        return MultiCategoricalProbabilityDistributionType(ac_space.nvec)
    if isinstance(ac_space, gym.spaces.MultiBinary):
        if not isinstance(ac_space.n, (int, np.integer)):
            raise NotImplementedError(f"MultiBinary action spaces must be 1-D, got n={ac_space.n}")
        return BernoulliProbabilityDistributionType(ac_space.n)
    raise NotImplementedError(
        f"Error: probability distribution not implemented for action space of type {type(ac_space).__name__}. "
        "Must be of type gymnasium.spaces.{Box, Discrete, MultiDiscrete, MultiBinary}.")


def shape_el(tensor, index: int):
    """The static size of ``tensor`` along ``index`` when known, else the dynamic one."""
    maybe = tensor.shape[index]
    return maybe if maybe is not None else tf.shape(tensor)[index]


def softmax_np(logits: np.ndarray) -> np.ndarray:
    """Numerically stable softmax over the last axis."""
    return np.exp(_np_log_softmax(logits))


__all__ = [
    "ProbabilityDistribution", "ProbabilityDistributionType", "CategoricalProbabilityDistributionType",
    "MultiCategoricalProbabilityDistributionType", "DiagGaussianProbabilityDistributionType",
    "BernoulliProbabilityDistributionType", "CategoricalProbabilityDistribution",
    "MultiCategoricalProbabilityDistribution", "DiagGaussianProbabilityDistribution",
    "BernoulliProbabilityDistribution", "make_proba_dist_type", "shape_el", "softmax_np",
]
