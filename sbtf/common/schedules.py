"""Schedules of stable-baselines 2.x, as plain data.

Two families live here, as in stable-baselines:

* step-based schedules for DQN-style code (``Schedule.value(step)``): :class:`ConstantSchedule`,
  :class:`LinearSchedule`, :class:`PiecewiseSchedule`, and the A2C/ACER :class:`Scheduler`;
* progress-based schedules for PPO2-style code, called with the remaining progress ``frac``
  (1 at the start of training, 0 at the end): :func:`get_schedule_fn`, :func:`constfn`,
  :class:`SampledSchedule`.

sbtf rule: every schedule object created here is *plain data*. It is a class instance that is
callable (``__call__`` is ``value``) and has ``to_dict()`` returning a JSON-able
``{"__schedule__": "ClassName", ...params}``; :func:`schedule_from_dict` rebuilds it from such a
dict without running any code taken from the file. Arbitrary user callables are not data:
:func:`sample_callable` records one at progress 1.0, 0.9, ..., 0.0 into a :class:`SampledSchedule`,
which the save code stores as a stand-in.

Differences from stable-baselines 2.x: ``get_schedule_fn`` / ``constfn`` return a
:class:`ConstantSchedule` instead of a closure (same call behaviour), and ``Schedule`` objects
are callable.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

SCHEDULE_KEY = "__schedule__"

__all__ = [
    "Schedule", "ConstantSchedule", "LinearSchedule", "PiecewiseSchedule", "SampledSchedule", "Scheduler",
    "ProgressSchedule",
    "linear_interpolation", "get_schedule_fn", "constfn", "constant", "linear_schedule", "middle_drop",
    "double_linear_con", "double_middle_drop", "sample_callable", "schedule_from_dict", "schedule_to_dict",
    "is_schedule_dict", "SCHEDULES",
]


def _plain_number(value: Any, what: str) -> Union[int, float]:
    """A JSON-able Python number from ``value`` (numpy scalars and 0-d arrays included)."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError("{} must be a number, got the bool {!r}".format(what, value))
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, (np.integer, np.floating)) or (isinstance(value, np.ndarray) and value.shape == ()):
        return value.item()
    raise TypeError("{} must be a number, got {!r} ({})".format(what, value, type(value).__name__))


class Schedule(object):
    """Base class of step-based schedules; ``schedule(step)`` is ``schedule.value(step)``."""

    def value(self, step: float) -> Any:
        """
        Value of the schedule for a given timestep

        :param step: (int) the timestep
        :return: (float) the output value for the given timestep
        """
        raise NotImplementedError

    def __call__(self, step: float) -> Any:
        return self.value(step)

    def to_dict(self) -> Dict[str, Any]:
        """
        :return: (dict) a JSON-able description ``{"__schedule__": "ClassName", ...}`` that
            :func:`schedule_from_dict` turns back into an equal schedule
        """
        raise TypeError("{} cannot be stored as data".format(type(self).__name__))

    def __repr__(self) -> str:
        try:
            params = {k: v for k, v in self.to_dict().items() if k != SCHEDULE_KEY}
        except TypeError:
            return object.__repr__(self)
        return "{}({})".format(type(self).__name__, ", ".join("{}={!r}".format(k, v) for k, v in params.items()))


class ConstantSchedule(Schedule):
    """
    Value remains constant over time.

    :param value: (float) Constant value of the schedule
    """

    def __init__(self, value: float):
        self._value = _plain_number(value, "ConstantSchedule value")

    def value(self, step: float) -> Union[int, float]:
        return self._value

    def to_dict(self) -> Dict[str, Any]:
        return {SCHEDULE_KEY: "ConstantSchedule", "value": self._value}


def linear_interpolation(left: float, right: float, alpha: float) -> float:
    """
    Linear interpolation between `left` and `right`.

    :param left: (float) left boundary
    :param right: (float) right boundary
    :param alpha: (float) coeff in [0, 1]
    :return: (float)
    """
    return left + alpha * (right - left)


_INTERPOLATIONS: Dict[str, Callable[[float, float, float], float]] = {"linear_interpolation": linear_interpolation}


