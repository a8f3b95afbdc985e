"""The sbtf model file format and its safe (de)serialisation.

A model file is a zip archive with
* ``data``: JSON of the model's hyperparameters and spaces (no pickles unless a value had no
  data form, see below),
* ``parameters``: ``np.savez`` bytes keyed by the SB2-style parameter names,
* ``parameter_list``: JSON list giving the order of the parameters,
* ``sbtf_format``: JSON ``{"format_version": N, "sbtf_version": ..., "algo": ...}``.

Loading never executes code from the file unless the caller passes ``allow_pickle=True``:
classes are stored by name and looked up only in :mod:`sbtf.common.registry` (never imported);
schedules and noise objects are stored as data and rebuilt by sbtf's own constructors; any other
callable is stored as a table of its values over training progress (rebuilt as a piecewise-linear
schedule) next to an optional cloudpickle blob that is only used when pickles are allowed. Every
read is bounded (:class:`~sbtf.common.file_errors.LoadLimits`): member sizes are checked before
decompression, JSON nesting and container sizes are limited, parameters are checked against the
model's shapes from their headers before their data is read. Every failure is a
:class:`~sbtf.common.file_errors.ModelFileError`. See ``docs/security.md``.
Writes are atomic (:mod:`sbtf.common.fileio.atomic_io`).
"""
from __future__ import annotations

import base64
import binascii
import enum
import gc
import io
import json
import math
import os
import re
import warnings
from collections import OrderedDict
from typing import Any, Callable, Dict, Mapping, Optional, Union

import gymnasium as gym
import numpy as np

from sbtf.common.fileio.atomic_io import atomic_write_bytes
from sbtf.common.file_errors import (CorruptedFileError, FileLimitError, ModelDataError, ModelFileError,
                                     UnsafeFileError, describe_value, get_load_limits)
from sbtf.common.fileio.load_budget import check_space_elements, largest_array, space_budget
from sbtf.common.fileio.safe_zip import check_numeric_dtype, npy_header, open_zip, read_file_limited, read_member

FORMAT_VERSION = 1
FORMAT_MEMBER = "sbtf_format"

PathOrFile = Union[str, os.PathLike, io.IOBase]


__all__ = [
    "FORMAT_VERSION", "FORMAT_MEMBER", "ModelFileError", "UnloadedObject", "StoredParameters", "class_path",
    "resolve_class", "space_to_dict", "space_from_dict", "encode_value", "decode_value", "data_to_json",
    "json_to_data", "save_to_zip", "load_from_zip_bytes", "resolve_save_path", "resolve_load_path",
    "read_file_bytes", "inspect_model_bytes", "atomic_write_bytes",
]


# --------------------------------------------------------------------------------------------
# class references
# --------------------------------------------------------------------------------------------
def class_path(obj: Any) -> str:
    """``module:qualname`` of a class or function (how a file names it)."""
    return f"{obj.__module__}:{obj.__qualname__}"


def resolve_class(path: str, allow_pickle: bool = False, key: str = "?") -> type:
    """
    The class a model file names, looked up in :mod:`sbtf.common.registry` only (never imported, never resolved
    from ``sys.modules``). With ``allow_pickle=True`` (trusted files) an unregistered class is imported by name.
    """
    from sbtf.common.registry import lookup_class

    if not isinstance(path, str) or len(path) > 1000:
        raise ModelDataError(f"{describe_value(key)} in the model file names a class by {_short(path)}, which is not a "
                             "class name.")
    found = lookup_class(path)
    if found is not None:
        return found
    module_name, _, qualname = path.partition(":")
    if allow_pickle:
        import importlib

        obj = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
        return obj
    raise UnsafeFileError(
        f"{describe_value(key)} in the model file names the class {describe_value(qualname)} of module "
        f"{describe_value(module_name)}, which is not one of "
        f"sbtf's registered classes. If it is your own policy or feature extractor, import the module that defines "
        f"it before loading (subclasses of sbtf's policies and of BaseFeaturesExtractor register themselves; see "
        f"sbtf.common.registry) or pass custom_objects={{{describe_value(key)}: ...}} with the value to use; pass "
        "allow_pickle=True "
        "only if you trust the file.")


def _text(value: Any, limit: int) -> str:
    """A string read from a file, cut to ``limit`` characters (any other value: its bounded description)."""
    if isinstance(value, str):
        return value if len(value) <= limit else value[: limit - 3] + "..."
    return describe_value(value, limit)


def _short(value: Any, limit: int = 80) -> str:
    """A bounded description of a value read from a file (never its full ``repr``: see ``describe_value``)."""
    return describe_value(value, limit)


