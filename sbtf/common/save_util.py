"""The sbtf model file format and its safe (de)serialisation.

A model file is a zip archive with
* ``data``: JSON of the model's hyperparameters and spaces (no pickles unless a value had no
  data form, see below),
* ``parameters``: ``np.savez`` bytes keyed by the SB2-style parameter names,
* ``parameter_list``: JSON list giving the order of the parameters,
* ``sbtf_format``: JSON ``{"format_version": N, "sbtf_version": ..., "algo": ...}``.

Loading never executes code from the file unless the caller passes ``allow_pickle=True``:
classes are stored by import path and resolved only from ``sbtf`` or from modules that are
already imported; schedules and noise objects are stored as data; any other callable is stored
as a table of its values over training progress (rebuilt as a piecewise-linear schedule) next to
an optional cloudpickle blob that is only used when pickles are allowed.
Writes are atomic: a temporary file in the destination folder is renamed over the target.
"""
from __future__ import annotations

import base64
import enum
import importlib
import io
import json
import os
import sys
import tempfile
import warnings
import zipfile
from collections import OrderedDict
from typing import Any, Callable, Optional, Union

import gymnasium as gym
import numpy as np

FORMAT_VERSION = 1
FORMAT_MEMBER = "sbtf_format"

PathOrFile = Union[str, os.PathLike, io.IOBase]


class ModelFileError(ValueError):
    """A file that is not a readable model file (corrupted, truncated, wrong kind)."""


# --------------------------------------------------------------------------------------------
# atomic writes
# --------------------------------------------------------------------------------------------
def atomic_write_bytes(path: Union[str, os.PathLike], payload: bytes) -> None:
    """Write ``payload`` to ``path`` through a temporary file and ``os.replace`` (never half-written)."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp_path = tempfile.mkstemp(prefix=".tmp-", suffix=os.path.basename(path), dir=folder)
    try:
        # mkstemp creates 0600 files; give the result the permissions a plain open() would (0666 & ~umask)
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_path, path)
    except BaseException:
        if os.path.exists(tmp_path):
            os.remove(tmp_path)
        raise


# --------------------------------------------------------------------------------------------
# class references
# --------------------------------------------------------------------------------------------
def class_path(obj: Any) -> str:
    """``module:qualname`` of a class or function."""
    return f"{obj.__module__}:{obj.__qualname__}"


def _getattr_path(module: Any, qualname: str) -> Any:
    obj = module
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def resolve_class(path: str, allow_pickle: bool = False, key: str = "?") -> Any:
    """
    Resolve ``module:qualname`` without running code that the caller did not ask for.

    Modules of sbtf and modules already imported are used as they are; any other module is
    imported only when ``allow_pickle`` is True.
    """
    module_name, _, qualname = path.partition(":")
    if module_name in sys.modules:
        module = sys.modules[module_name]
    elif module_name == "sbtf" or module_name.startswith("sbtf.") or allow_pickle:
        module = importlib.import_module(module_name)
    else:
        raise ValueError(
            f"The model file refers to {qualname!r} from module {module_name!r} (key {key!r}), which is not "
            f"imported. Import it before loading, pass custom_objects={{{key!r}: {qualname.split('.')[-1]}}}, "
            "or pass allow_pickle=True if you trust the file.")
    try:
        return _getattr_path(module, qualname)
    except AttributeError as exc:
        raise ValueError(f"The model file refers to {path!r} (key {key!r}), which does not exist; pass "
                         f"custom_objects={{{key!r}: ...}} to replace it.") from exc


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


def _float_array(values) -> np.ndarray:
    return np.array(values, dtype=np.float64)


def space_from_dict(d: dict) -> gym.Space:
    """Rebuild a gymnasium space from ``space_to_dict`` output."""
    kind = d["type"]
    if kind == "Box":
        dtype = np.dtype(d["dtype"])
        return gym.spaces.Box(low=_float_array(d["low"]).astype(dtype), high=_float_array(d["high"]).astype(dtype),
                              shape=tuple(d["shape"]), dtype=dtype)
    if kind == "Discrete":
        return gym.spaces.Discrete(int(d["n"]), start=int(d.get("start", 0)))
    if kind == "MultiDiscrete":
        return gym.spaces.MultiDiscrete(np.array(d["nvec"]), dtype=np.dtype(d.get("dtype", "int64")))
    if kind == "MultiBinary":
        return gym.spaces.MultiBinary(d["n"])
    if kind == "Dict":
        return gym.spaces.Dict(OrderedDict((k, space_from_dict(s)) for k, s in d["spaces"]))
    if kind == "Tuple":
        return gym.spaces.Tuple([space_from_dict(s) for s in d["spaces"]])
    raise ModelFileError(f"Unknown space type {kind!r} in model file")


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
            f"{self.key!r} of this model was stored as a pickle ({self.description}) and was not loaded because "
            f"allow_pickle=False. Pass custom_objects={{{self.key!r}: ...}} or allow_pickle=True if you trust the "
            "file.")

    def __repr__(self) -> str:
        return f"<UnloadedObject {self.key}: {self.description}>"


def _unpickle_b64(blob: str) -> Any:
    import cloudpickle
    return cloudpickle.loads(base64.b64decode(blob))


def decode_value(value: Any, key: str = "?", allow_pickle: bool = False) -> Any:
    """Inverse of ``encode_value``; never runs code from the file unless ``allow_pickle``."""
    if isinstance(value, list):
        return [decode_value(v, key, allow_pickle) for v in value]
    if not isinstance(value, dict):
        return value
    if "__ndarray__" in value:
        return np.array(value["__ndarray__"], dtype=np.dtype(value["dtype"])).reshape(value["shape"])
    if "__space__" in value:
        return space_from_dict(value["__space__"])
    if "__tuple__" in value:
        return tuple(decode_value(v, key, allow_pickle) for v in value["__tuple__"])
    if "__dict_items__" in value:
        return {decode_value(k, key, allow_pickle): decode_value(v, key, allow_pickle)
                for k, v in value["__dict_items__"]}
    if "__class__" in value:
        return resolve_class(value["__class__"], allow_pickle, key)
    if "__enum__" in value:
        return resolve_class(value["__enum__"], allow_pickle, key)(decode_value(value["value"], key, allow_pickle))
    if "__activation__" in value:
        from sbtf.common.tf_layers import get_activation
        return get_activation(value["__activation__"])
    if "__data_object__" in value:
        cls = resolve_class(value["__data_object__"], allow_pickle, key)
        state = decode_value(value["state"], key, allow_pickle)
        if hasattr(cls, "from_dict"):
            return cls.from_dict(state)
        from sbtf.common.schedules import schedule_from_dict
        return schedule_from_dict(state)
    if "__callable__" in value:
        info = value["__callable__"]
        if allow_pickle and info.get("pickle"):
            return _unpickle_b64(info["pickle"])
        if info.get("sampled"):
            from sbtf.common.schedules import SampledSchedule
            warnings.warn(f"{key!r} was a custom callable ({info.get('repr')}); it was rebuilt as a piecewise-linear "
                          "schedule from values stored in the file. Pass allow_pickle=True to load the original "
                          "function, or custom_objects to replace it.")
            return SampledSchedule([tuple(p) for p in info["sampled"]])
        return UnloadedObject(key, info.get("repr", "callable"))
    if "__pickle__" in value:
        if allow_pickle and value.get("__pickle__"):
            return _unpickle_b64(value["__pickle__"])
        return UnloadedObject(key, f"{value.get('type')}: {value.get('repr')}")
    return {k: decode_value(v, key, allow_pickle) for k, v in value.items()}


def data_to_json(data: dict) -> str:
    """Serialise a model's data dict to JSON text."""
    return json.dumps({k: encode_value(v) for k, v in data.items()}, indent=2)