class PiecewiseSchedule(Schedule):
    """
    Piecewise schedule.

    :param endpoints: ([(int, int)])
        list of pairs `(time, value)` meaning that schedule should output
        `value` when `t==time`. All the values for time must be sorted in
        an increasing order. When t is between two times, e.g. `(time_a, value_a)`
        and `(time_b, value_b)`, such that `time_a <= t < time_b` then value outputs
        `interpolation(value_a, value_b, alpha)` where alpha is a fraction of
        time passed between `time_a` and `time_b` for time `t`.
    :param interpolation: (lambda (float, float, float): float)
        a function that takes value to the left and to the right of t according
        to the `endpoints`. Alpha is the fraction of distance from left endpoint to
        right endpoint that t has covered. See linear_interpolation for example.
        Only ``linear_interpolation`` can be stored with ``to_dict``.
    :param outside_value: (float)
        if the value is requested outside of all the intervals specified in
        `endpoints` this value is returned. If None then an error is raised
        when outside value is requested.
    """

    def __init__(
        self,
        endpoints: Sequence[Tuple[float, float]],
        interpolation: Callable[[float, float, float], float] = linear_interpolation,
        outside_value: Optional[float] = None,
    ):
        endpoints = [(_plain_number(t, "endpoint time"), _plain_number(v, "endpoint value")) for t, v in endpoints]
        idxes = [e[0] for e in endpoints]
        if idxes != sorted(idxes):
            raise ValueError("PiecewiseSchedule endpoints must be sorted by time, got {}".format(idxes))
        self._interpolation = interpolation
        self._outside_value = None if outside_value is None else _plain_number(outside_value, "outside_value")
        self._endpoints = endpoints

    def value(self, step: float) -> float:
        for (left_t, left), (right_t, right) in zip(self._endpoints[:-1], self._endpoints[1:]):
            if left_t <= step < right_t:
                alpha = float(step - left_t) / (right_t - left_t)
                return self._interpolation(left, right, alpha)

        # t does not belong to any of the pieces, so doom.
        if self._outside_value is None:
            raise ValueError(
                "step {} is outside the PiecewiseSchedule endpoints and no outside_value is set".format(step)
            )
        return self._outside_value

    def to_dict(self) -> Dict[str, Any]:
        names = [name for name, fn in _INTERPOLATIONS.items() if fn is self._interpolation]
        if not names:
            raise TypeError("a PiecewiseSchedule with a custom interpolation function cannot be stored as data")
        return {
            SCHEDULE_KEY: "PiecewiseSchedule",
            "endpoints": [[t, v] for t, v in self._endpoints],
            "interpolation": names[0],
            "outside_value": self._outside_value,
        }


class LinearSchedule(Schedule):
    """
    Linear interpolation between initial_p and final_p over
    schedule_timesteps. After this many timesteps pass final_p is
    returned.

    :param schedule_timesteps: (int) Number of timesteps for which to linearly anneal initial_p to final_p
    :param initial_p: (float) initial output value
    :param final_p: (float) final output value
    """

    def __init__(self, schedule_timesteps: int, final_p: float, initial_p: float = 1.0):
        self.schedule_timesteps = _plain_number(schedule_timesteps, "schedule_timesteps")
        self.final_p = _plain_number(final_p, "final_p")
        self.initial_p = _plain_number(initial_p, "initial_p")

    def value(self, step: float) -> float:
        fraction = min(float(step) / self.schedule_timesteps, 1.0)
        return self.initial_p + fraction * (self.final_p - self.initial_p)

    def to_dict(self) -> Dict[str, Any]:
        return {
            SCHEDULE_KEY: "LinearSchedule",
            "schedule_timesteps": self.schedule_timesteps,
            "final_p": self.final_p,
            "initial_p": self.initial_p,
        }


