"""Declared types of the values a model file stores (its ``data``), per algorithm.

Each algorithm declares ``_save_schema = {attribute: field}``; ``BaseRLModel`` adds the keys every model
stores (:data:`COMMON_SCHEMA`). When a file is opened, every value is checked against its field before it
is set on the model, unknown keys are reported and dropped (never assigned, so a file cannot replace a
method), and a value of the wrong type raises :class:`~sbtf.common.file_errors.ModelDataError` naming the
key — instead of failing later, deep inside training, or silently acting on nonsense.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Optional, Tuple

import gymnasium as gym
import numpy as np

from sbtf.common.file_errors import ModelDataError, describe_value, get_load_limits

__all__ = [
    "MAX_ROLLOUT", "Field", "Real", "Integer", "Flag", "Text", "Nullable", "AnyOf", "Schedule", "Space", "PolicyClass",
    "AlgorithmClass", "Noise", "PlainData", "NumberTuple", "EnumValue", "Opaque", "COMMON_SCHEMA",
    "check_data",
]


def _short(value: Any, limit: int = 80) -> str:
    return describe_value(value, limit)


class Field:
    """A declared type: ``check(value, key)`` returns the (possibly normalised) value or raises."""

    description = "a value"

    def accepts(self, value: Any) -> bool:  # pragma: no cover - overridden
        raise NotImplementedError

    def normalise(self, value: Any) -> Any:
        return value

    def check(self, value: Any, key: str) -> Any:
        if not self.accepts(value):
            raise ModelDataError(f"{key!r} in the model file must be {self.description}, but it is {_short(value)} "
                                 f"({type(value).__name__}); the file is corrupted or was edited. Pass "
                                 f"custom_objects={{{key!r}: ...}} to load it with a value of your own.")
        return self.normalise(value)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {self.description}>"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


class Real(Field):
    """A number (int or float; not bool, not NaN)."""

    description = "a number"

    def accepts(self, value: Any) -> bool:
        return _is_number(value) and not (isinstance(value, (float, np.floating)) and math.isnan(value))

    def normalise(self, value: Any) -> Any:
        return value.item() if isinstance(value, np.generic) else value


class Integer(Field):
    """An integer within ``[minimum, maximum]`` (an integral float is accepted and converted)."""

    def __init__(self, minimum: Optional[int] = None, maximum: int = 2 ** 62):
        self.minimum = minimum
        self.maximum = maximum
        low = f" >= {minimum}" if minimum is not None else ""
        self.description = f"an integer{low} and <= {maximum:,}"

    def accepts(self, value: Any) -> bool:
        if isinstance(value, (float, np.floating)):
            if not (math.isfinite(value) and float(value).is_integer()):
                return False
            value = int(value)
        return (isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
                and (self.minimum is None or value >= self.minimum) and value <= self.maximum
                and (self.minimum is not None or value >= -self.maximum))

    def normalise(self, value: Any) -> Any:
        return int(value)


class Flag(Field):
    """A boolean."""

    description = "true or false"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, (bool, np.bool_))

    def normalise(self, value: Any) -> Any:
        return bool(value)


class Text(Field):
    """A string, optionally one of a fixed set (prefixes allowed with ``prefixes=True``)."""

    def __init__(self, choices: Optional[Tuple[str, ...]] = None, prefixes: bool = False):
        self.choices = choices
        self.prefixes = prefixes
        self.description = "a string" + (f" ({'starting with ' if prefixes else ''}one of {list(choices)})"
                                         if choices else "")

    def accepts(self, value: Any) -> bool:
        if not isinstance(value, str):
            return False
        if self.choices is None:
            return True
        return any(value.startswith(c) for c in self.choices) if self.prefixes else value in self.choices


class Nullable(Field):
    """``None`` or what ``inner`` accepts."""

    def __init__(self, inner: Field):
        self.inner = inner
        self.description = f"null or {inner.description}"

    def accepts(self, value: Any) -> bool:
        return value is None or self.inner.accepts(value)

    def normalise(self, value: Any) -> Any:
        return None if value is None else self.inner.normalise(value)


class AnyOf(Field):
    """What any of ``fields`` accepts (the first that does normalises it)."""

    def __init__(self, *fields: Field):
        self.fields = fields
        self.description = " or ".join(f.description for f in fields)

    def accepts(self, value: Any) -> bool:
        return any(f.accepts(value) for f in self.fields)

    def normalise(self, value: Any) -> Any:
        for field in self.fields:
            if field.accepts(value):
                return field.normalise(value)
        return value  # pragma: no cover - accepts() was checked


class Schedule(Field):
    """A number or a schedule: an sbtf schedule object, a named schedule, or a function given by the caller."""

    description = "a number or a schedule"

    def accepts(self, value: Any) -> bool:
        return Real().accepts(value) or (callable(value) and not isinstance(value, type))

    def normalise(self, value: Any) -> Any:
        return value.item() if isinstance(value, np.generic) else value


class Space(Field):
    """A gymnasium space."""

    description = "a gymnasium space"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, gym.Space)


class PolicyClass(Field):
    """A policy class (a registered or caller-given class), or a policy name such as ``"MlpPolicy"``."""

    description = "a policy class or a policy name"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, (str, type))


class AlgorithmClass(Field):
    """An sbtf algorithm class (HER's wrapped model) or its name."""

    description = "an algorithm class or name"

    def accepts(self, value: Any) -> bool:
        from sbtf.common.base_class import BaseRLModel

        return isinstance(value, str) or (isinstance(value, type) and issubclass(value, BaseRLModel))


class Noise(Field):
    """``None``, an action-noise object or adaptive parameter-noise spec (rebuilt from data)."""

    description = "null or an action / parameter noise object"

    def accepts(self, value: Any) -> bool:
        from sbtf.common.noise import ActionNoise, AdaptiveParamNoiseSpec

        return value is None or isinstance(value, (ActionNoise, AdaptiveParamNoiseSpec))


class EnumValue(Field):
    """A member of ``enum_cls`` (or its name / value, converted)."""

    def __init__(self, enum_cls: type):
        self.enum_cls = enum_cls
        self.description = f"a {enum_cls.__name__} ({', '.join(m.name.lower() for m in enum_cls)})"

    def accepts(self, value: Any) -> bool:
        if isinstance(value, self.enum_cls):
            return True
        if isinstance(value, str):
            return value.upper() in self.enum_cls.__members__
        return False

    def normalise(self, value: Any) -> Any:
        return value if isinstance(value, self.enum_cls) else self.enum_cls[value.upper()]


class NumberTuple(Field):
    """A tuple of ``length`` numbers (a list is converted)."""

    def __init__(self, length: int):
        self.length = length
        self.description = "a pair of numbers" if length == 2 else f"{length} numbers"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, (tuple, list)) and len(value) == self.length and all(_is_number(v) for v in value)

    def normalise(self, value: Any) -> Any:
        return tuple(v.item() if isinstance(v, np.generic) else v for v in value)