def json_to_data(text: str, custom_objects: Optional[dict] = None, allow_pickle: bool = False) -> dict:
    """Deserialise a model's data dict; keys in ``custom_objects`` are taken from it instead of the file."""
    custom_objects = custom_objects or {}
    raw = json.loads(text)
    data = {}
    for key, value in raw.items():
        data[key] = custom_objects[key] if key in custom_objects else decode_value(value, key, allow_pickle)
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


def bytes_to_params(payload: bytes, param_list: list[str]) -> "OrderedDict[str, np.ndarray]":
    with np.load(io.BytesIO(payload), allow_pickle=False) as npz:
        missing = [name for name in param_list if name not in npz.files]
        if missing:
            raise ModelFileError(f"The model file is corrupted: parameters {missing} are listed but missing")
        return OrderedDict((name, npz[name]) for name in param_list)


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
    if isinstance(load_path, str):
        with open(load_path, "rb") as handle:
            return handle.read()
    return load_path.read()


def inspect_model_bytes(payload: bytes) -> str:
    """'sbtf', 'sb2-zip', 'sb2-pkl' or raise ModelFileError."""
    if payload[:2] == b"PK":
        try:
            with zipfile.ZipFile(io.BytesIO(payload)) as archive:
                names = set(archive.namelist())
        except zipfile.BadZipFile as exc:
            raise ModelFileError(f"This file looks like a zip archive but is truncated or corrupted ({exc}).") from exc
        if FORMAT_MEMBER in names:
            return "sbtf"
        if "data" in names and ("parameters" in names or "parameter_list" in names):
            return "sb2-zip"
        raise ModelFileError(f"This zip archive is not a model file (members: {sorted(names)[:6]}); expected "
                             "'data', 'parameters' and 'parameter_list'.")
    if payload[:1] == b"\x80":
        return "sb2-pkl"
    raise ModelFileError("This file is not an sbtf or stable-baselines model file (neither a zip archive nor a "
                         "pickle).")


def load_from_zip_bytes(payload: bytes, custom_objects: Optional[dict] = None,
                        allow_pickle: bool = False) -> tuple[dict, "OrderedDict[str, np.ndarray]", dict]:
    """Read an sbtf model file: (data, params, format info)."""
    try:
        with zipfile.ZipFile(io.BytesIO(payload)) as archive:
            info = json.loads(archive.read(FORMAT_MEMBER))
            if info.get("format_version", 0) > FORMAT_VERSION:
                raise ModelFileError(f"This model file has format version {info['format_version']}, newer than this "
                                     f"sbtf understands ({FORMAT_VERSION}); upgrade sbtf.")
            data = json_to_data(archive.read("data").decode("utf-8"), custom_objects, allow_pickle)
            param_list = json.loads(archive.read("parameter_list"))
            params = bytes_to_params(archive.read("parameters"), param_list)
    except (zipfile.BadZipFile, KeyError, json.JSONDecodeError, EOFError, OSError) as exc:
        raise ModelFileError(f"The model file is truncated or corrupted: {exc}") from exc
    return data, params, info
