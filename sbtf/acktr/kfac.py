"""K-FAC optimizer (Kronecker-factored approximate curvature) for TensorFlow 2, as used by ACKTR.

stable-baselines 2.x found the layers of a network by searching the TF1 graph for the ``MatMul``/``Conv2D``/
``BiasAdd`` ops behind each gradient. TF2 has no graph to search, so here the optimizer is told which Keras
layers to factor (``Linear`` -> dense factors, ``Conv`` -> convolution factors; every other variable gets the
plain gradient) and records their inputs and outputs while the sampled Fisher loss is computed:

    kfac = KfacOptimizer(variables, layers, clip_kl=..., momentum=0.9, ...)
    # inside the compiled train step
    with kfac.record() as recorder, tf.GradientTape(persistent=True) as tape:
        loss, fisher_loss = ...           # forward pass through the recorded layers
    grads = tape.gradient(loss, variables)
    kfac.step(grads, fisher_loss, tape, recorder, learning_rate)

What one ``step`` does (SB2 ``KfacOptimizer`` semantics):

1. Kronecker factors of every recorded layer from the sampled Fisher loss (see ``kfac_utils``): for
   ``s = a W + b``, ``A = E[[a,1][a,1]^T]`` and ``G = E[g g^T]`` with ``g`` the per-sample gradient of the loss
   w.r.t. ``s``. They enter running statistics: for the first ``stats_accum_iter`` (= ``cold_iter``) steps a plain
   average, then an exponential moving average with ``stats_decay``.
2. Every ``kfac_update`` steps (once the statistics are warm) the eigen-decompositions ``A = Q_A d_A Q_A^T``,
   ``G = Q_G d_G Q_G^T`` are recomputed (eigenvalues below 1e-6 count as 0).
3. During the first ``cold_iter`` updates the parameters follow momentum SGD on the gradient clipped to
   ``max_grad_norm`` ("cold start", learning rate ``cold_lr``). Afterwards the gradient of each factored layer
   (weights and bias stacked as ``[W; b]``) is preconditioned,
   ``Q_A [(Q_A^T grad Q_G) / (d_A d_G^T + epsilon)] Q_G^T`` (= ``(A (x) G + epsilon)^-1 vec(grad)``), other
   variables keep their gradient, the whole update ``u`` is scaled by ``min(1, sqrt(clip_kl / (lr^2 u.grad)))``
   (KL clipping) and applied with momentum: ``acc = momentum * acc + u``, ``var -= lr * (1 - momentum) * acc``.

``async_eigen_decomp=True`` is accepted for SB2 compatibility, but the eigen-decomposition always runs
synchronously inside the train step (see ``docs/acer_acktr.md``): a background thread would read statistics
that the compiled train step is updating at the same time, and at the sizes used here (a few 65x65 matrices) the
decomposition costs far less than a thread hand-off.
"""
from __future__ import annotations

import warnings
from typing import Iterable, Optional, Sequence

import tensorflow as tf

from sbtf.acktr.kfac_utils import conv_factors, dense_factors, detect_min_val, kronecker_precondition
from sbtf.common.tf_layers import Conv, Linear

KFAC_OPS = ("dense", "conv")
KFAC_DEBUG = False