# --------------------------------------------------------------------------------------------
# spaces
# --------------------------------------------------------------------------------------------
def space_to_dict(space: gym.Space) -> dict:
    """A JSON-able description of a gymnasium space."""
    if isinstance(space, gym.spaces.Box):
        return {"type": "Box", "low": space.low.tolist(), "high": space.high.tolist(), "shape": list(space.shape),
                "dtype": str(space.dtype)}
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, gym.spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": space.nvec.tolist(), "dtype": str(space.dtype)}
    if isinstance(space, gym.spaces.MultiBinary):
        n = space.n
        return {"type": "MultiBinary", "n": n.tolist() if isinstance(n, np.ndarray) else n}
    if isinstance(space, gym.spaces.Dict):
        return {"type": "Dict", "spaces": [[k, space_to_dict(s)] for k, s in space.spaces.items()]}
    if isinstance(space, gym.spaces.Tuple):
        return {"type": "Tuple", "spaces": [space_to_dict(s) for s in space.spaces]}
    raise TypeError(f"Cannot describe space {space!r} as data")


def _space_error(message: str) -> ModelDataError:
    return ModelDataError(f"A space in the model file is invalid: {message}; the file is corrupted or was edited.")


def _space_size(shape: Any, kind: str = "Box") -> tuple:
    """A space's shape, checked (sizes, and their product against ``load_budget``) before anything is built."""
    if not isinstance(shape, (list, tuple)) or len(shape) > 32 or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise _space_error(f"shape {_short(shape)} is not a list of non-negative integers")
    check_space_elements(math.prod(shape), f"A {kind} space of shape {_short(tuple(shape))} in the model file")
    return tuple(shape)


def _space_dtype(value: Any, default: str, kind: str) -> np.dtype:
    if value is None:
        value = default
    if not isinstance(value, str) or len(value) > 32:
        raise _space_error(f"{kind} dtype {_short(value)} is not a dtype name")
    return np.dtype(value)


def _numeric_list(values: Any, count: int, dtype: np.dtype, what: str) -> np.ndarray:
    """``values`` (a nested list or a number) as an array of ``count`` elements, checked before it is built."""
    if isinstance(values, (int, float)) and not isinstance(values, bool):
        return np.full(count, values, dtype=np.float64).astype(dtype)
    flat = _flatten_numbers(values, what)
    if len(flat) != count:
        raise _space_error(f"{what} has {len(flat)} values for {count} elements")
    return np.asarray(flat, dtype=np.float64).astype(dtype)


def _flatten_numbers(values: Any, what: str, depth: int = 0) -> list:
    if depth > 32:
        raise _space_error(f"{what} nests too deeply")
    if isinstance(values, (int, float)) and not isinstance(values, bool):
        return [values]
    if not isinstance(values, list):
        raise _space_error(f"{what} holds {_short(values)}, not numbers")
    out: list = []
    for value in values:
        out.extend(_flatten_numbers(value, what, depth + 1))
    return out