class SampledSchedule(Schedule):
    """
    Piecewise-linear schedule over the progress value, given by sampled points.

    Used as the data stand-in for an arbitrary callable (see :func:`sample_callable`). Outside the
    sampled range the nearest end value is returned.

    :param points: ([(float, float)]) ``(progress, value)`` pairs, in any order
    """

    def __init__(self, points: Sequence[Tuple[float, float]]):
        pairs = sorted(
            (float(_plain_number(p, "progress")), float(_plain_number(v, "value"))) for p, v in points
        )
        if not pairs:
            raise ValueError("SampledSchedule needs at least one (progress, value) point")
        self.points: List[Tuple[float, float]] = pairs
        self._xs = np.array([p for p, _ in pairs])
        self._ys = np.array([v for _, v in pairs])

    def value(self, step: float) -> float:
        return float(np.interp(float(step), self._xs, self._ys))

    def to_dict(self) -> Dict[str, Any]:
        return {SCHEDULE_KEY: "SampledSchedule", "points": [[p, v] for p, v in self.points]}


def sample_callable(fn: Callable[[float], Any], n: int = 11) -> SampledSchedule:
    """
    Record an arbitrary progress schedule at ``n`` evenly spaced progress values from 1.0 down to 0.0
    (1.0, 0.9, ..., 0.0 for ``n=11``).

    :param fn: (callable) a function of the remaining progress, as PPO2's ``learning_rate``
    :param n: (int) number of samples (at least 2)
    :return: (SampledSchedule) a plain-data stand-in for ``fn``
    """
    if n < 2:
        raise ValueError("sample_callable needs n >= 2, got {}".format(n))
    if not callable(fn):
        raise TypeError("sample_callable expects a callable, got {!r}".format(fn))
    progress = [round(float(p), 12) for p in np.linspace(1.0, 0.0, n)]
    points = []
    for p in progress:
        raw = fn(p)
        try:
            value = float(np.asarray(raw).reshape(()))
        except (TypeError, ValueError) as exc:
            raise TypeError("the schedule {!r} returned {!r} at progress {}, not a number".format(fn, raw, p)) from exc
        points.append((p, value))
    return SampledSchedule(points)


def get_schedule_fn(value_schedule: Union[float, Callable[[float], float]]) -> Callable[[float], float]:
    """
    Transform (if needed) learning rate and clip range
    to callable.

    :param value_schedule: (callable or float)
    :return: (function) a callable of the progress ``frac``: a :class:`ConstantSchedule` for a number,
        the given callable otherwise
    """
    # If the passed schedule is a float (or int), create a constant function
    if isinstance(value_schedule, (float, int, np.floating, np.integer)) and not isinstance(value_schedule, bool):
        return constfn(value_schedule)
    if not callable(value_schedule):
        raise TypeError("expected a number or a callable schedule, got {!r}".format(value_schedule))
    return value_schedule


def constfn(val: float) -> ConstantSchedule:
    """
    Create a function that returns a constant
    It is useful for learning rate schedule (to avoid code duplication)

    :param val: (float)
    :return: (ConstantSchedule) callable returning ``val`` for any argument
    """
    return ConstantSchedule(val)


# ================================================================
# Legacy scheduler used by A2C / ACER / ACKTR
# ================================================================


def constant(_: float) -> float:
    """
    Returns a constant value for the Scheduler

    :param _: ignored
    :return: (float) 1
    """
    return 1.0


def linear_schedule(progress: float) -> float:
    """
    Returns a linear value for the Scheduler

    :param progress: (float) Current progress status (in [0, 1])
    :return: (float) 1 - progress
    """
    return 1 - progress


def middle_drop(progress: float) -> float:
    """
    Returns a linear value with a drop near the middle to a constant value for the Scheduler

    :param progress: (float) Current progress status (in [0, 1])
    :return: (float) 1 - progress if (1 - progress) >= 0.75 else 0.075
    """
    eps = 0.75
    if 1 - progress < eps:
        return eps * 0.1
    return 1 - progress


def double_linear_con(progress: float) -> float:
    """
    Returns a linear value (x2) with a flattened tail for the Scheduler

    :param progress: (float) Current progress status (in [0, 1])
    :return: (float) 1 - progress*2 if (1 - progress*2) >= 0.125 else 0.125
    """
    progress *= 2
    eps = 0.125
    if 1 - progress < eps:
        return eps
    return 1 - progress


