"""Small optimizers with TensorFlow 1 semantics, usable inside ``tf.function`` loops.

stable-baselines 2.x trained with ``tf.train.AdamOptimizer`` and ``tf.train.RMSPropOptimizer``;
these reproduce their update rules exactly (RMSProp's mean-square accumulator starts at 1 and
epsilon sits inside the square root, as in TF1) and expose ``apply(grads, learning_rate)`` so a
whole minibatch loop can run in one compiled call.
"""
from __future__ import annotations

from typing import Optional, Sequence

import tensorflow as tf

from sbtf.common.tf_util import flat_size, flatten_tensors, unflatten_tensor


def _zeros_like_var(var, name: str, init: float = 0.0) -> tf.Variable:
    return tf.Variable(tf.fill(var.shape, tf.constant(init, dtype=var.dtype)), trainable=False, name=name)


class Adam(tf.Module):
    """
    Adam (``tf.train.AdamOptimizer``): ``lr_t = lr * sqrt(1 - b2^t) / (1 - b1^t)``,
    ``var -= lr_t * m / (sqrt(v) + epsilon)``.

    :param fused: (bool) True: TF1's fused ``ResourceApplyAdam`` kernel, one slot pair per variable (what
        ``tf.train.AdamOptimizer`` ran for stable-baselines 2's A2C, PPO2, DQN, SAC, TD3). False: stable-baselines 2's
        ``MpiAdam`` (DDPG, PPO1, TRPO, GAIL) on one flat vector: the bias-corrected step size in float64,
        ``m = b1*m + (1-b1)*g``, ``v = b2*v + (1-b2)*g^2``, ``var += -step_size * m / (sqrt(v) + epsilon)`` (missing
        gradients count as zeros). Same maths, other rounding: the learning runs of those algorithms (DDPG's adaptive
        parameter noise in particular) depend on it.
    """

    def __init__(self, variables: Sequence, beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-8,
                 name: str = "Adam", fused: bool = True):
        super().__init__(name=name)
        self.variables_ = list(variables)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.fused = bool(fused)
        if self.fused:
            self.m = [_zeros_like_var(v, "m") for v in self.variables_]
            self.v = [_zeros_like_var(v, "v") for v in self.variables_]
        else:  # one flat slot pair (first and second moments of the flat gradient), as SB2's MpiAdam
            size = flat_size(self.variables_)
            self.m = [tf.Variable(tf.zeros((size,), tf.float32), trainable=False, name="m")]
            self.v = [tf.Variable(tf.zeros((size,), tf.float32), trainable=False, name="v")]
        self.t = tf.Variable(0.0, trainable=False, name="t")

    def apply(self, grads: Sequence[Optional[tf.Tensor]], learning_rate) -> None:
        """One Adam step with one gradient per variable (None: no gradient)."""
        if not self.fused:
            self.apply_flat(flatten_tensors(grads, self.variables_), learning_rate)
            return
        t = self.t.assign_add(1.0)
        beta1_power = tf.pow(tf.constant(self.beta1, tf.float32), t)
        beta2_power = tf.pow(tf.constant(self.beta2, tf.float32), t)
        lr = tf.cast(learning_rate, tf.float32)
        beta1 = tf.constant(self.beta1, tf.float32)
        beta2 = tf.constant(self.beta2, tf.float32)
        epsilon = tf.constant(self.epsilon, tf.float32)
        for var, grad, m, v in zip(self.variables_, grads, self.m, self.v):
            if grad is None:
                continue
            # the fused TF1 kernel: one op per variable instead of eight
            tf.raw_ops.ResourceApplyAdam(var=var.handle, m=m.handle, v=v.handle, beta1_power=beta1_power,
                                         beta2_power=beta2_power, lr=lr, beta1=beta1, beta2=beta2, epsilon=epsilon,
                                         grad=grad)

    def apply_flat(self, flat_grad: tf.Tensor, learning_rate) -> None:
        """One Adam step with the gradients of all variables as one flat vector (in ``variables`` order)."""
        if self.fused:
            self.apply(unflatten_tensor(tf.cast(flat_grad, tf.float32), self.variables_), learning_rate)
            return
        # stable-baselines 2's MpiAdam.update, in its op order
        t = tf.cast(self.t.assign_add(1.0), tf.float64)
        step_size = (tf.cast(learning_rate, tf.float64) * tf.sqrt(1.0 - tf.pow(tf.constant(self.beta2, tf.float64), t))
                     / (1.0 - tf.pow(tf.constant(self.beta1, tf.float64), t)))
        grad = tf.cast(flat_grad, tf.float32)
        m = self.m[0].assign(self.beta1 * self.m[0] + (1.0 - self.beta1) * grad)
        v = self.v[0].assign(self.beta2 * self.v[0] + (1.0 - self.beta2) * tf.square(grad))
        step = -tf.cast(step_size, tf.float32) * m / (tf.sqrt(v) + self.epsilon)
        for var, value in zip(self.variables_, unflatten_tensor(step, self.variables_)):
            var.assign_add(value)

    def reset(self) -> None:
        for slot in self.m + self.v:
            slot.assign(tf.zeros_like(slot))
        self.t.assign(0.0)