def space_from_dict(d: Any, _depth: int = 0) -> gym.Space:
    """Rebuild a gymnasium space from ``space_to_dict`` output, checking every field first."""
    if not isinstance(d, dict) or not isinstance(d.get("type"), str):
        raise _space_error(f"{_short(d)} is not a space description")
    if _depth > 16:
        raise FileLimitError("The spaces of the model file nest too deeply.")
    kind = d["type"]
    try:
        if kind == "Box":
            dtype = _space_dtype(d.get("dtype"), "float32", "Box")
            check_numeric_dtype(dtype, "A Box space of the model file")
            shape = _space_size(d.get("shape"))
            count = int(np.prod(shape, dtype=np.int64)) if shape else 1
            low = _numeric_list(d.get("low"), count, dtype, "Box low").reshape(shape)
            high = _numeric_list(d.get("high"), count, dtype, "Box high").reshape(shape)
            return gym.spaces.Box(low=low, high=high, shape=shape, dtype=dtype)
        if kind == "Discrete":
            n, start = d.get("n"), d.get("start", 0)
            if not (isinstance(n, int) and isinstance(start, int)) or isinstance(n, bool) or n < 1:
                raise _space_error(f"Discrete n={_short(n)}, start={_short(start)}")
            check_space_elements(n, "A Discrete space of the model file")
            return gym.spaces.Discrete(n, start=start)
        if kind == "MultiDiscrete":
            nvec = _flatten_numbers(d.get("nvec"), "MultiDiscrete nvec")
            if not nvec or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in nvec):
                raise _space_error(f"MultiDiscrete nvec {_short(d.get('nvec'))}")
            check_space_elements(sum(nvec), f"A MultiDiscrete space of {len(nvec):,} sizes in the model file (one-hot "
                                            "width)")
            dtype = _space_dtype(d.get("dtype"), "int64", "MultiDiscrete")
            if dtype.kind not in "iu":
                raise _space_error(f"MultiDiscrete dtype {dtype}")
            nvec_array = np.array(d["nvec"], dtype=np.int64)
            if nvec_array.size != len(nvec):
                raise _space_error("MultiDiscrete nvec is ragged")
            return gym.spaces.MultiDiscrete(nvec_array, dtype=dtype)
        if kind == "MultiBinary":
            n = d.get("n")
            shape = _space_size([n] if isinstance(n, int) else n, "MultiBinary")
            return gym.spaces.MultiBinary(n if isinstance(n, int) else list(shape))
        if kind == "Dict":
            items = d.get("spaces")
            if not isinstance(items, list) or not all(isinstance(i, list) and len(i) == 2 and isinstance(i[0], str)
                                                      for i in items):
                raise _space_error("Dict spaces must be a list of [name, space] pairs")
            return gym.spaces.Dict(OrderedDict((k, space_from_dict(v, _depth + 1)) for k, v in items))
        if kind == "Tuple":
            items = d.get("spaces")
            if not isinstance(items, list):
                raise _space_error("Tuple spaces must be a list")
            return gym.spaces.Tuple([space_from_dict(v, _depth + 1) for v in items])
    except ModelFileError:
        raise
    except (TypeError, ValueError, OverflowError, KeyError, AssertionError) as exc:
        raise _space_error(f"{kind} ({type(exc).__name__}: {exc})") from exc
    raise _space_error(f"unknown space type {kind!r}")


# --------------------------------------------------------------------------------------------
# values <-> JSON
# --------------------------------------------------------------------------------------------
def _pickle_b64(obj: Any) -> Optional[str]:
    try:
        import cloudpickle
        return base64.b64encode(cloudpickle.dumps(obj)).decode("ascii")
    except Exception:  # noqa: BLE001 - an unpicklable value is stored without its pickle
        return None


def _sample_callable(fn: Callable) -> Optional[list]:
    """Values of a schedule-like callable at progress 1.0, 0.9, ..., 0.0 (None when it is not one)."""
    points = []
    try:
        for i in range(11):
            progress = 1.0 - i / 10.0
            value = fn(progress)
            if isinstance(value, (np.floating, np.integer)):
                value = value.item()
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                return None
            points.append([progress, float(value)])
    except Exception:  # noqa: BLE001 - not callable with a progress argument
        return None
    return points


def encode_value(value: Any) -> Any:
    """Turn one model attribute into JSON-able data (see module docstring)."""
    from sbtf.common.tf_layers import activation_name

    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, enum.Enum):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return {"__ndarray__": value.tolist(), "dtype": str(value.dtype), "shape": list(value.shape)}
    if isinstance(value, gym.Space):
        return {"__space__": space_to_dict(value)}
    if isinstance(value, enum.Enum):
        return {"__enum__": class_path(type(value)), "value": encode_value(value.value)}
    if isinstance(value, type):
        return {"__class__": class_path(value)}
    if isinstance(value, tuple):
        return {"__tuple__": [encode_value(v) for v in value]}
    if isinstance(value, list):
        return [encode_value(v) for v in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value) and not any(k.startswith("__") for k in value):
            return {k: encode_value(v) for k, v in value.items()}
        return {"__dict_items__": [[encode_value(k), encode_value(v)] for k, v in value.items()]}
    if hasattr(value, "to_dict") and callable(value.to_dict):
        return {"__data_object__": class_path(type(value)), "state": encode_value(value.to_dict())}
    if callable(value):
        act = activation_name(value)
        if act is not None:
            return {"__activation__": act}
        return {"__callable__": {"repr": repr(value), "sampled": _sample_callable(value),
                                 "pickle": _pickle_b64(value)}}
    return {"__pickle__": _pickle_b64(value), "repr": repr(value), "type": class_path(type(value))}


