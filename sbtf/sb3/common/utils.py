"""stable-baselines3's ``common.utils`` names that mean something on TensorFlow: seeding, the (CPU-only) device,
schedules, run ids and the small numeric helpers. PyTorch-only helpers (``obs_as_tensor``, ``update_learning_rate``,
``get_parameters_by_name``) have no counterpart."""
from __future__ import annotations

import glob
import os
import random
from typing import Callable, Union

import numpy as np

from sbtf.common.math_util import explained_variance, safe_mean
from sbtf.common.schedules import get_schedule_fn
from sbtf.common.algo.sb3_api import Device, current_device, get_system_info

__all__ = ["set_random_seed", "get_device", "Device", "get_latest_run_id", "get_schedule_fn", "get_linear_fn",
           "constant_fn", "ConstantSchedule", "FloatSchedule", "LinearSchedule", "safe_mean", "explained_variance",
           "get_system_info"]


def set_random_seed(seed: int, using_cuda: bool = False) -> None:
    """
    Seed Python's ``random``, NumPy and TensorFlow.

    :param seed: (int) the seed
    :param using_cuda: (bool) ignored (TensorFlow's GPU ops are seeded with the rest)
    """
    del using_cuda
    import tensorflow as tf

    random.seed(seed)
    np.random.seed(seed)
    tf.random.set_seed(seed)


def get_device(device: Union[str, Device] = "auto") -> Device:
    """
    SB3's ``get_device``: ``"auto"`` is ``"cuda"`` when TensorFlow sees a GPU, else ``"cpu"``; ``"cuda"`` without a
    GPU falls back to ``"cpu"`` as SB3 does.

    :param device: (str or Device) ``"auto"``, ``"cpu"``, ``"cuda"`` or ``"cuda:N"``
    """
    kind = device.type if isinstance(device, Device) else str(device).split(":")[0]
    if kind not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device {device!r} is not one of 'auto', 'cpu', 'cuda': TensorFlow places the variables")
    if kind == "cpu":
        return Device("cpu")
    return current_device()


def get_latest_run_id(log_path: str = "", log_name: str = "") -> int:
    """
    The highest ``N`` of the folders ``{log_path}/{log_name}_N`` (0 when there is none).

    :param log_path: (str) the parent folder
    :param log_name: (str) the run name
    """
    best = 0
    for path in glob.glob(os.path.join(log_path, f"{glob.escape(log_name)}_[0-9]*")):
        head, _, tail = os.path.basename(path).rpartition("_")
        if head == log_name and tail.isdigit():
            best = max(best, int(tail))
    return best


class FloatSchedule:
    """A schedule that always returns a float: wraps a number or a function of the progress remaining."""

    def __init__(self, value_schedule: Union[float, Callable[[float], float], "FloatSchedule"]) -> None:
        if isinstance(value_schedule, FloatSchedule):
            self.value_schedule = value_schedule.value_schedule
        elif isinstance(value_schedule, (float, int)):
            self.value_schedule = ConstantSchedule(float(value_schedule))
        elif callable(value_schedule):
            self.value_schedule = value_schedule
        else:
            raise TypeError(f"a schedule is a number or a function of the progress remaining, not {value_schedule!r}")

    def __call__(self, progress_remaining: float) -> float:
        return float(self.value_schedule(progress_remaining))


class LinearSchedule:
    """From ``start`` to ``end`` over the first ``end_fraction`` of training, then ``end``."""

    def __init__(self, start: float, end: float, end_fraction: float) -> None:
        self.start, self.end, self.end_fraction = start, end, end_fraction

    def __call__(self, progress_remaining: float) -> float:
        if (1 - progress_remaining) > self.end_fraction:
            return self.end
        return self.start + (1 - progress_remaining) * (self.end - self.start) / self.end_fraction


class ConstantSchedule:
    """The same value at every progress."""

    def __init__(self, val: float) -> None:
        self.val = val

    def __call__(self, _: float) -> float:
        return self.val


def get_linear_fn(start: float, end: float, end_fraction: float) -> LinearSchedule:
    """SB3's ``get_linear_fn``: a :class:`LinearSchedule`."""
    return LinearSchedule(start, end, end_fraction)


def constant_fn(val: float) -> ConstantSchedule:
    """SB3's ``constant_fn``: a :class:`ConstantSchedule`."""
    return ConstantSchedule(val)