class PlainData(Field):
    """
    Data a model stores as arguments (``policy_kwargs``): numbers, strings, lists, tuples, dicts, numeric arrays,
    activation functions, classes (from the registry or the caller) and schedule/stand-in callables.
    """

    description = "plain data (numbers, strings, lists, dicts, arrays, activations, classes)"

    def __init__(self, mapping: bool = False):
        self.mapping = mapping
        if mapping:
            self.description = "a dict of " + self.description

    def accepts(self, value: Any) -> bool:
        if self.mapping and not (value is None or isinstance(value, dict)):
            return False
        return self._plain(value, 0)

    def _plain(self, value: Any, depth: int) -> bool:
        if depth > get_load_limits().max_depth:
            return False
        if value is None or isinstance(value, (bool, int, float, str, np.generic, type)):
            return True
        if isinstance(value, np.ndarray):
            return value.dtype.kind in "biuf"
        if isinstance(value, (list, tuple)):
            return all(self._plain(v, depth + 1) for v in value)
        if isinstance(value, dict):
            return all(self._plain(k, depth + 1) and self._plain(v, depth + 1) for k, v in value.items())
        return callable(value)

    def normalise(self, value: Any) -> Any:
        return {} if self.mapping and value is None else value


class Opaque(Field):
    """Anything the safe decoder produced (kept for compatibility; not used to build the model)."""

    description = "any stored value"

    def accepts(self, value: Any) -> bool:
        return True