class UnloadedObject:
    """Stands in for a pickled object of a model file that was not unpickled (``allow_pickle=False``)."""

    def __init__(self, key: str, description: str):
        self.key = key
        self.description = description

    def __call__(self, *args, **kwargs):
        raise RuntimeError(
            f"{describe_value(self.key)} of this model was stored as a pickle ({self.description}) and was not loaded "
            f"because allow_pickle=False. Pass custom_objects={{{describe_value(self.key)}: ...}} or allow_pickle=True "
            "if you trust the "
            "file.")

    def __repr__(self) -> str:
        return f"<UnloadedObject {describe_value(self.key)}: {self.description}>"


def _unpickle_b64(blob: str) -> Any:
    import cloudpickle
    return cloudpickle.loads(base64.b64decode(blob))


_TAGS = ("__ndarray__", "__space__", "__tuple__", "__dict_items__", "__class__", "__enum__", "__activation__",
         "__data_object__", "__callable__", "__pickle__")


class _Decoder:
    """
    Turns the JSON of a model file's ``data`` into Python values. It never resolves a name to a callable:
    classes come from :mod:`sbtf.common.registry`, schedules and noise from their own ``from_dict`` data
    constructors (dispatched on the data's own tag), activations from a fixed table; pickles only with
    ``allow_pickle``. Depth and sizes are bounded by the load limits.
    """

    def __init__(self, key: str, allow_pickle: bool):
        self.key = key
        self.allow_pickle = allow_pickle
        self.limits = get_load_limits()
        self.items = 0  # one budget for the whole load: json_to_data decodes every key with the same decoder

    @property
    def label(self) -> str:
        """The key being decoded, bounded for messages."""
        return describe_value(self.key)

    def fail(self, message: str) -> ModelDataError:
        return ModelDataError(f"{self.label} in the model file: {message}; the file is corrupted or was edited. "
                              f"Pass custom_objects={{{self.label}: ...}} to load it with a value of your own.")

    def count(self, n: int) -> None:
        self.items += n
        if self.items > self.limits.max_items:
            raise FileLimitError(f"The model file's data holds more than {self.limits.max_items:,} items (reached in "
                                 f"{self.label}); the file is damaged or hostile. If you trust it, raise max_items "
                                 "with sbtf.common.file_errors.load_limits().")

    def decode(self, value: Any, depth: int = 0) -> Any:
        if depth > self.limits.max_depth:
            raise FileLimitError(f"{self.label} in the model file nests values more than {self.limits.max_depth} "
                                 "levels deep; the file is damaged or hostile.")
        if isinstance(value, list):
            self.count(len(value))
            return [self.decode(v, depth + 1) for v in value]
        if not isinstance(value, dict):
            return value
        tags = [k for k in value if k in _TAGS]
        if not tags:
            odd = [k for k in value if k.startswith("__")]
            if odd:
                raise self.fail(f"unknown marker {odd[0]!r}")
            self.count(len(value))
            return {k: self.decode(v, depth + 1) for k, v in value.items()}
        return getattr(self, "_" + tags[0].strip("_"))(value, depth)

    # tagged values ----------------------------------------------------------------------------
    def _ndarray(self, value: dict, depth: int) -> np.ndarray:
        try:
            dtype = check_numeric_dtype(np.dtype(str(value.get("dtype"))), f"Array {self.label} of the model file")
        except TypeError as exc:
            raise self.fail(f"array dtype {_short(value.get('dtype'))} is not a numeric dtype") from exc
        shape = value.get("shape")
        if not isinstance(shape, list) or len(shape) > 32 or not all(
                isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
            raise self.fail(f"array shape {_short(shape)} is invalid")
        count = math.prod(shape)
        self.count(count)
        flat = _flatten_numbers(value.get("__ndarray__"), f"array {self.label}") if count != 1 or isinstance(
            value.get("__ndarray__"), list) else [value.get("__ndarray__")]
        if len(flat) != count or not all(isinstance(v, (int, float)) for v in flat):
            raise self.fail(f"array holds {len(flat)} values for shape {shape}")
        try:
            return np.array(flat, dtype=dtype).reshape(shape)
        except (OverflowError, ValueError, TypeError) as exc:
            raise self.fail(f"array values do not fit dtype {dtype} ({exc})") from exc

    def _space(self, value: dict, depth: int) -> gym.Space:
        return space_from_dict(value["__space__"])

    def _tuple(self, value: dict, depth: int) -> tuple:
        items = value["__tuple__"]
        if not isinstance(items, list):
            raise self.fail("a tuple is not stored as a list")
        return tuple(self.decode(items, depth))

    def _dict_items(self, value: dict, depth: int) -> dict:
        items = value["__dict_items__"]
        if not isinstance(items, list) or not all(isinstance(i, list) and len(i) == 2 for i in items):
            raise self.fail("a dict is not stored as a list of [key, value] pairs")
        self.count(len(items))
        keys = [self.decode(k, depth + 1) for k, _ in items]
        # int/float/tuple hashes are not randomised: many of them can be chosen to collide (quadratic inserts)
        plain_keys = sum(1 for k in keys if not isinstance(k, str))
        if plain_keys > self.limits.max_nonstring_keys:
            raise FileLimitError(f"{self.label} in the model file is a dict with {plain_keys:,} non-string keys, "
                                 f"more than the limit ({self.limits.max_nonstring_keys:,}); the file is damaged or "
                                 "hostile.")
        same_hash: Dict[int, int] = {}
        for k in keys:
            if type(k) is str:
                continue
            if not isinstance(k, (str, int, float, bool, type(None), tuple)):
                raise self.fail(f"dict key {_short(k)} is not a plain value")
            try:
                digest = hash(hash(k))  # hash() of a hash: the counting dict's own keys cannot collide
            except TypeError as exc:  # unhashable tuple content
                raise self.fail(f"dict key {_short(k)} cannot be a key ({exc})") from exc
            same = same_hash.get(digest, 0) + 1
            if same > _MAX_SAME_HASH:
                raise FileLimitError(f"{self.label} in the model file is a dict whose keys share one hash value (keys "
                                     "chosen to collide make loading quadratic); the file is damaged or hostile.")
            same_hash[digest] = same
            self.count(same)  # the probes this insert costs, charged to the load's budget
        out = {}
        for k, (_, v) in zip(keys, items):
            try:
                out[k] = self.decode(v, depth + 1)
            except TypeError as exc:  # unhashable tuple content
                raise self.fail(f"dict key {_short(k)} cannot be a key ({exc})") from exc
        return out

    def _class(self, value: dict, depth: int) -> type:
        return resolve_class(value["__class__"], self.allow_pickle, self.key)

    def _enum(self, value: dict, depth: int) -> Any:
        from sbtf.common.registry import lookup_class

        name = value["__enum__"]
        enum_cls = lookup_class(name, ("enum",))
        if enum_cls is None:
            if not self.allow_pickle:
                raise UnsafeFileError(f"{self.label} in the model file is a value of {_short(name)}, which is not one "
                                      f"of sbtf's enums; pass custom_objects={{{self.label}: ...}}.")
            enum_cls = resolve_class(name, True, self.key)
        member = self.decode(value.get("value"), depth + 1)
        try:
            return enum_cls(member)
        except (ValueError, TypeError) as exc:
            raise self.fail(f"{_short(member)} is not a member of {enum_cls.__name__}") from exc

    def _activation(self, value: dict, depth: int) -> Callable:
        from sbtf.common.tf_layers import get_activation

        name = value["__activation__"]
        if not isinstance(name, str):
            raise self.fail(f"activation {_short(name)} is not a name")
        try:
            return get_activation(name)
        except (ValueError, KeyError, TypeError) as exc:
            raise self.fail(f"unknown activation {_short(name)}") from exc

    def _data_object(self, value: dict, depth: int) -> Any:
        from sbtf.common.noise import is_noise_dict, noise_from_dict
        from sbtf.common.schedules import is_schedule_dict, schedule_from_dict

        state = self.decode(value.get("state"), depth + 1)
        try:
            if is_schedule_dict(state):
                return schedule_from_dict(state)
            if is_noise_dict(state):
                return noise_from_dict(state)
        except (ValueError, TypeError, KeyError, IndexError, OverflowError, ZeroDivisionError) as exc:
            raise self.fail(f"invalid {type(exc).__name__}: {exc}") from exc
        raise self.fail("a stored object is neither a schedule nor a noise description")

    def _callable(self, value: dict, depth: int) -> Any:
        from sbtf.common.schedules import SampledSchedule

        info = value["__callable__"]
        if not isinstance(info, dict):
            raise self.fail("a stored function is not described as data")
        if self.allow_pickle and isinstance(info.get("pickle"), str):
            return _unpickle_b64(info["pickle"])
        sampled = info.get("sampled")
        if sampled:
            if not isinstance(sampled, list) or len(sampled) > 10_000 or not all(
                    isinstance(p, list) and len(p) == 2 and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                                for x in p) for p in sampled):
                raise self.fail("the sampled values of a stored function are not [progress, value] pairs")
            warnings.warn(f"{self.label} was a custom callable ({_short(info.get('repr'))}); it was rebuilt as a "
                          "piecewise-linear schedule from values stored in the file. Pass allow_pickle=True to load "
                          "the original function, or custom_objects to replace it.")
            try:
                return SampledSchedule([tuple(p) for p in sampled])
            except (ValueError, TypeError) as exc:
                raise self.fail(f"invalid sampled schedule ({exc})") from exc
        return UnloadedObject(self.key, _text(info.get("repr", "callable"), 200))

    def _pickle(self, value: dict, depth: int) -> Any:
        if self.allow_pickle and isinstance(value.get("__pickle__"), str):
            return _unpickle_b64(value["__pickle__"])
        return UnloadedObject(self.key, f"{_text(value.get('type'), 100)}: {_text(value.get('repr'), 100)}")


