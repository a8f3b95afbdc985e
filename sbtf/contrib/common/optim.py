"""The optimizer of the contrib algorithms: PyTorch's Adam (sb3-contrib trains with ``th.optim.Adam``), which is
:class:`sbtf.common.optimizers.TorchAdam` (importable from here too)."""
from __future__ import annotations

from typing import Optional, Sequence

from sbtf.common.optimizers import TorchAdam


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