class FactoredBlock:
    """
    One factored layer: its weight (and bias) and the statistics / eigen-decomposition variables.

    :param index: (int) position among the optimizer's blocks
    :param layer: (keras.layers.Layer) the ``Linear`` or ``Conv`` layer
    :param weight_index: (int) index of the weight among the optimizer's variables
    :param bias_index: (int or None) index of the bias among the optimizer's variables
    """

    def __init__(self, index: int, layer, weight_index: int, bias_index: Optional[int]):
        self.index = index
        self.layer = layer
        self.weight_index = weight_index
        self.bias_index = bias_index
        self.kind = "conv" if isinstance(layer, Conv) else "dense"
        weight = layer.w
        if self.kind == "conv":
            kh, kw, c_in, c_out = (int(d) for d in weight.shape)
            self.kernel_size = (kh, kw)
            self.a_dim = kh * kw * c_in
            self.g_dim = c_out
        else:
            self.kernel_size = None
            self.a_dim = int(weight.shape[0])
            self.g_dim = int(weight.shape[1])
        if bias_index is not None:
            self.a_dim += 1
        scope = getattr(layer, "scope", layer.name)
        self.name = scope
        # statistics start at 0 (SB2's _diag_init_coeff = 0); eigenvalues at 1, eigenvectors at I
        self.a_stats = tf.Variable(tf.zeros((self.a_dim, self.a_dim)), trainable=False, name=f"KFAC_STATS/{scope}/A")
        self.g_stats = tf.Variable(tf.zeros((self.g_dim, self.g_dim)), trainable=False, name=f"KFAC_STATS/{scope}/G")
        self.a_eig = tf.Variable(tf.ones((self.a_dim,)), trainable=False, name=f"KFAC_FAC/{scope}/A/e")
        self.a_vec = tf.Variable(tf.eye(self.a_dim), trainable=False, name=f"KFAC_FAC/{scope}/A/Q")
        self.g_eig = tf.Variable(tf.ones((self.g_dim,)), trainable=False, name=f"KFAC_FAC/{scope}/G/e")
        self.g_vec = tf.Variable(tf.eye(self.g_dim), trainable=False, name=f"KFAC_FAC/{scope}/G/Q")

    @property
    def has_bias(self) -> bool:
        return self.bias_index is not None

    def factors(self, inputs: Sequence[tf.Tensor], output_grads: Sequence[tf.Tensor]):
        """(A, G) of one batch (see ``kfac_utils.dense_factors`` / ``conv_factors``)."""
        if self.kind == "conv":
            return conv_factors(inputs, output_grads, self.kernel_size, self.layer.stride, self.layer.pad,
                                has_bias=self.has_bias)
        return dense_factors(inputs, output_grads, has_bias=self.has_bias)

    def stack_grad(self, grad_w, grad_b):
        """The gradient as a (a_dim, g_dim) matrix: ``[W; b]`` (conv kernels flattened to (kh*kw*C, F))."""
        mat = tf.reshape(grad_w, (-1, self.g_dim))
        if self.has_bias:
            mat = tf.concat([mat, tf.reshape(grad_b, (1, self.g_dim))], axis=0)
        return mat

    def unstack_grad(self, mat, weight_shape, bias_shape):
        if self.has_bias:
            return tf.reshape(mat[:-1], weight_shape), tf.reshape(mat[-1], bias_shape)
        return tf.reshape(mat, weight_shape), None


class LayerRecorder:
    """
    Context manager that records ``(inputs, outputs)`` of every call of the given Keras layers.

    It replaces each layer's ``call`` by a recording wrapper for the duration of the ``with`` block (Python
    level, so inside ``tf.function`` it acts while the function is traced). The recorded outputs are the
    layer's pre-activation outputs ``s``; a ``GradientTape`` that watched the forward pass gives ``dL/ds``.
    """

    def __init__(self, layers: Iterable):
        self.layers = list(layers)
        self.calls: dict[int, list] = {id(layer): [] for layer in self.layers}
        self._saved: list = []

    def __enter__(self) -> "LayerRecorder":
        for layer in self.layers:
            had_own = "call" in layer.__dict__
            original = layer.call
            self._saved.append((layer, had_own, layer.__dict__.get("call")))
            store = self.calls[id(layer)]

            def recording_call(inputs, *args, _original=original, _store=store, **kwargs):
                outputs = _original(inputs, *args, **kwargs)
                _store.append((inputs, outputs))
                return outputs

            layer.call = recording_call
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        for layer, had_own, previous in reversed(self._saved):
            if had_own:
                layer.call = previous
            else:
                del layer.call
        self._saved = []

    def calls_of(self, layer) -> list:
        """The recorded ``(inputs, outputs)`` pairs of ``layer`` (in call order)."""
        return self.calls.get(id(layer), [])


def factored_layers(model) -> list:
    """The layers of an sbtf policy (or any Keras model) that K-FAC factors: ``Linear`` and ``Conv`` layers."""
    layers = getattr(model, "_ordered_layers", None)
    if layers is None:
        layers = model._flatten_layers(include_self=False, recursive=True)  # pylint: disable=protected-access
    return [layer for layer in layers if isinstance(layer, (Linear, Conv))]