def decode_value(value: Any, key: str = "?", allow_pickle: bool = False, _decoder: Optional[_Decoder] = None) -> Any:
    """Inverse of ``encode_value``; never runs code from the file unless ``allow_pickle``."""
    try:
        if _decoder is None:
            _decoder = _Decoder(key, allow_pickle)
        _decoder.key = key
        return _decoder.decode(value)
    except ModelFileError:
        raise
    except RecursionError as exc:
        raise FileLimitError(f"{describe_value(key)} in the model file nests too deeply.") from exc
    except (binascii.Error, ValueError, TypeError) as exc:
        if allow_pickle:
            raise
        raise ModelDataError(f"{describe_value(key)} in the model file cannot be read ({type(exc).__name__}: "
                             f"{describe_value(str(exc))}).") from exc


def data_to_json(data: dict) -> str:
    """Serialise a model's data dict to JSON text."""
    return json.dumps({k: encode_value(v) for k, v in data.items()}, indent=2)


_MAX_SAME_HASH = 8          # most non-string keys of one dict that share a hash value
_JSON_CONTAINER_ITEMS = 4   # items a JSON object or array is charged (an empty dict is ~8 times a list slot)
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')


def check_json_size(text: Union[str, bytes], what: str, max_items: Optional[int] = None) -> None:
    """
    Refuse a JSON document that would build more than ``max_items`` (default: the ``max_items`` limit) values
    before ``json.loads`` builds them: every ``,`` counts one item and every ``{`` / ``[`` four (a container's
    memory), outside strings. Counting is done in C: first over the whole text (an upper bound), then, only for a
    document over the bound, once more with its strings left out.
    """
    limit = get_load_limits().max_items if max_items is None else max_items
    if isinstance(text, str):
        text = text.encode("utf-8", "surrogatepass")

    def count(document: bytes) -> int:
        return document.count(b",") + _JSON_CONTAINER_ITEMS * (document.count(b"{") + document.count(b"["))

    if count(text) > limit and count(_JSON_STRING.sub(b'""', text)) > limit:
        raise FileLimitError(
            f"The {what} holds more than {limit:,} JSON values and containers (counting each object or array "
            f"{_JSON_CONTAINER_ITEMS} times); no real file does that (it is damaged or hostile). If you trust it, "
            "raise max_items with sbtf.common.file_errors.load_limits().")


