"""Masked categorical distributions (sb3-contrib ``common/maskable/distributions.py``), in TensorFlow and NumPy.

Every maskable action space is a list of categorical components over one flat vector of logits:
``Discrete(n)`` is one component of ``n`` choices, ``MultiDiscrete(nvec)`` one per entry of ``nvec`` and
``MultiBinary(n)`` ``n`` components of two choices (as sb3-contrib's ``MaskableBernoulliDistribution``). A mask is a
boolean vector over the same flat logits: where it is False the logit is replaced by :data:`HUGE_NEG`, so the action
has probability zero; the entropy leaves masked choices out (``p log p`` is taken as 0 there).

The TF functions are used by the train step and the export; the NumPy twins act (sampling with the Gumbel-max trick,
so a masked choice is never drawn).
"""
from __future__ import annotations

from typing import List, Optional, Sequence

import gymnasium as gym
import numpy as np

#: the logit a masked choice gets (sb3-contrib's ``HUGE_NEG``)
HUGE_NEG = -1e8

__all__ = ["HUGE_NEG", "MaskableDistribution", "make_masked_proba_distribution", "action_dims_of"]


def action_dims_of(action_space: gym.Space) -> List[int]:
    """The sizes of the categorical components of a maskable action space."""
    if isinstance(action_space, gym.spaces.Discrete):
        return [int(action_space.n)]
    if isinstance(action_space, gym.spaces.MultiDiscrete):
        return [int(n) for n in np.asarray(action_space.nvec).ravel()]
    if isinstance(action_space, gym.spaces.MultiBinary):
        if not isinstance(action_space.n, (int, np.integer)):
            raise NotImplementedError(f"Multi-dimensional MultiBinary({action_space.n}) action space is not "
                                      "supported. You can flatten it instead.")
        return [2] * int(action_space.n)
    raise NotImplementedError(f"Error: probability distribution, not implemented for action space of type "
                              f"{type(action_space)}. Must be of type Gym Spaces: Discrete, MultiDiscrete, "
                              "MultiBinary.")