class TorchAdam(Adam):
    """
    ``torch.optim.Adam``: ``var -= lr / (1 - b1^t) * m / (sqrt(v / (1 - b2^t)) + eps)``.

    TF1's kernel computes ``lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)``, which is PyTorch's step when
    its epsilon is ``eps * sqrt(1 - b2^t)``; this class passes that epsilon, so the two agree for any ``eps`` (QR-DQN
    uses ``eps = 0.01 / batch_size``, where the difference is not negligible).

    :param variables: the variables to optimize
    :param eps: PyTorch's epsilon
    :param betas: (beta1, beta2)
    :param name: name of the optimizer's slots
    """

    def __init__(self, variables: Sequence, eps: float = 1e-8, betas: Sequence[float] = (0.9, 0.999),
                 name: str = "Adam"):
        super().__init__(variables, beta1=float(betas[0]), beta2=float(betas[1]), epsilon=float(eps), name=name)

    def apply(self, grads: Sequence[Optional[tf.Tensor]], learning_rate) -> None:
        t = self.t.assign_add(1.0)
        beta1 = tf.constant(self.beta1, tf.float32)
        beta2 = tf.constant(self.beta2, tf.float32)
        beta1_power = tf.pow(beta1, t)
        beta2_power = tf.pow(beta2, t)
        lr = tf.cast(learning_rate, tf.float32)
        epsilon = tf.constant(self.epsilon, tf.float32) * tf.sqrt(1.0 - beta2_power)
        for var, grad, m, v in zip(self.variables_, grads, self.m, self.v):
            if grad is None:
                continue
            tf.raw_ops.ResourceApplyAdam(var=var.handle, m=m.handle, v=v.handle, beta1_power=beta1_power,
                                         beta2_power=beta2_power, lr=lr, beta1=beta1, beta2=beta2, epsilon=epsilon,
                                         grad=grad)


class RMSProp(tf.Module):
    """
    RMSProp (``tf.train.RMSPropOptimizer``): ``ms = decay*ms + (1-decay)*g^2`` (ms starts at 1),
    ``mom = momentum*mom + lr*g/sqrt(ms + epsilon)``, ``var -= mom``.
    """

    #: the starting value of the mean-square accumulator
    initial_mean_square = 1.0

    def __init__(self, variables: Sequence, decay: float = 0.99, epsilon: float = 1e-10, momentum: float = 0.0,
                 name: str = "RMSProp"):
        super().__init__(name=name)
        self.variables_ = list(variables)
        self.decay = decay
        self.epsilon = epsilon
        self.momentum = momentum
        self.ms = [_zeros_like_var(v, "ms", self.initial_mean_square) for v in self.variables_]
        self.mom = [_zeros_like_var(v, "mom") for v in self.variables_]

    def apply(self, grads: Sequence[Optional[tf.Tensor]], learning_rate) -> None:
        lr = tf.cast(learning_rate, tf.float32)
        rho = tf.constant(self.decay, tf.float32)
        momentum = tf.constant(self.momentum, tf.float32)
        epsilon = tf.constant(self.epsilon, tf.float32)
        for var, grad, ms, mom in zip(self.variables_, grads, self.ms, self.mom):
            if grad is None:
                continue
            # the fused TF1 kernel (epsilon inside the square root, ms starting at 1)
            tf.raw_ops.ResourceApplyRMSProp(var=var.handle, ms=ms.handle, mom=mom.handle, lr=lr, rho=rho,
                                            momentum=momentum, epsilon=epsilon, grad=grad)