def parse_json(text: Union[str, bytes], what: str) -> Any:
    """``json.loads`` with every failure as a :class:`ModelFileError`; the document's size in values is checked
    first (:func:`check_json_size`), its depth is bounded by the interpreter's recursion limit."""
    try:
        check_json_size(text, what)
        if isinstance(text, (bytes, bytearray)):
            text = bytes(text).decode("utf-8")
        collecting = gc.isenabled()
        gc.disable()  # JSON builds a tree (no cycles); collections while it builds would make it quadratic
        try:
            return json.loads(text)
        finally:
            if collecting:
                gc.enable()
    except RecursionError as exc:
        raise FileLimitError(f"The {what} nests JSON values too deeply; the file is damaged or hostile.") from exc
    except ModelFileError:
        raise
    except MemoryError as exc:
        raise FileLimitError(f"The {what} needs more memory than is available; "
                             "the file is damaged or hostile.") from exc
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError, int digit limit
        raise CorruptedFileError(f"The {what} is not valid JSON ({type(exc).__name__}: {describe_value(str(exc))}); "
                                 "the file is truncated or corrupted.") from exc


def json_to_data(text: Union[str, bytes], custom_objects: Optional[dict] = None, allow_pickle: bool = False) -> dict:
    """Deserialise a model's data dict; keys in ``custom_objects`` are taken from it instead of the file."""
    custom_objects = custom_objects or {}
    raw = parse_json(text, "'data' member of the model file")
    if not isinstance(raw, dict):
        raise CorruptedFileError(f"The 'data' member of the model file is a JSON {type(raw).__name__}, not an "
                                 "object; the file is corrupted.")
    data = {}
    decoder = _Decoder("?", allow_pickle)  # one item budget for every key of the file
    collecting = gc.isenabled()
    gc.disable()  # decoding builds a tree, as parsing did
    try:
        for key, value in raw.items():
            data[key] = (custom_objects[key] if key in custom_objects
                         else decode_value(value, key, allow_pickle, decoder))
    finally:
        if collecting:
            gc.enable()
    for key, value in custom_objects.items():
        data.setdefault(key, value)
    return data