#: most samples one rollout of a file's model may hold (n_steps * n_envs): models build their train step for it
MAX_ROLLOUT = 2 ** 22

#: keys every model file stores (``BaseRLModel._get_save_data``)
COMMON_SCHEMA: Dict[str, Field] = {
    "verbose": Integer(),
    "policy": PolicyClass(),
    "observation_space": Space(),
    "action_space": Space(),
    "n_envs": Integer(minimum=1, maximum=2 ** 16),
    "n_cpu_tf_sess": Nullable(Integer(minimum=0, maximum=2 ** 16)),
    "seed": Nullable(Integer(minimum=0, maximum=2 ** 32 - 1)),  # NumPy's seeds
    "_vectorize_action": Flag(),
    "policy_kwargs": PlainData(mapping=True),
    "num_timesteps": Integer(minimum=0),
}


def check_data(schema: Dict[str, Field], data: Dict[str, Any], trusted: frozenset = frozenset(),
               what: str = "model") -> Tuple[Dict[str, Any], list]:
    """
    Check ``data`` against ``schema``.

    :param schema: (dict) key -> Field
    :param data: (dict) the values read from a file
    :param trusted: (frozenset) keys whose values the caller gave (``custom_objects``): not checked
    :param what: (str) for messages
    :return: (dict, list) the checked values of the declared keys, and the unknown keys (dropped)
    """
    checked: Dict[str, Any] = {}
    unknown = []
    for key, value in data.items():
        if not isinstance(key, str) or key not in schema:
            unknown.append(key)
            continue
        checked[key] = value if key in trusted else schema[key].check(value, key)
    return checked, unknown


def _int_lists(value: Any, depth: int = 0):
    """Every list/tuple of plain ints and every lone int inside ``value`` (layer sizes of a network spec)."""
    if depth > 32:
        return
    if isinstance(value, bool):
        return
    if isinstance(value, (int, np.integer)):
        yield [int(value)]
    elif isinstance(value, (list, tuple)):
        ints = [int(v) for v in value if isinstance(v, (int, np.integer)) and not isinstance(v, bool)]
        if ints:
            yield ints
        for v in value:
            if not isinstance(v, (int, np.integer)):
                yield from _int_lists(v, depth + 1)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _int_lists(v, depth + 1)


def check_network_size(policy_kwargs: Any, declared_sizes: Dict[str, int]) -> None:
    """
    Refuse ``policy_kwargs`` that describe a network far larger than the parameters the file stores, before the
    network is built (a hostile file could otherwise ask for layers of millions of units): every layer size, and
    the weights between consecutive sizes of each list, must fit in the stored number of values.
    """
    from sbtf.common.file_errors import FileLimitError

    stored = sum(declared_sizes.values())
    if not policy_kwargs:
        return
    for sizes in _int_lists(policy_kwargs):
        weights = sum(a * b for a, b in zip(sizes, sizes[1:]))
        if max(sizes) > stored or weights > stored:
            raise FileLimitError(f"The model file's policy_kwargs describe layers {sizes[:8]} that need more than the "
                                 f"{stored:,} parameter values the file stores; the file is corrupted or hostile.")