def double_middle_drop(progress: float) -> float:
    """
    Returns a linear value with two drops near the middle to a constant value for the Scheduler

    :param progress: (float) Current progress status (in [0, 1])
    :return: (float) if 0.75 <= 1 - p: 1 - p, if 0.25 <= 1 - p < 0.75: 0.075, if 1 - p < 0.25: 0.125
    """
    eps1 = 0.75
    eps2 = 0.25
    if 1 - progress < eps1:
        if 1 - progress < eps2:
            return eps2 * 0.5
        return eps1 * 0.1
    return 1 - progress


SCHEDULES: Dict[str, Callable[[float], float]] = {
    "linear": linear_schedule,
    "constant": constant,
    "double_linear_con": double_linear_con,
    "middle_drop": middle_drop,
    "double_middle_drop": double_middle_drop,
}


class Scheduler(object):
    """
    Update a value every iteration, with a specific curve (stable-baselines 2's step-counting form, kept for user
    code; the algorithms use :class:`ProgressSchedule`, the same curves as functions of the remaining progress).

    :param initial_value: (float) initial value
    :param n_values: (int) the total number of iterations
    :param schedule: (str) the curve you wish to follow for your value
        ('linear', 'constant', 'double_linear_con', 'middle_drop' or 'double_middle_drop')
    """

    def __init__(self, initial_value: float, n_values: int, schedule: Union[str, Callable[[float], float]]):
        schedule = _schedule_name(schedule)
        self.step = 0.0
        self.initial_value = _plain_number(initial_value, "initial_value")
        self.nvalues = _plain_number(n_values, "n_values")
        self.schedule_name = schedule
        self.schedule = SCHEDULES[schedule]

    def value(self) -> float:
        """
        Update the Scheduler, and return the current value

        :return: (float) the current value
        """
        current_value = self.initial_value * self.schedule(self.step / self.nvalues)
        self.step += 1.0
        return current_value

    def value_steps(self, steps: float) -> float:
        """
        Get a value for a given step

        :param steps: (int) The current number of iterations
        :return: (float) the value for the current number of iterations
        """
        return self.initial_value * self.schedule(steps / self.nvalues)

    def to_dict(self) -> Dict[str, Any]:
        """
        :return: (dict) a JSON-able description, including the current step
        """
        return {
            SCHEDULE_KEY: "Scheduler",
            "initial_value": self.initial_value,
            "n_values": self.nvalues,
            "schedule": self.schedule_name,
            "step": self.step,
        }

    def __repr__(self) -> str:
        return "Scheduler(initial_value={!r}, n_values={!r}, schedule={!r})".format(
            self.initial_value, self.nvalues, self.schedule_name
        )


class ProgressSchedule(Schedule):
    """
    One of stable-baselines 2's named learning-rate curves (``lr_schedule`` of A2C, ACER, ACKTR) as a function of
    the remaining progress, like every other schedule of the on-policy algorithms:
    ``value(progress_remaining) = initial_value * SCHEDULES[schedule](1 - progress_remaining)``.

    ``Scheduler(initial_value, n_values, schedule)`` at step ``s`` gives the same value as this schedule at
    ``progress_remaining = 1 - s / n_values``.

    :param initial_value: (float) the value at the start of training
    :param schedule: (str or callable) 'linear', 'constant', 'double_linear_con', 'middle_drop' or
        'double_middle_drop' (or one of those functions of this module)
    """

    def __init__(self, initial_value: float, schedule: Union[str, Callable[[float], float]]):
        self.initial_value = _plain_number(initial_value, "initial_value")
        self.schedule_name = _schedule_name(schedule)
        self._curve = _REMAINING_CURVES[self.schedule_name]

    def value(self, step: float) -> float:
        """
        :param step: (float) the remaining progress (1 at the start of training, 0 at the end)
        :return: (float) the value
        """
        return self.initial_value * self._curve(step)

    def to_dict(self) -> Dict[str, Any]:
        return {SCHEDULE_KEY: "ProgressSchedule", "initial_value": self.initial_value,
                "schedule": self.schedule_name}


def _remaining_middle_drop(remaining: float) -> float:
    return 0.75 * 0.1 if remaining < 0.75 else remaining