class TorchStyleRMSProp(RMSProp):
    """
    RMSProp as PyTorch's ``torch.optim.RMSprop`` (the optimizer of stable-baselines3's A2C):
    ``v = alpha*v + (1-alpha)*g^2`` (v starts at 0), ``buf = momentum*buf + g/(sqrt(v) + epsilon)``,
    ``var -= lr*buf`` (the momentum buffer is unused when momentum is 0). Epsilon sits outside the square root, so
    early steps are larger than with TF1's RMSProp (mean square starting at 1, epsilon inside the root).
    """

    initial_mean_square = 0.0

    def __init__(self, variables: Sequence, decay: float = 0.99, epsilon: float = 1e-8, momentum: float = 0.0,
                 name: str = "TorchStyleRMSProp"):
        super().__init__(variables, decay=decay, epsilon=epsilon, momentum=momentum, name=name)

    def apply(self, grads: Sequence[Optional[tf.Tensor]], learning_rate) -> None:
        lr = tf.cast(learning_rate, tf.float32)
        if not self.momentum:
            self._apply_fused(grads, lr)
            return
        for var, grad, ms, mom in zip(self.variables_, grads, self.ms, self.mom):
            if grad is None:
                continue
            grad = tf.convert_to_tensor(grad)
            new_ms = ms.assign(self.decay * ms + (1.0 - self.decay) * tf.square(grad))
            step = grad / (tf.sqrt(new_ms) + self.epsilon)
            if self.momentum:
                step = mom.assign(self.momentum * mom + step)
            var.assign_sub(lr * step)

    def _apply_fused(self, grads: Sequence[Optional[tf.Tensor]], lr: tf.Tensor) -> None:
        """Without momentum, one fused kernel per variable (instead of about ten ops): TF's Adam kernel with
        ``beta1 = 0`` and both bias-correction powers 0 is exactly this rule (``m = g``, ``v = alpha*v +
        (1-alpha)*g^2``, ``var -= lr*m/(sqrt(v) + epsilon)``); the unused momentum buffer holds ``m``."""
        zero = tf.constant(0.0, tf.float32)
        alpha = tf.constant(self.decay, tf.float32)
        epsilon = tf.constant(self.epsilon, tf.float32)
        for var, grad, ms, mom in zip(self.variables_, grads, self.ms, self.mom):
            if grad is None:
                continue
            tf.raw_ops.ResourceApplyAdam(var=var.handle, m=mom.handle, v=ms.handle, beta1_power=zero,
                                         beta2_power=zero, lr=lr, beta1=zero, beta2=alpha, epsilon=epsilon, grad=grad)


def make_rmsprop(style: str, variables: Sequence, decay: float, epsilon: float, momentum: float) -> tf.Module:
    """The RMSProp of ``style``: ``"tf"`` (SB2's ``tf.train.RMSPropOptimizer``) or ``"torch"`` (SB3's default)."""
    cls = RMSProp if check_rms_prop_style(style) == "tf" else TorchStyleRMSProp
    return cls(variables, decay=decay, epsilon=epsilon, momentum=momentum)


def check_rms_prop_style(style: str) -> str:
    """``style`` if it names an RMSProp flavour, else a ValueError saying which ones exist."""
    if style not in ("tf", "torch"):
        raise ValueError(f"rms_prop_style must be 'tf' (stable-baselines 2's TF1 RMSProp, the default) or 'torch' "
                         f"(PyTorch's RMSprop, as stable-baselines3's A2C uses), got {style!r}")
    return style


def clip_grads(grads: Sequence[tf.Tensor], max_grad_norm: Optional[float]):
    """``tf.clip_by_global_norm`` when ``max_grad_norm`` is set; returns (grads, global norm)."""
    if max_grad_norm is None:
        return list(grads), tf.linalg.global_norm([g for g in grads if g is not None])
    clipped, norm = tf.clip_by_global_norm(grads, max_grad_norm)
    return clipped, norm