class MaskableDistribution:
    """
    The categorical components of a maskable action space, with their maths on flat logits and flat boolean masks.

    :param action_dims: the number of choices of each component
    :param discrete: actions are scalars (a ``Discrete`` space) rather than vectors of one choice per component
    """

    def __init__(self, action_dims: Sequence[int], discrete: bool):
        self.action_dims = [int(n) for n in action_dims]
        self.discrete = bool(discrete)
        self.n_logits = int(sum(self.action_dims))
        self._offsets = np.concatenate([[0], np.cumsum(self.action_dims)[:-1]]).astype(np.int64)
        # one group index per flat logit, for the NumPy maths of every component at once
        self._equal_sizes = len(set(self.action_dims)) == 1

    @property
    def action_shape(self) -> tuple:
        """The shape of one action (``()`` for Discrete, ``(n_components,)`` otherwise)."""
        return () if self.discrete else (len(self.action_dims),)

    # ------------------------------------------------------------------ TensorFlow
    def _tf_groups(self, logits, masks):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        if masks is not None:
            logits = tf.where(tf.cast(masks, tf.bool), logits, tf.constant(HUGE_NEG, logits.dtype))
        parts = tf.split(logits, self.action_dims, axis=-1) if len(self.action_dims) > 1 else [logits]
        return [part - tf.reduce_logsumexp(part, axis=-1, keepdims=True) for part in parts]

    def _tf_mask_groups(self, masks):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        masks = tf.cast(masks, tf.bool)
        return tf.split(masks, self.action_dims, axis=-1) if len(self.action_dims) > 1 else [masks]

    def log_prob_tf(self, logits, actions, masks=None):
        """Log-probabilities of ``actions`` (batch,) under the masked distribution (TF)."""
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        groups = self._tf_groups(logits, masks)
        actions = tf.cast(tf.reshape(actions, (-1, len(self.action_dims))), tf.int32)
        total = 0.0
        for i, (logp, n) in enumerate(zip(groups, self.action_dims)):
            total += tf.reduce_sum(logp * tf.one_hot(actions[:, i], n, dtype=logp.dtype), axis=-1)
        return total

    def entropy_tf(self, logits, masks=None):
        """Entropy of the masked distribution (batch,): masked choices contribute nothing (TF)."""
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        groups = self._tf_groups(logits, masks)
        mask_groups = self._tf_mask_groups(masks) if masks is not None else [None] * len(groups)
        total = 0.0
        for logp, mask in zip(groups, mask_groups):
            p_log_p = tf.exp(logp) * logp
            if mask is not None:
                p_log_p = tf.where(mask, p_log_p, tf.zeros_like(p_log_p))
            total -= tf.reduce_sum(p_log_p, axis=-1)
        return total

    def mode_tf(self, logits, masks=None):
        """The most likely valid action of each row (int64; scalar per row for Discrete) (TF)."""
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        groups = self._tf_groups(logits, masks)
        modes = [tf.argmax(logp, axis=-1) for logp in groups]
        return modes[0] if self.discrete else tf.stack(modes, axis=-1)

    def probabilities_tf(self, logits, masks=None):
        """The probabilities of every choice, flat like the logits (TF)."""
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        return tf.concat([tf.exp(logp) for logp in self._tf_groups(logits, masks)], axis=-1)

    # ------------------------------------------------------------------ NumPy
    def masked_log_softmax_np(self, logits: np.ndarray, masks: Optional[np.ndarray] = None) -> List[np.ndarray]:
        """The normalised log-probabilities of each component (NumPy, float32)."""
        logits = np.asarray(logits, np.float32)
        if masks is not None:
            logits = np.where(np.asarray(masks, bool).reshape(logits.shape), logits, np.float32(HUGE_NEG))
        out = []
        for start, n in zip(self._offsets, self.action_dims):
            part = logits[:, start:start + n]
            top = part.max(axis=-1, keepdims=True)
            shifted = part - top
            out.append(shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True)))
        return out

    def _masked_np(self, logits: np.ndarray, masks: Optional[np.ndarray]) -> np.ndarray:
        logits = np.asarray(logits, np.float32)
        if masks is None:
            return logits
        return np.where(np.asarray(masks, bool).reshape(logits.shape), logits, np.float32(HUGE_NEG))

    def sample_np(self, logits: np.ndarray, masks: Optional[np.ndarray], rng: np.random.Generator) -> np.ndarray:
        """Sample actions (Gumbel-max over the masked logits: a masked choice is never drawn) (NumPy, int64)."""
        masked = self._masked_np(logits, masks)
        gumbel = -np.log(-np.log(rng.uniform(np.finfo(np.float32).tiny, 1.0, masked.shape)))
        return self._argmax_groups(masked + gumbel)

    def mode_np(self, logits: np.ndarray, masks: Optional[np.ndarray] = None) -> np.ndarray:
        """The most likely valid actions (NumPy, int64)."""
        return self._argmax_groups(self._masked_np(logits, masks))

    def _argmax_groups(self, scores: np.ndarray) -> np.ndarray:
        if self.discrete:
            return scores.argmax(axis=-1).astype(np.int64)
        if self._equal_sizes:
            n = self.action_dims[0]
            return scores.reshape(scores.shape[0], len(self.action_dims), n).argmax(axis=-1).astype(np.int64)
        return np.stack([scores[:, s:s + n].argmax(axis=-1) for s, n in zip(self._offsets, self.action_dims)],
                        axis=-1).astype(np.int64)

    def act_np(self, logits: np.ndarray, masks: Optional[np.ndarray], rng: np.random.Generator,
               deterministic: bool = False):
        """Actions (sampled, or the mode) and their log-probabilities in one pass over the masked logits (NumPy).

        :return: (actions int64, log-probabilities float32)
        """
        masked = self._masked_np(logits, masks)
        if deterministic:
            scores = masked
        else:
            scores = masked - np.log(-np.log(rng.uniform(np.finfo(np.float32).tiny, 1.0, masked.shape)))
        actions = self._argmax_groups(scores)
        if self.discrete:
            top = masked.max(axis=-1, keepdims=True)
            log_norm = top[:, 0] + np.log(np.exp(masked - top).sum(axis=-1))
            log_prob = masked[np.arange(len(masked)), actions] - log_norm
            return actions, log_prob.astype(np.float32)
        return actions, self.log_prob_np(logits, actions, masks)

    def log_prob_np(self, logits: np.ndarray, actions: np.ndarray, masks: Optional[np.ndarray] = None) -> np.ndarray:
        """Log-probabilities of ``actions`` under the masked distribution (NumPy, float32)."""
        groups = self.masked_log_softmax_np(logits, masks)
        actions = np.asarray(actions).reshape(len(groups[0]), len(self.action_dims)).astype(np.int64)
        rows = np.arange(actions.shape[0])
        return np.sum([logp[rows, actions[:, i]] for i, logp in enumerate(groups)], axis=0).astype(np.float32)

    def probabilities_np(self, logits: np.ndarray, masks: Optional[np.ndarray] = None) -> np.ndarray:
        """The probabilities of every choice, flat like the logits (NumPy)."""
        return np.concatenate([np.exp(g) for g in self.masked_log_softmax_np(logits, masks)], axis=-1)

    def check_masks(self, masks: np.ndarray, n_rows: int) -> np.ndarray:
        """``masks`` as a (n_rows, n_logits) boolean array, with an error naming the expected shape."""
        masks = np.asarray(masks)
        if masks.size != n_rows * self.n_logits:
            raise ValueError(f"action_masks has {masks.size} entries ({masks.shape}); expected {n_rows} x "
                             f"{self.n_logits} (one boolean per choice of each action component, flat)")
        return masks.reshape(n_rows, self.n_logits).astype(bool, copy=False)


def make_masked_proba_distribution(action_space: gym.Space) -> MaskableDistribution:
    """The maskable distribution of a Discrete, MultiDiscrete or MultiBinary action space."""
    return MaskableDistribution(action_dims_of(action_space), isinstance(action_space, gym.spaces.Discrete))