# --------------------------------------------------------------------------------------------
# parameters
# --------------------------------------------------------------------------------------------
def params_to_bytes(params: "OrderedDict[str, np.ndarray]") -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **params)
    return buffer.getvalue()


class StoredParameters:
    """
    The parameters of a model file, not read yet: ``read(expected_sizes)`` checks every array's header against
    the model's own shapes (and the size limits) before reading its data. ``names`` is the stored order.
    """

    def __init__(self, npz_bytes: bytes, names: list, what: str = "parameters of the model file"):
        self.npz_bytes = npz_bytes
        self.names = names
        self.what = what

    def declared_sizes(self) -> Dict[str, int]:
        """name -> number of values, from the array headers only (nothing is allocated; computed once)."""
        cached = getattr(self, "_declared", None)
        if cached is not None:
            return dict(cached)
        sizes: Dict[str, int] = {}
        with open_zip(self.npz_bytes, self.what) as archive:
            members = {i.filename[:-4] if i.filename.endswith(".npy") else i.filename: i for i in archive.infolist()}
            for name in self.names:
                info = members.get(name)
                if info is None:
                    raise CorruptedFileError(f"The {self.what} are incomplete: {name!r} is listed but not stored.")
                try:
                    with archive.open(info) as handle:
                        shape, _, _, _ = npy_header(handle, f"Parameter {name!r}")
                except ModelFileError:
                    raise
                except Exception as exc:  # noqa: BLE001 - zipfile raises many kinds on damaged members
                    raise CorruptedFileError(f"Parameter {name!r} of the model file cannot be read "
                                             f"({type(exc).__name__}: {exc}).") from exc
                sizes[name] = math.prod(shape)
        self._declared = dict(sizes)
        return sizes

    def read(self, expected_sizes: Optional[Mapping[str, int]] = None,
             names: Optional[list] = None) -> "OrderedDict[str, np.ndarray]":
        """The arrays (only ``names``, default all listed), sizes checked against ``expected_sizes`` first."""
        from sbtf.common.fileio.safe_zip import read_npz

        wanted = self.names if names is None else [n for n in self.names if n in set(names)]
        return read_npz(self.npz_bytes, names=wanted, expected_sizes=expected_sizes, what=self.what)

    # a mapping view for callers that just want the arrays (reads everything, bounded by the limits)
    def _all(self) -> "OrderedDict[str, np.ndarray]":
        if not hasattr(self, "_cache"):
            self._cache = self.read()
        return self._cache

    def __getitem__(self, name: str) -> np.ndarray:
        return self._all()[name]

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def __iter__(self):
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def keys(self):
        return list(self.names)

    def items(self):
        return self._all().items()

    def values(self):
        return self._all().values()


def bytes_to_params(payload: bytes, param_list: list) -> "OrderedDict[str, np.ndarray]":
    """The arrays of an ``np.savez`` payload, in ``param_list`` order (read safely)."""
    return StoredParameters(payload, list(param_list)).read()


# --------------------------------------------------------------------------------------------
# files
# --------------------------------------------------------------------------------------------
def resolve_save_path(save_path: PathOrFile) -> PathOrFile:
    """SB2 rule: a path without extension gets ``.zip``."""
    if isinstance(save_path, (str, os.PathLike)):
        save_path = os.fspath(save_path)
        if os.path.splitext(save_path)[1] == "":
            save_path += ".zip"
    return save_path


def save_to_zip(save_path: PathOrFile, data: dict, params: "OrderedDict[str, np.ndarray]",
                meta: Optional[dict] = None) -> None:
    """Write a model file (atomically when ``save_path`` is a path)."""
    import zipfile

    from sbtf import __version__

    info = {"format_version": FORMAT_VERSION, "sbtf_version": __version__}
    info.update(meta or {})
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("data", data_to_json(data))
        archive.writestr("parameters", params_to_bytes(params))
        archive.writestr("parameter_list", json.dumps(list(params.keys())))
        archive.writestr(FORMAT_MEMBER, json.dumps(info))
    save_path = resolve_save_path(save_path)
    if isinstance(save_path, str):
        atomic_write_bytes(save_path, buffer.getvalue())
    else:
        save_path.write(buffer.getvalue())