def _remaining_double_middle_drop(remaining: float) -> float:
    if remaining < 0.75:
        return 0.25 * 0.5 if remaining < 0.25 else 0.75 * 0.1
    return remaining


#: the SB2 curves written on the remaining progress ``1 - progress``, which is the value SB2 tested and returned,
#: so that the values are bit-identical (``double_linear_con`` needs the elapsed progress itself)
_REMAINING_CURVES: Dict[str, Callable[[float], float]] = {
    "linear": lambda remaining: remaining,
    "constant": lambda remaining: 1.0,
    "middle_drop": _remaining_middle_drop,
    "double_middle_drop": _remaining_double_middle_drop,
    "double_linear_con": lambda remaining: double_linear_con(1.0 - remaining),
}


def _schedule_name(schedule: Union[str, Callable[[float], float]]) -> str:
    """The name of one of the SB2 curves given by name or as the function of this module."""
    if callable(schedule):
        names = [name for name, fn in SCHEDULES.items() if fn is schedule]
        if not names:
            raise ValueError("Scheduler only accepts the named schedules {}".format(sorted(SCHEDULES)))
        return names[0]
    if schedule not in SCHEDULES:
        raise ValueError("Unknown schedule {!r}; expected one of {}".format(schedule, sorted(SCHEDULES)))
    return schedule


# ================================================================
# Plain-data (de)serialisation
# ================================================================


def is_schedule_dict(data: Any) -> bool:
    """
    :param data: (Any) a value read from a saved file
    :return: (bool) whether it is a description written by a schedule's ``to_dict``
    """
    return isinstance(data, dict) and isinstance(data.get(SCHEDULE_KEY), str)


def schedule_to_dict(schedule: Any) -> Optional[Dict[str, Any]]:
    """
    The data form of ``schedule``, or None when it is not an sbtf schedule that can be stored as data
    (e.g. a lambda; sample it with :func:`sample_callable` instead).

    :param schedule: (Any) a schedule object or one of the named schedule functions of this module
    :return: (dict or None)
    """
    if isinstance(schedule, (Schedule, Scheduler)):
        try:
            return schedule.to_dict()
        except TypeError:
            return None
    for name, fn in SCHEDULES.items():
        if schedule is fn:
            return {SCHEDULE_KEY: "function", "name": name}
    return None


def schedule_from_dict(data: Dict[str, Any]) -> Any:
    """
    Rebuild a schedule from its ``to_dict()`` form. Only the classes of this module are built and
    no code from ``data`` is run.

    :param data: (dict) ``{"__schedule__": "ClassName", ...params}``
    :return: the schedule object
    """
    if not is_schedule_dict(data):
        raise ValueError("not a schedule description (a dict with a '{}' key): {!r}".format(SCHEDULE_KEY, data))
    kind = data[SCHEDULE_KEY]
    try:
        if kind == "ConstantSchedule":
            return ConstantSchedule(data["value"])
        if kind == "LinearSchedule":
            return LinearSchedule(data["schedule_timesteps"], data["final_p"], data.get("initial_p", 1.0))
        if kind == "PiecewiseSchedule":
            name = data.get("interpolation", "linear_interpolation")
            if name not in _INTERPOLATIONS:
                raise ValueError("unknown interpolation {!r} in a PiecewiseSchedule description".format(name))
            return PiecewiseSchedule(
                [tuple(pair) for pair in data["endpoints"]], _INTERPOLATIONS[name], data.get("outside_value")
            )
        if kind == "SampledSchedule":
            return SampledSchedule([tuple(pair) for pair in data["points"]])
        if kind == "ProgressSchedule":
            return ProgressSchedule(data["initial_value"], data["schedule"])
        if kind == "Scheduler":
            scheduler = Scheduler(data["initial_value"], data["n_values"], data["schedule"])
            scheduler.step = float(data.get("step", 0.0))
            return scheduler
        if kind == "function":
            name = data["name"]
            if name not in SCHEDULES:
                raise ValueError("unknown schedule function {!r}".format(name))
            return SCHEDULES[name]
    except KeyError as exc:
        raise ValueError("the {} description {!r} is missing {}".format(kind, data, exc)) from exc
    raise ValueError("unknown schedule class {!r}".format(kind))
