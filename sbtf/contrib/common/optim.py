"""PyTorch's Adam on sbtf's fused Adam kernel (sb3-contrib trains with ``th.optim.Adam``)."""
from __future__ import annotations

from typing import Optional, Sequence

import tensorflow as tf

from sbtf.common.optimizers import Adam


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


def make_optimizer(variables: Sequence, optimizer_class, optimizer_kwargs: Optional[dict], name: str) -> TorchAdam:
    """
    The optimizer a policy's ``optimizer_class`` / ``optimizer_kwargs`` ask for (sb3-contrib's names).

    :param variables: the variables to optimize
    :param optimizer_class: None, ``"Adam"`` or :class:`TorchAdam` (PyTorch's Adam, sb3-contrib's default)
    :param optimizer_kwargs: ``eps``, ``betas`` (``weight_decay=0`` and ``amsgrad=False`` are accepted)
    :param name: name of the optimizer's slots
    """
    if optimizer_class not in (None, "Adam", TorchAdam):
        raise ValueError(f"Error: optimizer_class {optimizer_class!r} is not supported; sbtf's contrib algorithms "
                         "train with Adam (optimizer_class=None or 'Adam'; set its eps and betas in optimizer_kwargs).")
    kwargs = dict(optimizer_kwargs or {})
    if kwargs.pop("weight_decay", 0) not in (0, 0.0):
        raise ValueError("Error: optimizer_kwargs weight_decay is not supported (sbtf's Adam has none).")
    if kwargs.pop("amsgrad", False):
        raise ValueError("Error: optimizer_kwargs amsgrad=True is not supported (sbtf's Adam is plain Adam).")
    unknown = sorted(set(kwargs) - {"eps", "betas"})
    if unknown:
        raise ValueError(f"Error: unknown optimizer_kwargs {unknown}; Adam takes eps and betas.")
    return TorchAdam(variables, name=name, **kwargs)


__all__ = ["TorchAdam", "make_optimizer"]