def resolve_load_path(load_path: PathOrFile) -> PathOrFile:
    """Find the file SB2 would open for ``load_path`` (adds ``.zip`` / ``.pkl`` when missing)."""
    if not isinstance(load_path, (str, os.PathLike)):
        return load_path
    load_path = os.fspath(load_path)
    if os.path.exists(load_path):
        return load_path
    for ext in (".zip", ".pkl"):
        if os.path.exists(load_path + ext):
            return load_path + ext
    raise FileNotFoundError(f"Error: the file {load_path} could not be found (also tried .zip and .pkl)")


def read_file_bytes(load_path: PathOrFile) -> bytes:
    """The bytes of a file (path or binary file object), refusing files beyond the ``max_file_bytes`` limit."""
    return read_file_limited(load_path, "model file")


def inspect_model_bytes(payload: bytes) -> str:
    """'sbtf', 'sb2-zip', 'sb3-zip', 'sb2-pkl' or raise ModelFileError."""
    if payload[:2] == b"PK":
        with open_zip(payload, "model file") as archive:
            names = set(archive.namelist())
        if FORMAT_MEMBER in names:
            return "sbtf"
        if "data" in names and ("parameters" in names or "parameter_list" in names):
            return "sb2-zip"
        if "data" in names and "policy.pth" in names:
            return "sb3-zip"  # a stable-baselines3 / sb3-contrib model (read by sbtf_converters.sb3_reader)
        raise CorruptedFileError(f"This zip archive is not a model file (members: {sorted(names)[:6]}); expected "
                                 "'data', 'parameters' and 'parameter_list'.")
    if payload[:1] == b"\x80":
        return "sb2-pkl"
    raise CorruptedFileError("This file is not an sbtf or stable-baselines model file (neither a zip archive nor a "
                             "pickle).")


def load_from_zip_bytes(payload: bytes, custom_objects: Optional[dict] = None, allow_pickle: bool = False,
                        decode_data: bool = True) -> tuple:
    """
    Read an sbtf model file: ``(data, parameters, format info)``. ``parameters`` is a :class:`StoredParameters`
    (read it with ``.read(expected_sizes)`` once the model's shapes are known). With ``decode_data=False`` the
    ``data`` member is not decoded at all (``data`` is None): for callers that need only the weights.
    """
    limits = get_load_limits()
    with open_zip(payload, "model file") as archive:
        info = parse_json(read_member(archive, FORMAT_MEMBER, limits.max_json_bytes, "model file"),
                          f"'{FORMAT_MEMBER}' member of the model file")
        if not isinstance(info, dict):
            raise CorruptedFileError(f"The '{FORMAT_MEMBER}' member of the model file is not a JSON object; the file "
                                     "is corrupted.")
        version = info.get("format_version", 0)
        if not isinstance(version, int) or isinstance(version, bool):
            raise CorruptedFileError(f"The model file's format version {_short(version)} is not a number; the file "
                                     "is corrupted.")
        if version > FORMAT_VERSION:
            raise ModelFileError(f"This model file has format version {version}, newer than this sbtf understands "
                                 f"({FORMAT_VERSION}); upgrade sbtf.")
        if "algo" in info and not isinstance(info["algo"], str):
            raise CorruptedFileError("The model file names its algorithm with something that is not a string.")
        param_list = parse_json(read_member(archive, "parameter_list", limits.max_json_bytes, "model file"),
                                "'parameter_list' member of the model file")
        if not isinstance(param_list, list) or not all(isinstance(n, str) for n in param_list):
            raise CorruptedFileError("The 'parameter_list' member of the model file is not a list of names; the file "
                                     "is corrupted.")
        if len(set(param_list)) != len(param_list):
            raise CorruptedFileError("The 'parameter_list' member of the model file names a parameter twice.")
        npz_bytes = read_member(archive, "parameters", limits.max_array_bytes + (1 << 20), "model file")
        params = StoredParameters(npz_bytes, param_list)
        data = None
        if decode_data:
            data_bytes = read_member(archive, "data", limits.max_json_bytes, "model file")
            # the spaces of 'data' are compared with the stored parameters (array headers only) before being built
            with space_budget(largest_array(params.declared_sizes().values()), "the model file"):
                data = json_to_data(data_bytes, custom_objects, allow_pickle)
    return data, params, info