class KfacOptimizer(tf.Module):
    """
    K-FAC optimizer for ACKTR models, https://arxiv.org/abs/1708.05144 (SB2 ``KfacOptimizer`` semantics).

    :param variables: ([tf.Variable]) the parameters to optimise
    :param layers: ([keras.layers.Layer]) layers whose weights are factored (``Linear``, ``Conv``; others ignored)
    :param learning_rate: (float) learning rate used when ``apply_gradients`` gets none
    :param momentum: (float) the momentum value
    :param clip_kl: (float) KL clipping: the update is scaled so that ``lr^2 u.grad <= clip_kl``
    :param kfac_update: (int) recompute the eigen-decompositions every ``kfac_update`` steps
    :param cold_iter: (int) number of plain momentum-SGD steps before K-FAC updates; also the number of steps
        over which the first statistics are averaged
    :param cold_lr: (float) learning rate of the cold start (None: the learning rate of each step)
    :param async_eigen_decomp: (bool) accepted for SB2 compatibility; computed synchronously (module docstring)
    :param epsilon: (float) damping added to the eigenvalue products
    :param stats_decay: (float) decay of the running averages of the factors
    :param max_grad_norm: (float) gradient clipping (global norm) during the cold start
    :param verbose: (int) verbosity level
    """

    def __init__(self, variables: Sequence[tf.Variable], layers: Iterable = (), learning_rate: float = 0.01,
                 momentum: float = 0.9, clip_kl: float = 0.01, kfac_update: int = 2, cold_iter: int = 100,
                 cold_lr: Optional[float] = None, async_eigen_decomp: bool = False, epsilon: float = 1e-2,
                 stats_decay: float = 0.95, max_grad_norm: Optional[float] = 0.5, verbose: int = 1,
                 name: str = "KFAC"):
        super().__init__(name=name)
        if int(kfac_update) < 1:
            raise ValueError(f"kfac_update must be >= 1, got {kfac_update}")
        self.variables_ = list(variables)
        self._lr = learning_rate
        self._momentum = float(momentum)
        self._clip_kl = float(clip_kl)
        self._kfac_update = int(kfac_update)
        self._cold_iter = int(cold_iter)
        self._cold_lr = cold_lr
        self._async_eigen_decomp = bool(async_eigen_decomp)
        self._epsilon = float(epsilon)
        self._stats_decay = float(stats_decay)
        self._stats_accum_iter = int(cold_iter)
        self.max_grad_norm = max_grad_norm
        self.verbose = verbose
        if self._async_eigen_decomp and verbose >= 1:
            warnings.warn("async_eigen_decomp=True: sbtf computes the K-FAC eigen-decomposition synchronously "
                          "inside the train step (same updates, no background thread).")

        index = {id(var): i for i, var in enumerate(self.variables_)}
        self.blocks: list[FactoredBlock] = []
        for layer in layers:
            if not isinstance(layer, (Linear, Conv)):
                continue
            w_idx = index.get(id(layer.w))
            if w_idx is None:
                continue
            b_idx = index.get(id(layer.b)) if getattr(layer, "b", None) is not None else None
            self.blocks.append(FactoredBlock(len(self.blocks), layer, w_idx, b_idx))
        factored = set()
        for block in self.blocks:
            factored.add(block.weight_index)
            if block.has_bias:
                factored.add(block.bias_index)
        #: indices of variables updated with their plain gradient (not factored)
        self.plain_indices = [i for i in range(len(self.variables_)) if i not in factored]

        self.global_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="KFAC/global_step")
        self.sgd_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="KFAC/sgd_step")
        self.cold_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="KFAC/cold_step")
        self.factor_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="KFAC/factor_step")
        self.stats_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="KFAC/stats_step")
        self.v_f_v = tf.Variable(0.0, trainable=False, name="KFAC/vFv")
        self._accum = [tf.Variable(tf.zeros(v.shape, tf.float32), trainable=False, name="KFAC/momentum")
                       for v in self.variables_]
        self._cold_accum = [tf.Variable(tf.zeros(v.shape, tf.float32), trainable=False, name="KFAC/cold_momentum")
                            for v in self.variables_]

    # ------------------------------------------------------------------ recording and statistics
    def record(self) -> LayerRecorder:
        """A ``LayerRecorder`` for the factored layers (wrap the forward pass of the Fisher loss in it)."""
        return LayerRecorder([block.layer for block in self.blocks])

    def compute_stats(self, loss_sampled, tape: tf.GradientTape, recorder: LayerRecorder) -> dict:
        """
        The Kronecker factors of one batch.

        :param loss_sampled: (tf.Tensor) the sampled Fisher loss (a batch mean), computed under ``tape``
        :param tape: (tf.GradientTape) a tape that recorded the forward pass (persistent if reused)
        :param recorder: (LayerRecorder) the recorder active during the forward pass
        :return: ({int: (tf.Tensor, tf.Tensor)}) block index -> (A, G); blocks not reached by the loss are absent
        """
        entries = []
        outputs = []
        for block in self.blocks:
            calls = recorder.calls_of(block.layer)
            if calls:
                entries.append((block, len(outputs), len(calls)))
                outputs.extend(out for _, out in calls)
        if not outputs:
            return {}
        out_grads = tape.gradient(loss_sampled, outputs)
        stats = {}
        for block, start, count in entries:
            calls = recorder.calls_of(block.layer)
            pairs = [(calls[k][0], out_grads[start + k]) for k in range(count) if out_grads[start + k] is not None]
            if not pairs:
                continue
            stats[block.index] = block.factors([p[0] for p in pairs], [p[1] for p in pairs])
        return stats

    def apply_stats(self, stats: dict) -> None:
        """Fold one batch of factors into the running statistics (plain average first, then moving average)."""
        accumulate = self.stats_step < self._stats_accum_iter
        decay = self._stats_decay
        for index, (cov_a, cov_g) in stats.items():
            block = self.blocks[index]
            for var, new in ((block.a_stats, cov_a), (block.g_stats, cov_g)):
                var.assign(tf.where(accumulate, var + new / float(self._stats_accum_iter),
                                    var * decay + (1.0 - decay) * new))
        self.stats_step.assign_add(1)

    def compute_and_apply_stats(self, loss_sampled, tape, recorder) -> dict:
        """``compute_stats`` then ``apply_stats``; returns the batch factors."""
        stats = self.compute_stats(loss_sampled, tape, recorder)
        self.apply_stats(stats)
        return stats

    def compute_stats_eigen(self, indices: Sequence[int]) -> list:
        """
        Eigen-decompositions ``((d_A, Q_A), (d_G, Q_G))`` of the statistics of the given blocks (not assigned).
        Matrices of the same size are decomposed in one batched call.
        """
        mats = []
        for index in indices:
            block = self.blocks[index]
            mats.extend([block.a_stats, block.g_stats])
        by_size: dict[int, list[int]] = {}
        for k, mat in enumerate(mats):
            by_size.setdefault(int(mat.shape[0]), []).append(k)
        results: list = [None] * len(mats)
        for members in by_size.values():
            if len(members) == 1:
                results[members[0]] = tf.linalg.eigh(mats[members[0]])
                continue
            eig_vals, eig_vecs = tf.linalg.eigh(tf.stack([tf.convert_to_tensor(mats[k]) for k in members]))
            for j, k in enumerate(members):
                results[k] = (eig_vals[j], eig_vecs[j])
        return [(results[2 * i], results[2 * i + 1]) for i in range(len(indices))]

    def apply_stats_eigen(self, indices: Sequence[int], eigen_list: list) -> None:
        for index, ((a_e, a_q), (g_e, g_q)) in zip(indices, eigen_list):
            block = self.blocks[index]
            block.a_eig.assign(a_e)
            block.a_vec.assign(a_q)
            block.g_eig.assign(g_e)
            block.g_vec.assign(g_q)
        self.factor_step.assign_add(1)

    def update_stats_eigen(self, indices: Optional[Sequence[int]] = None):
        """Recompute the eigen-decompositions when due (every ``kfac_update`` steps once the stats are warm)."""
        if indices is None:
            indices = [block.index for block in self.blocks]
        indices = list(indices)
        due = tf.logical_and(tf.equal(self.stats_step % self._kfac_update, 0),
                             self.stats_step >= self._stats_accum_iter)

        def _update():
            self.apply_stats_eigen(indices, self.compute_stats_eigen(indices))
            return tf.constant(True)

        def _skip():
            self.cold_step.assign_add(1)
            return tf.constant(False)

        return tf.cond(due, _update, _skip)

    # ------------------------------------------------------------------ updates
    def get_kfac_precond_updates(self, grads: Sequence[Optional[tf.Tensor]], learning_rate) -> list:
        """
        Preconditioned, KL-clipped updates (None where ``grads`` is None).

        :param grads: ([tf.Tensor or None]) gradients of the loss, aligned with the optimizer's variables
        :param learning_rate: (float or tf.Tensor) the learning rate (enters the KL clipping)
        """
        lr = tf.cast(learning_rate, tf.float32)
        updates = list(grads)
        for block in self.blocks:
            grad_w = grads[block.weight_index]
            if grad_w is None:
                continue
            grad_b = grads[block.bias_index] if block.has_bias else None
            if block.has_bias and grad_b is None:
                grad_b = tf.zeros_like(self.variables_[block.bias_index])
            mat = block.stack_grad(grad_w, grad_b)
            eig_a = detect_min_val(block.a_eig, block.layer, name="act", debug=KFAC_DEBUG)
            eig_g = detect_min_val(block.g_eig, block.layer, name="grad", debug=KFAC_DEBUG)
            mat = kronecker_precondition(mat, eig_a, block.a_vec, eig_g, block.g_vec, self._epsilon)
            new_w, new_b = block.unstack_grad(mat, self.variables_[block.weight_index].shape,
                                              self.variables_[block.bias_index].shape if block.has_bias else None)
            updates[block.weight_index] = new_w
            if block.has_bias:
                updates[block.bias_index] = new_b
        v_g = tf.constant(0.0)
        for update, grad in zip(updates, grads):
            if grad is not None:
                v_g += tf.reduce_sum(update * grad) * lr * lr
        self.v_f_v.assign(v_g)
        scaling = tf.minimum(1.0, tf.sqrt(self._clip_kl / tf.maximum(v_g, 1e-30)))
        return [None if (u is None or g is None) else scaling * u for u, g in zip(updates, grads)]

    def _momentum_apply(self, accums, updates, lr) -> None:
        momentum = tf.constant(self._momentum, tf.float32)
        for var, acc, update in zip(self.variables_, accums, updates):
            if update is None:
                continue
            # TF1 MomentumOptimizer: acc = momentum * acc + update; var -= lr * acc
            tf.raw_ops.ResourceApplyMomentum(var=var.handle, accum=acc.handle, lr=lr, grad=update,
                                             momentum=momentum)

    def apply_gradients_kfac(self, grads: Sequence[Optional[tf.Tensor]], learning_rate) -> None:
        """The K-FAC update (raw gradients until the first eigen-decomposition exists)."""
        lr = tf.cast(learning_rate, tf.float32)
        present = [i for i, g in enumerate(grads) if g is not None]

        def _precond():
            updates = self.get_kfac_precond_updates(grads, lr)
            return [updates[i] for i in present]

        def _raw():
            return [tf.identity(grads[i]) for i in present]

        chosen = tf.cond(self.factor_step > 0, _precond, _raw)
        updates: list = [None] * len(grads)
        for i, update in zip(present, chosen):
            updates[i] = update
        self._momentum_apply(self._accum, updates, lr * (1.0 - self._momentum))

    def _cold_sgd(self, grads: Sequence[Optional[tf.Tensor]], cold_lr) -> None:
        present = [i for i, g in enumerate(grads) if g is not None]
        sgd_grads = [grads[i] for i in present]
        if self.max_grad_norm is not None:
            sgd_grads, _ = tf.clip_by_global_norm(sgd_grads, self.max_grad_norm)
        updates: list = [None] * len(grads)
        for i, grad in zip(present, sgd_grads):
            updates[i] = grad
        self._momentum_apply(self._cold_accum, updates, tf.cast(cold_lr, tf.float32))
        self.sgd_step.assign_add(1)

    def apply_gradients(self, grads: Sequence[Optional[tf.Tensor]], learning_rate=None) -> None:
        """
        One parameter update: cold-start momentum SGD for the first ``cold_iter`` steps, K-FAC afterwards.

        :param grads: ([tf.Tensor or None]) gradients aligned with the optimizer's variables
        :param learning_rate: (float or tf.Tensor) this step's learning rate (None: the constructor's)
        """
        lr = tf.cast(self._lr if learning_rate is None else learning_rate, tf.float32)
        cold_lr = lr if self._cold_lr is None else tf.constant(self._cold_lr, tf.float32)

        def _warm():
            self.apply_gradients_kfac(grads, lr)
            return tf.constant(True)

        def _cold():
            self._cold_sgd(grads, cold_lr)
            return tf.constant(False)

        return tf.cond(self.sgd_step < self._cold_iter, _cold, _warm)

    def step(self, grads: Sequence[Optional[tf.Tensor]], loss_sampled, tape: tf.GradientTape,
             recorder: LayerRecorder, learning_rate=None):
        """
        Statistics, eigen-decomposition (when due) and parameter update for one batch, in SB2's order.

        :return: (tf.Tensor) True when the update was a K-FAC (warm) update
        """
        self.global_step.assign_add(1)
        stats = self.compute_and_apply_stats(loss_sampled, tape, recorder)
        self.update_stats_eigen(sorted(stats))
        return self.apply_gradients(grads, learning_rate)


__all__ = ["KfacOptimizer", "LayerRecorder", "FactoredBlock", "factored_layers", "KFAC_OPS"]
