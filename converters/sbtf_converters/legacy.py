"""Load and convert stable-baselines 2.x (SB2) agent files without running code from them.

Entry points
* :func:`load_sb2_model` -- called by ``BaseRLModel.load`` (``PPO2.load("old.pkl")``) for SB2 files;
* :func:`convert` -- write an sbtf model file (and VecNormalize statistics) from an SB2 file, with a
  :class:`ConversionReport` of what was mapped and what could not be;
* :func:`parse_sb2` -- read an SB2 file into ``(algorithm, data, named parameters)`` without building a model
  (works for algorithms sbtf does not have yet);
* :func:`read_running_mean_std` / :func:`read_vec_normalize` -- SB2 ``obs_rms.pkl`` / ``ret_rms.pkl`` /
  ``vecnormalize.pkl`` statistics;
* :func:`register_cli` -- adds the ``convert`` sub-command to an ``argparse`` parser (``sbtf convert``).

Both SB2 formats are read: ``.pkl`` (a cloudpickle of ``(data, params)``; ``params`` is a nameless list in
files written before 2.6, an ``OrderedDict`` after) and ``.zip`` (``data`` JSON whose non-JSON entries are
base64 cloudpickles, ``parameters`` npz, ``parameter_list``). All pickles are interpreted by
:mod:`sbtf.common.fileio.safe_pickle` with the allow-list of :mod:`sbtf_converters.sb2_pickle` (no code of the file
runs); zip members and npz arrays are size-checked from their headers before anything is decompressed
(:mod:`sbtf.common.fileio.safe_zip`). Every way a file can be wrong raises a
:class:`~sbtf.common.file_errors.ModelFileError`; see ``docs/legacy.md`` and ``docs/security.md``.
"""
from __future__ import annotations

import argparse
import base64
import binascii
import copy
import dataclasses
import inspect
import io
import json
import os
import pickle
import sys
import warnings
from collections import OrderedDict
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
from gymnasium import spaces

from sbtf.common import file_errors
from sbtf.common.fileio import safe_pickle as sp
from sbtf.common.file_errors import (CorruptedFileError, FileLimitError, ModelDataError, ModelFileError, describe_value,
                                     get_load_limits)
from sbtf.common.fileio.load_budget import exception_text, space_budget
from sbtf.common.running_mean_std import RunningMeanStd
from sbtf.common.fileio.safe_pickle import check_tree
from sbtf.common.fileio.safe_zip import open_zip, read_file_limited, read_member, read_npz
from sbtf.common.save_util import inspect_model_bytes, resolve_save_path
from sbtf.common.schedules import SCHEDULES, SampledSchedule
from sbtf.common.vec_env.vec_normalize import VecNormalize, running_mean_std_from_data
from sbtf_converters import sb2_layouts as L
from sbtf_converters.sb2_algos import (ALGORITHMS, FAMILIES, AlgoSpec, LayoutContext, PolicyFamily, detect_algorithm,
                                       family_of, wrapped_algorithm)
from sbtf_converters.sb2_pickle import (LegacyFunction, LegacyStandIn, RefusedGlobalError, SB2GoalSelectionStrategy,
                                        describe, find_unknown_globals, is_legacy_global, materialize, pickle_globals,
                                        restricted_loads, rms_from_state)

__all__ = [
    "load_sb2_model", "parse_sb2", "read_sb2_file", "convert", "ConversionReport", "ParsedSB2",
    "read_running_mean_std", "read_vec_normalize", "read_sb2_statistics", "is_sb2_pickle", "register_cli",
    "add_arguments", "run_cli", "main",
    "LegacyModelError", "WrongAlgorithmError", "CustomPolicyError", "ParameterShapeError", "RefusedGlobalError",
    "ModelFileError",
]


class LegacyModelError(file_errors.ModelFileError):
    """A stable-baselines file that sbtf cannot map (see the message for what to do)."""


class WrongAlgorithmError(LegacyModelError, file_errors.WrongAlgorithmError):
    """The file holds a model of another algorithm than the class used to load it."""


class CustomPolicyError(LegacyModelError, file_errors.UnsafeFileError):
    """The file's policy is a custom class (or uses custom functions) that sbtf cannot rebuild from the file."""


class ParameterShapeError(LegacyModelError, file_errors.ParameterShapeError):
    """A parameter of the file does not have the shape the model needs."""


_MISSING = object()
Source = Union[bytes, bytearray, str, os.PathLike, io.IOBase]


# ------------------------------------------------------------------------------------------------
# report
# ------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class ConversionReport:
    """What was read from a stable-baselines file and how it was mapped (returned by :func:`convert`)."""

    source: str = ""
    target: str = ""
    file_format: str = ""
    parameter_storage: str = ""
    algorithm: str = ""
    detected_by: str = ""
    sb2_policy: str = ""
    sbtf_policy: str = ""
    policy_kwargs: dict = dataclasses.field(default_factory=dict)
    inferred: List[str] = dataclasses.field(default_factory=list)
    parameters: List[Tuple[str, str, Tuple[int, ...]]] = dataclasses.field(default_factory=list)
    dropped_parameters: List[Tuple[str, str]] = dataclasses.field(default_factory=list)
    renamed_keys: List[Tuple[str, str, str]] = dataclasses.field(default_factory=list)
    dropped_keys: List[Tuple[str, str]] = dataclasses.field(default_factory=list)
    defaulted_keys: List[Tuple[str, Any]] = dataclasses.field(default_factory=list)
    converted_values: List[Tuple[str, str, str]] = dataclasses.field(default_factory=list)
    replaced_values: List[Tuple[str, str, str]] = dataclasses.field(default_factory=list)
    notes: List[str] = dataclasses.field(default_factory=list)
    vecnormalize: List[Tuple[str, str]] = dataclasses.field(default_factory=list)
    warnings: List[str] = dataclasses.field(default_factory=list)

    def emit_warnings(self, stacklevel: int) -> None:
        """Issue the UserWarnings collected while mapping (values that could not be restored)."""
        for message in self.warnings:
            warnings.warn(message, UserWarning, stacklevel=stacklevel + 1)

    @property
    def lossless(self) -> bool:
        """True when nothing had to be replaced by a stand-in or a default."""
        return not self.replaced_values

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["policy_kwargs"] = {k: _json_safe(v) for k, v in self.policy_kwargs.items()}
        out["defaulted_keys"] = [(k, _json_safe(v)) for k, v in self.defaulted_keys]
        out["lossless"] = self.lossless
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=str)

    def __str__(self) -> str:
        lines = [f"stable-baselines file: {self.source or '<bytes>'} ({self.file_format}, parameters stored as "
                 f"{self.parameter_storage})",
                 f"algorithm: {self.algorithm} (detected from {self.detected_by})",
                 f"policy: {self.sb2_policy} -> {self.sbtf_policy} {_short_kwargs(self.policy_kwargs)}"]
        if self.target:
            lines.append(f"written: {self.target}")
        for item in self.inferred:
            lines.append(f"inferred: {item}")
        lines.append(f"parameters mapped: {len(self.parameters)}")
        for name, reason in self.dropped_parameters:
            lines.append(f"parameter not used: {name} ({reason})")
        for old, new, note in self.renamed_keys:
            lines.append(f"data key renamed: {old} -> {new} ({note})")
        for key, reason in self.dropped_keys:
            lines.append(f"data key dropped: {key} ({reason})")
        for key, value in self.defaulted_keys:
            lines.append(f"data key missing, default used: {key} = {describe_value(value, 120)}")
        for key, before, after in self.converted_values:
            lines.append(f"rebuilt: {key}: {before} -> {after}")
        for key, before, after in self.replaced_values:
            lines.append(f"NOT RESTORED: {key}: {before} -> {after}")
        for src, dst in self.vecnormalize:
            lines.append(f"VecNormalize statistics: {src} -> {dst}")
        lines.extend(f"note: {note}" for note in self.notes)
        return "\n".join(lines)


def _json_safe(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except TypeError:
        return describe(value) if not callable(value) else getattr(value, "__name__", repr(value))


def _short_kwargs(kwargs: dict) -> str:
    if not kwargs:
        return ""
    text = ", ".join(f"{describe_value(k, 60) if not isinstance(k, str) else k[:60]}="
                     f"{describe_value(getattr(v, '__name__', v), 80)}" for k, v in list(kwargs.items())[:12])
    return "(" + text + (", ..." if len(kwargs) > 12 else "") + ")"


# ------------------------------------------------------------------------------------------------
# reading files
# ------------------------------------------------------------------------------------------------
def _read_limited(source: Union[bytes, bytearray, str, os.PathLike, io.IOBase], what: str) -> bytes:
    """The bytes of a path or binary file, refusing files beyond the ``max_file_bytes`` limit before reading."""
    return read_file_limited(source, what)


def _read_source(source: Source) -> Tuple[bytes, str]:
    if isinstance(source, (bytes, bytearray)):
        return _read_limited(source, "stable-baselines file"), ""
    if isinstance(source, (str, os.PathLike)):
        from sbtf.common.save_util import resolve_load_path
        path = resolve_load_path(os.fspath(source))
        return _read_limited(path, "stable-baselines file"), str(path)
    return _read_limited(source, "stable-baselines file"), getattr(source, "name", "")


def _largest_array_in(value: Any, depth: int = 0, seen: Optional[set] = None) -> int:
    """The element count of the largest numeric array anywhere in an unpickled value (what the file carries)."""
    seen = set() if seen is None else seen
    if depth > 64 or id(value) in seen or len(seen) > get_load_limits().max_items:
        return 0
    if isinstance(value, np.ndarray):
        return int(value.size)
    children: Any = ()
    if isinstance(value, dict):
        children = value.values()
    elif isinstance(value, (list, tuple)):
        children = value
    elif isinstance(value, sp.Record):
        children = (value.args, value.state)
    else:
        return 0
    seen.add(id(value))
    return max((_largest_array_in(v, depth + 1, seen) for v in children), default=0)


def _unpickle(payload: bytes, allow_pickle: bool, what: str, carried: Optional[int] = None) -> Any:
    """
    Read one SB2 pickle (safe interpreter; ``allow_pickle`` for trusted files) and materialise its stand-ins. The
    spaces it describes are compared with the largest array the file carries (``carried``, default: the largest
    array inside this pickle) before they are built (``sbtf.common.fileio.load_budget``).
    """
    raw = restricted_loads(payload, allow_pickle=allow_pickle, what=f"the {what}")
    try:
        largest = max(int(carried or 0), _largest_array_in(raw))
        with space_budget(largest, f"the {what}"):
            return materialize(raw)
    except ModelFileError:
        raise
    except RecursionError as exc:
        raise FileLimitError(f"The {what} nests objects too deeply to be a model file.") from exc
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError, AssertionError) as exc:
        raise ModelDataError(f"The {what} holds a value sbtf cannot rebuild ({exception_text(exc)}); the file is "
                             "corrupted.") from exc


def _parse_json(payload: bytes, what: str) -> Any:
    """JSON from a zip member: every failure is a ModelFileError; values, containers and nesting are bounded
    (``save_util.parse_json``: counted before ``json.loads`` builds them)."""
    from sbtf.common.save_util import parse_json

    value = parse_json(payload, what)
    check_tree(value, f"the {what}")
    return value


def _read_sb2_zip(payload: bytes, custom_objects: dict,
                  allow_pickle: bool) -> Tuple[dict, "OrderedDict[str, np.ndarray]"]:
    """``(data, params)`` of an SB2 zip: members size-checked before decompression, parameters numeric only."""
    limits = get_load_limits()
    what = "stable-baselines zip file"
    with open_zip(payload, what) as archive:
        members = set(archive.namelist())
        data_bytes = read_member(archive, "data", limits.max_json_bytes, what)
        list_bytes = (read_member(archive, "parameter_list", limits.max_json_bytes, what)
                      if "parameter_list" in members else None)
        if "parameters" not in members:
            raise CorruptedFileError("This stable-baselines zip file has no 'parameters' member; it is truncated or "
                                     "corrupted.")
        params_bytes = read_member(archive, "parameters", limits.max_array_bytes + (1 << 20), what)
    raw = _parse_json(data_bytes, "'data' member of this stable-baselines zip file")
    if not isinstance(raw, dict):
        raise CorruptedFileError("The 'data' member of this stable-baselines zip file is not a JSON object; the file "
                                 "is corrupted.")
    param_list = None
    if list_bytes is not None:
        param_list = _parse_json(list_bytes, "'parameter_list' member of this stable-baselines zip file")
        if not isinstance(param_list, list) or not all(isinstance(n, str) for n in param_list):
            raise CorruptedFileError("The 'parameter_list' member of this stable-baselines zip file is not a list of "
                                     "names; the file is corrupted.")
    params = read_npz(params_bytes, names=param_list, what="parameters of this stable-baselines zip file")
    carried = max((int(v.size) for v in params.values()), default=0)
    data = {}
    for key, value in raw.items():
        if key in custom_objects:
            data[key] = custom_objects[key]
        elif isinstance(value, dict) and ":serialized:" in value:
            try:
                blob = base64.b64decode(value[":serialized:"], validate=False)
            except (binascii.Error, ValueError, TypeError) as exc:
                raise CorruptedFileError(f"Data entry {key!r} of this zip file is not valid base64 ({exc}).") from exc
            try:
                data[key] = _unpickle(blob, allow_pickle, f"data entry {key!r} of this zip file", carried)
            except RefusedGlobalError as exc:
                raise RefusedGlobalError(f"Data entry {key!r}: {exc}") from exc
        else:
            data[key] = value
    for key, value in custom_objects.items():
        data.setdefault(key, value)
    return data, OrderedDict((str(n), v) for n, v in params.items())


def read_sb2_file(source: Source, custom_objects: Optional[dict] = None,
                  allow_pickle: bool = False) -> Tuple[str, dict, Union[list, "OrderedDict[str, np.ndarray]"], str]:
    """
    Read an SB2 model file: ``(format, data, params, parameter storage)`` with ``format`` in ``{"pkl", "zip"}``,
    ``data`` the unpickled data dict (stand-ins materialised, see :mod:`sbtf_converters.sb2_pickle`) and
    ``params`` a list (pre-2.6 pickles) or an ordered dict name -> array. ``custom_objects`` values replace data
    entries (in zip files the stored entry is then not even unpickled).
    """

    payload, path = _read_source(source)
    custom_objects = dict(custom_objects or {})
    kind = inspect_model_bytes(payload)
    if kind == "sbtf":
        raise ModelFileError(f"{path or 'This file'} is already an sbtf model file; load it with <Algorithm>.load.")
    if kind != "sb2-pkl":
        data, named = _read_sb2_zip(payload, custom_objects, allow_pickle)
        return "zip", data, named, "npz"
    loaded = _unpickle(payload, allow_pickle, "stable-baselines model file")
    if not (isinstance(loaded, (tuple, list)) and len(loaded) == 2 and isinstance(loaded[0], dict)
            and isinstance(loaded[1], (list, tuple, dict))):
        raise CorruptedFileError(f"{path or 'This pickle'} is not a stable-baselines model file: expected a "
                                 f"(data dict, parameters) pair, got {type(loaded).__name__}.")
    data, params = dict(loaded[0]), loaded[1]
    for key, value in custom_objects.items():
        data[key] = value

    def as_array(v: Any) -> Any:  # scalars such as deepq/eps are pickled as numpy scalars
        return np.asarray(v) if isinstance(v, np.generic) else v

    if isinstance(params, dict):
        storage = "OrderedDict"
        odd = next((k for k in params if not isinstance(k, str)), None)
        if odd is not None:
            raise CorruptedFileError(f"The parameters of this stable-baselines file are named by "
                                     f"{describe_value(odd, 120)} ({type(odd).__name__}), not by strings; the file is "
                                     "corrupted.")
        params = OrderedDict((k, as_array(v)) for k, v in params.items())
        values = list(params.values())
    else:
        storage = "list"
        params = [as_array(v) for v in params]
        values = params
    bad = [i for i, v in enumerate(values) if not isinstance(v, np.ndarray)]
    if bad:
        unknown = find_unknown_globals(values)
        if unknown:
            raise RefusedGlobalError(f"The parameters of this file refer to {unknown[0].sb2_path!r}, which is not "
                                     "an array; refusing to load it.")
        raise CorruptedFileError(f"The parameters of this stable-baselines file are not all arrays (entry {bad[0]} is "
                                 f"{type(values[bad[0]]).__name__}); the file is corrupted.")
    return "pkl", data, params, storage


# ------------------------------------------------------------------------------------------------
# data keys
# ------------------------------------------------------------------------------------------------
def _sbtf_defaults(spec: AlgoSpec) -> Dict[str, Any]:
    """Constructor defaults of the sbtf class (empty when the algorithm is not in sbtf yet)."""
    try:
        cls = spec.sbtf_class()
    except ImportError:
        return {}
    out = {}
    for name, param in inspect.signature(cls.__init__).parameters.items():
        if param.default is not inspect.Parameter.empty:
            out[name] = param.default
    return out


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


_CONSTFN = "constfn.<locals>.func"
_ZOO_LINEAR = "linear_schedule.<locals>.func"


def _resolve_function(key: str, fn: LegacyFunction, spec: AlgoSpec, report: ConversionReport) -> Any:
    """A cloudpickled function of an old file -> an sbtf value, without running it."""
    fn.key = key
    qualname = fn.qualname or fn.name or ""
    module = fn.module or ""
    closure = fn.closure_values
    if qualname == _CONSTFN and len(closure) == 1 and _is_number(closure[0]) and module.startswith("stable_baselines"):
        value = float(closure[0])
        report.converted_values.append((key, fn.describe(), f"{value!r} (constant)"))  # a float
        return value
    if qualname == _ZOO_LINEAR and len(closure) == 1 and _is_number(closure[0]) and module.split(".")[-1] == "utils":
        initial = float(closure[0])
        schedule = SampledSchedule([(0.0, 0.0), (1.0, initial)])
        report.converted_values.append((key, fn.describe(), f"SampledSchedule: progress * {initial!r} (the zoo's "
                                                            "linear_schedule)"))
        return schedule
    defaults = _sbtf_defaults(spec)
    default = defaults.get(key, spec.sb2_defaults.get(key, _MISSING))
    if default is _MISSING:
        report.replaced_values.append((key, fn.describe(), "a stand-in that raises when called"))
        return fn
    message = (f"{key!r} of this stable-baselines file is a custom {fn.describe()}; sbtf does not run code from "
               f"model files, so it was replaced by the constant {default!r} ({spec.name}'s default). Pass "
               f"custom_objects={{{key!r}: ...}} to set your own schedule.")
    report.warnings.append(message)
    report.replaced_values.append((key, fn.describe(), f"constant {default!r} ({spec.name} default)"))
    return default


def _clean_value(key: str, value: Any, spec: AlgoSpec, report: ConversionReport) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray) and value.shape == () and value.dtype != object:
        return value.item()
    if isinstance(value, LegacyFunction):
        return _resolve_function(key, value, spec, report)
    if isinstance(value, LegacyStandIn):
        value.key = key
        report.replaced_values.append((key, value.description, "None"))
        return None
    if isinstance(value, SB2GoalSelectionStrategy):
        report.converted_values.append((key, f"GoalSelectionStrategy.{value.name}", repr(value.name.lower())))
        return value.name.lower()
    if is_legacy_global(value, "algorithm"):
        algo = ALGORITHMS.get(value.sb2_name)
        if algo is not None and algo.is_available():
            cls = algo.sbtf_class()
            report.converted_values.append((key, value.sb2_path, f"{cls.__module__}.{cls.__name__}"))
            return cls
        report.notes.append(f"{key}: {value.sb2_path} kept as the name {value.sb2_name!r} (not in sbtf yet)")
        return value.sb2_name
    if is_legacy_global(value, "function"):
        table = {"constant": "constant", "linear_schedule": "linear", "middle_drop": "middle_drop",
                 "double_linear_con": "double_linear_con", "double_middle_drop": "double_middle_drop"}
        if value.sb2_name in table:
            report.converted_values.append((key, value.sb2_path, f"sbtf.common.schedules.{value.sb2_name}"))
            return SCHEDULES[table[value.sb2_name]]
    unknown = find_unknown_globals(value, kinds=("unknown", "policy", "function", "activation", "algorithm"))
    if unknown:
        raise RefusedGlobalError(f"Data entry {key!r} of this stable-baselines file refers to {unknown[0].sb2_path!r}"
                                 ", which sbtf does not load (it is not on the allow-list of data classes). Pass "
                                 f"custom_objects={{{key!r}: ...}} to replace it, or allow_pickle=True if you trust "
                                 "the file.")
    if isinstance(value, list) and key in ("observation_range", "return_range"):
        return tuple(value)
    return value


def _map_data(spec: AlgoSpec, raw: dict, custom_objects: dict, report: ConversionReport) -> dict:
    allowed = set(spec.saved_keys)
    stale = dict(spec.stale_keys)
    renames = dict(spec.renames)
    defaults = dict(spec.defaults)
    if spec.name == "HER":
        inner = ALGORITHMS[_wrapped_name(raw)]
        allowed |= set(inner.saved_keys)
        stale.update(inner.stale_keys)
        renames.update(inner.renames)
        defaults = {**inner.defaults, **defaults}
    out: dict = {}
    for key, value in raw.items():
        if not isinstance(key, str):  # SB2 writes attribute names; anything else is dropped (and never formatted)
            report.dropped_keys.append((describe_value(key, 80), "not an attribute name"))
            continue
        if key in custom_objects:
            out[key] = custom_objects[key]
            continue
        if key in stale:
            report.dropped_keys.append((key, stale[key]))
            continue
        if key in renames:
            new_key, new_value, note = renames[key](value, raw)
            if new_key == key:
                out[key] = new_value
            elif new_key is not None:
                out[new_key] = new_value
                report.renamed_keys.append((key, new_key, note))
            else:
                report.dropped_keys.append((key, note))
            continue
        if key not in allowed:
            report.dropped_keys.append((key, f"not an attribute that stable-baselines 2.10 {spec.name} saves"))
            continue
        out[key] = value
    for key, default in defaults.items():
        if key not in out:
            out[key] = copy.deepcopy(default)
            report.defaulted_keys.append((key, default))
    value_spec = ALGORITHMS[_wrapped_name(raw)] if spec.name == "HER" else spec
    for key in list(out):
        if key in ("policy", "policy_kwargs") or key in custom_objects:
            continue
        out[key] = _clean_value(key, out[key], value_spec, report)
    return out


def _wrapped_name(raw: dict) -> str:
    return wrapped_algorithm(raw)


# ------------------------------------------------------------------------------------------------
# policies
# ------------------------------------------------------------------------------------------------
_ACTIVATIONS = {"relu": "relu", "tanh": "tanh", "sigmoid": "sigmoid", "elu": "elu", "softplus": "softplus",
                "selu": "selu", "leaky_relu": "leaky_relu", "identity": "identity", "linear": "linear"}


def _map_policy_kwargs(kwargs: Any, report: ConversionReport) -> dict:
    from sbtf.common.tf_layers import get_activation

    if kwargs is None:
        return {}
    if not isinstance(kwargs, dict):
        raise LegacyModelError(f"policy_kwargs of this file is {describe_value(kwargs)}, not a dict.")
    out = {}
    for key, value in kwargs.items():
        if is_legacy_global(value, "activation"):
            name = value.sb2_name
            if name not in _ACTIVATIONS:
                raise CustomPolicyError(f"policy_kwargs[{key!r}] is {value.sb2_path}, an activation sbtf does not "
                                        "have; pass custom_objects={'policy_kwargs': {...}} with a TF2 function.")
            out[key] = get_activation(_ACTIVATIONS[name])
            report.converted_values.append((f"policy_kwargs[{key!r}]", value.sb2_path, f"tf {name}"))
        elif is_legacy_global(value) and value.sb2_name == "nature_cnn":
            from sbtf.common.policies import nature_cnn
            out[key] = nature_cnn
        elif isinstance(value, (LegacyFunction, LegacyStandIn)) or is_legacy_global(value):
            raise CustomPolicyError(
                f"policy_kwargs[{key!r}] of this file is {describe(value)}, custom code that sbtf cannot load from "
                f"an old file. Pass custom_objects={{'policy_kwargs': {{..., {key!r}: <TF2 equivalent>}}}} when "
                "loading.")
        elif isinstance(value, np.generic):
            out[key] = value.item()
        else:
            out[key] = value
    return out


@dataclasses.dataclass
class _PolicyChoice:
    sb2_path: str
    name: Optional[str]          # standard policy name in the family's sbtf module (None: user class)
    user_class: Any = None       # an sbtf policy class given by the user / allow_pickle
    zoo_kwargs: dict = dataclasses.field(default_factory=dict)


def _choose_policy(value: Any, family: PolicyFamily, algo: str, from_custom: bool) -> _PolicyChoice:
    if isinstance(value, type) and not is_legacy_global(value):
        path = f"{value.__module__}.{value.__qualname__}"
        if value.__module__ == family.sbtf_module and value.__name__ in family.policy_names:
            return _PolicyChoice(path, value.__name__)
        try:
            from sbtf.common.policies import BasePolicy
            if issubclass(value, BasePolicy):
                return _PolicyChoice(path, None, user_class=value)
        except ImportError:  # pragma: no cover
            pass
        if from_custom:
            return _PolicyChoice(path, None, user_class=value)
        raise CustomPolicyError(f"The file's policy {path} is not an sbtf policy class; pass "
                                "custom_objects={'policy': <sbtf policy class>}.")
    if isinstance(value, str) and value in family.policy_names:
        return _PolicyChoice(value, value)
    if is_legacy_global(value, "policy"):
        if value.sb2_name in family.zoo_policies:
            name, kwargs = family.zoo_policies[value.sb2_name]
            return _PolicyChoice(value.sb2_path, name, zoo_kwargs=copy.deepcopy(kwargs))
        if value.sb2_module in family.sb2_modules and value.sb2_name in family.policy_names:
            return _PolicyChoice(value.sb2_path, value.sb2_name)
        for other in FAMILIES.values():
            if other is not family and value.sb2_module in other.sb2_modules:
                raise LegacyModelError(f"This {algo} file's policy is {value.sb2_path}, a policy of another "
                                       "algorithm family; the file is inconsistent.")
    raise CustomPolicyError(_custom_policy_message(value, algo, family))


def _custom_policy_message(value: Any, algo: str, family: PolicyFamily, hint: str = "") -> str:
    return (f"This {algo} file uses the custom policy class {describe(value)}, which sbtf cannot rebuild from the file "
            f"(its code is not loaded). Load it with custom_objects={{'policy': <sbtf policy class>}}, e.g. "
            f"custom_objects={{'policy': {family.sbtf_module}.MlpPolicy}}, and give its architecture with "
            f"policy_kwargs=... (or custom_objects={{'policy_kwargs': ...}}) when it is not the default one.{hint}")


# ------------------------------------------------------------------------------------------------
# parameters
# ------------------------------------------------------------------------------------------------
def _shape(value: Any) -> Tuple[int, ...]:
    return tuple(int(s) for s in np.shape(value))


def _fits(values: Sequence[np.ndarray], layout: L.Layout) -> bool:
    return len(values) == len(layout) and all(_shape(v) == tuple(s) for v, (_, s) in zip(values, layout))


def _match_list(values: list, layout: L.Layout, spec: AlgoSpec,
                allow_trailing: bool = False) -> Tuple[Optional[list], Optional[str]]:
    """
    Name a positional list by ``layout``, undoing the duplicated lists of old files (reference 13.2). With
    ``allow_trailing``, extra trailing arrays are ignored as SB2's ``load_parameters`` did (last resort only).
    """
    n = len(layout)
    if _fits(values, layout):
        return values, None
    if len(values) == 2 * n and _fits(values[:n], layout) and all(
            np.array_equal(values[i], values[i + n]) for i in range(n)):
        return values[:n], f"the file holds its {n} parameter arrays twice (old stable-baselines); the copy was dropped"
    if spec.name == "DDPG":
        n_norm = sum(1 for name, _ in layout if name.startswith("input/"))
        n_pt = n - n_norm
        if len(values) == 2 * n_pt + n_norm:
            candidate = values[:n_pt] + values[len(values) - n_norm:]
            if _fits(candidate, layout):
                return candidate, ("pre-2.6 DDPG layout [params + target] * 2 + normalisation: de-duplicated as "
                                   "DDPG.load does")
    if allow_trailing and len(values) > n and _fits(values[:n], layout):
        return values[:n], f"{len(values) - n} trailing arrays ignored (as stable-baselines' load_parameters does)"
    return None, None


def _describe_mismatch(params: Union[list, dict], layout: L.Layout, what: str) -> str:
    if isinstance(params, dict):
        expected = OrderedDict(layout)
        for name, shape in layout:
            if name not in params:
                return f"parameter {name} (shape {shape}) expected for {what} is missing from the file"
            if _shape(params[name]) != tuple(shape):
                return (f"parameter {name} has shape {_shape(params[name])} in the file but {what} needs "
                        f"{tuple(shape)}")
        extra = [n for n in params if n not in expected]
        return f"the file has parameters that {what} does not have: {extra[:5]}"
    for i, (value, (name, shape)) in enumerate(zip(params, layout)):
        if _shape(value) != tuple(shape):
            return (f"parameter #{i} ({name}) has shape {_shape(value)} in the file but {what} needs {tuple(shape)} "
                    f"(the file holds {len(params)} arrays, {len(layout)} expected)")
    return f"the file holds {len(params)} parameter arrays but {what} has {len(layout)}"


_MAX_CANDIDATES = 5000


def _match_params(spec: AlgoSpec, family: PolicyFamily, base_arch: Any, params: Union[list, dict],
                  ctx: LayoutContext, allow_inference: bool, what: str,
                  report: ConversionReport) -> Tuple[Any, "OrderedDict[str, np.ndarray]"]:
    named = isinstance(params, dict)
    if named:
        file_shapes = OrderedDict((k, _shape(v)) for k, v in params.items())
        candidates = [base_arch]
        if allow_inference:
            candidates.append(family.arch_from_names(file_shapes, base_arch, ctx))
    else:
        shapes = [_shape(v) for v in params]
        candidates = [base_arch]
        if allow_inference:
            candidates = _chain_limited(candidates, family.candidates(shapes, base_arch, ctx, spec.name))
    layouts = []
    for arch in candidates:
        try:
            layouts.append((arch, spec.layout(ctx, arch)))
        except (ValueError, NotImplementedError, TypeError, KeyError):
            continue
    for allow_trailing in ((False,) if named else (False, True)):
        for arch, layout in layouts:
            if named:
                if set(n for n, _ in layout) == set(params) and all(file_shapes[n] == tuple(s) for n, s in layout):
                    return arch, OrderedDict((n, params[n]) for n, _ in layout)
            else:
                matched, note = _match_list(list(params), layout, spec, allow_trailing)
                if matched is not None:
                    if note:
                        report.notes.append(note)
                    return arch, OrderedDict((n, v) for (n, _), v in zip(layout, matched))
    try:
        base_layout = spec.layout(ctx, base_arch)
    except (ValueError, NotImplementedError) as exc:
        raise ParameterShapeError(f"This {spec.name} file cannot be mapped: {exc}") from exc
    raise ParameterShapeError(f"This stable-baselines {spec.name} file does not fit {what}: "
                              f"{_describe_mismatch(params, base_layout, what)}.")


def _chain_limited(first: list, rest) -> list:
    out = list(first)
    for i, item in enumerate(rest):
        if i >= _MAX_CANDIDATES:
            break
        out.append(item)
    return out


def _to_sbtf_params(spec: AlgoSpec, params: "OrderedDict[str, np.ndarray]") -> "OrderedDict[str, np.ndarray]":
    """SB2 names/layout -> sbtf: conv biases (1, C, 1, 1) -> (C,), then the algorithm's own hook."""
    out = OrderedDict()
    for name, value in params.items():
        value = np.asarray(value)
        if name.endswith("/b:0") and value.ndim == 4:
            value = value.reshape(-1)
        out[name] = value
    if spec.to_sbtf_names is not None:
        out = OrderedDict(spec.to_sbtf_names(out))
    return out


# ------------------------------------------------------------------------------------------------
# parse
# ------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class ParsedSB2:
    """An SB2 file read and mapped to sbtf terms (no model built)."""

    algorithm: str
    data: dict
    params: Union["OrderedDict[str, np.ndarray]", list]
    policy_name: Optional[str]
    policy_module: str
    policy_class: Any
    policy_kwargs: dict
    arch: Any
    report: ConversionReport
    raw_data: dict

    @property
    def named(self) -> bool:
        return isinstance(self.params, dict)


#: what mapping a file's values can raise when they do not have the types SB2 wrote (they become ModelDataErrors)
_MAPPING_ERRORS = (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError, ZeroDivisionError,
                   RecursionError)


def _mapping_error(exc: BaseException) -> ModelFileError:
    if isinstance(exc, ModelFileError):
        return exc
    if isinstance(exc, RecursionError):
        return FileLimitError("This stable-baselines file nests values too deeply to be a model file.")
    return ModelDataError(f"This stable-baselines file holds values sbtf cannot map ({exception_text(exc)}); the "
                          "file is corrupted or was edited.")


def parse_sb2(source: Source, custom_objects: Optional[dict] = None, allow_pickle: bool = False,
              policy_kwargs: Optional[dict] = None, report: Optional[ConversionReport] = None,
              expected_class: Any = None) -> ParsedSB2:
    """
    Read an SB2 file and map it to sbtf terms (see :func:`_parse_sb2`); a value of the wrong type anywhere raises a
    :class:`ModelDataError` (a ``ModelFileError``), never a bare TypeError / KeyError.
    """
    try:
        return _parse_sb2(source, custom_objects, allow_pickle, policy_kwargs, report, expected_class)
    except ModelFileError:
        raise
    except _MAPPING_ERRORS as exc:
        raise _mapping_error(exc) from exc


def _parse_sb2(source: Source, custom_objects: Optional[dict] = None, allow_pickle: bool = False,
               policy_kwargs: Optional[dict] = None, report: Optional[ConversionReport] = None,
               expected_class: Any = None) -> ParsedSB2:
    """
    Read an SB2 file and map it to sbtf terms: detected algorithm, data dict with sbtf/gymnasium values, parameters
    named by SB2 2.10's ``get_parameter_list()`` order (checked against the reference layout), policy class
    name/module and ``policy_kwargs`` (inferred from parameter shapes when the file does not say them).

    ``data["policy"]`` is the sbtf policy class when that algorithm exists in sbtf, else the policy's name.
    """
    report = report if report is not None else ConversionReport()
    custom_objects = dict(custom_objects or {})
    payload, path = _read_source(source)
    report.source = path or report.source
    file_format, raw, params, storage = read_sb2_file(payload, custom_objects, allow_pickle)
    report.file_format = file_format
    report.parameter_storage = storage
    names = list(params) if isinstance(params, dict) else []
    algo, how = detect_algorithm(raw, names)
    if algo is None:
        raise ModelFileError(f"Cannot tell which stable-baselines algorithm wrote {path or 'this file'} ({how}).")
    report.algorithm, report.detected_by = algo, how
    if expected_class is not None:
        _check_algorithm(expected_class, algo, how)
    spec = ALGORITHMS[algo]
    family, layout_spec = family_of(spec, raw)
    data = _map_data(spec, raw, custom_objects, report)
    for key in ("observation_space", "action_space"):
        if key not in data:
            raise ModelFileError(f"This stable-baselines file has no {key!r}; it is not a complete model file.")
        import gymnasium
        if not isinstance(data[key], gymnasium.spaces.Space):
            raise ModelFileError(f"The {key!r} of this stable-baselines file is {describe(data[key])}, not a space.")
    ctx = LayoutContext(data["observation_space"], data["action_space"], data)

    # policy and its kwargs
    user_kwargs = policy_kwargs is not None or "policy_kwargs" in custom_objects
    stored_kwargs = _map_policy_kwargs(policy_kwargs if policy_kwargs is not None else data.get("policy_kwargs"),
                                       report)
    if policy_kwargs is not None and policy_kwargs != raw.get("policy_kwargs"):
        report.notes.append(f"policy_kwargs given to load replace the stored ones "
                            f"({describe_value(raw.get('policy_kwargs'), 200)})")
    try:
        choice = _choose_policy(data.get("policy"), family, algo, from_custom="policy" in custom_objects)
    except CustomPolicyError as exc:
        raise CustomPolicyError(str(exc) + _inference_hint(layout_spec, family, params, ctx)) from None
    report.sb2_policy = choice.sb2_path
    kwargs = {**choice.zoo_kwargs, **stored_kwargs} if not user_kwargs else dict(stored_kwargs)
    if choice.zoo_kwargs and not user_kwargs:
        report.converted_values.append(("policy", choice.sb2_path, f"{choice.name} with {choice.zoo_kwargs} (the "
                                                                   "rl-baselines-zoo class)"))
    custom_extractor = _has_custom_cnn_extractor(kwargs)
    if choice.name is not None and not custom_extractor:
        base_arch = family.arch_from_policy(choice.name, kwargs, ctx)
        what = f"{choice.name}{_short_kwargs(kwargs)} on {ctx.observation_space} / {ctx.action_space}"
        arch, named = _match_params(layout_spec, family, base_arch, params, ctx, not user_kwargs, what, report)
        policy_name, out_kwargs = family.policy_for_arch(arch, choice.name, kwargs)
        if policy_name != choice.name or arch != base_arch:
            report.inferred.append(f"{policy_name}{_short_kwargs(out_kwargs)} from the parameter shapes (the file's "
                                   f"class/kwargs said {choice.name}{_short_kwargs(kwargs)})")
        policy_module = family.sbtf_module
        policy_class = None
        try:
            import importlib
            policy_class = getattr(importlib.import_module(family.sbtf_module), policy_name)
        except (ImportError, AttributeError):
            policy_class = None
        mapped_params: Union[OrderedDict, list] = named
    else:
        arch = None
        policy_class = choice.user_class
        if choice.name is not None:  # a standard policy with the user's cnn_extractor: its layout is the extractor's
            import importlib
            policy_class = getattr(importlib.import_module(family.sbtf_module), choice.name)
        policy_name = getattr(policy_class, "__name__", None)
        policy_module = getattr(policy_class, "__module__", "")
        out_kwargs = kwargs
        mapped_params = params
        what = "the cnn_extractor given in policy_kwargs" if custom_extractor else f"policy {choice.sb2_path} is a user class"
        report.notes.append(f"{what}: parameters are matched by "
                            f"{'name' if isinstance(params, dict) else 'position'} when the model is built")
    report.sbtf_policy = f"{policy_module}.{policy_name}"
    report.policy_kwargs = dict(out_kwargs)
    data["policy"] = policy_class if policy_class is not None else policy_name
    data["policy_kwargs"] = out_kwargs
    return ParsedSB2(algo, data, mapped_params, policy_name, policy_module, policy_class, out_kwargs, arch, report,
                     raw)


def _has_custom_cnn_extractor(kwargs: dict) -> bool:
    """Whether policy kwargs name a CNN extractor of the user's (an SB2 function or a Keras layer), not nature_cnn."""
    from sbtf.common.tf_layers import nature_cnn

    extractor = kwargs.get("cnn_extractor")
    return extractor is not None and extractor is not nature_cnn


def _inference_hint(spec: AlgoSpec, family: PolicyFamily, params: Union[list, dict], ctx: LayoutContext) -> str:
    """For the custom-policy error: the standard architecture the parameters fit, if any."""
    base = family.default_arch()
    report = ConversionReport()
    try:
        arch, _ = _match_params(spec, family, base, params, ctx, True, "a standard policy", report)
    except (LegacyModelError, ValueError, KeyError, TypeError):
        return ""
    name, kwargs = family.policy_for_arch(arch, "", {})
    return (f" Its parameters fit {family.sbtf_module}.{name} with policy_kwargs={describe_value(kwargs, 200)} (same activation "
            "function assumed: check it).")


# ------------------------------------------------------------------------------------------------
# building models
# ------------------------------------------------------------------------------------------------
def _bounds_equivalent(a: np.ndarray, b: np.ndarray) -> bool:
    """Box bounds equal, treating +-float32 max (old gym's "unbounded") as +-inf."""
    def norm(x):
        x = np.asarray(x, dtype=np.float64)
        return np.where(np.abs(x) >= 3.0e38, np.sign(x) * np.inf, x)
    a, b = norm(a), norm(b)
    return a.shape == b.shape and bool(np.all((a == b) | np.isclose(a, b, rtol=1e-6, atol=1e-6)))


def _spaces_compatible(old: Any, new: Any) -> bool:
    if type(old) is not type(new):
        return False
    if isinstance(old, spaces.Box):
        return old.shape == new.shape and _bounds_equivalent(old.low, new.low) and _bounds_equivalent(old.high,
                                                                                                       new.high)
    if isinstance(old, spaces.Discrete):
        return int(old.n) == int(new.n) and int(old.start) == int(new.start)
    if isinstance(old, spaces.MultiDiscrete):
        return np.array_equal(old.nvec, new.nvec)
    if isinstance(old, spaces.MultiBinary):
        return np.array_equal(np.asarray(old.n), np.asarray(new.n))
    if isinstance(old, spaces.Dict):
        return list(old.spaces) == list(new.spaces) and all(
            _spaces_compatible(old.spaces[k], new.spaces[k]) for k in old.spaces)
    return old == new


def _attach_env(model: Any, env: Any, report: ConversionReport) -> None:
    """``set_env`` that accepts the gymnasium successor of the old env (e.g. +-inf where old gym had float32 max)."""
    vec_env = model._make_vec_env(env)
    for attr in ("observation_space", "action_space"):
        old, new = getattr(model, attr), getattr(vec_env, attr)
        if old is not None and old != new and _spaces_compatible(old, new):
            setattr(model, attr, new)
            report.notes.append(f"{attr} of the file ({old}) matched the env's ({new}); the env's is used")
    model.set_env(vec_env)


def _build_model(cls: Any, parsed: ParsedSB2, env: Any, kwargs: dict) -> Any:
    spec = ALGORITHMS[parsed.algorithm]
    report = parsed.report
    if parsed.policy_class is None:
        raise ImportError(f"{parsed.policy_module}.{parsed.policy_name} is not available in this version of sbtf.")
    if isinstance(parsed.params, dict):
        params: Union[OrderedDict, list] = _to_sbtf_params(spec, parsed.params)
    else:
        params = [np.asarray(v) for v in parsed.params]
    data = dict(parsed.data)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Loading model parameters from a list",
                                    category=DeprecationWarning)
            model = cls._from_data(data, params, env=None, **kwargs)
    except file_errors.MissingParametersError as exc:  # the model has parameters that the file does not give
        raise LegacyModelError(f"The sbtf {cls.__name__} model built from this file needs parameters the file does "
                               f"not have: {exc}") from exc
    except file_errors.ParameterShapeError as exc:
        raise ParameterShapeError(f"{exc} (stable-baselines file mapped to {cls.__name__})", exc.name,
                                  exc.stored_shape, exc.model_shape) from exc
    model_names = set(model.get_parameters())
    if isinstance(params, dict):
        for name, value in params.items():
            if name in model_names:
                report.parameters.append((name, name, _shape(parsed.params[name])))
            else:
                report.dropped_parameters.append((name, f"not a parameter of the sbtf {cls.__name__} model"))
    else:
        for (name, value) in zip(model.get_parameters(), params):
            report.parameters.append((f"#{len(report.parameters)}", name, _shape(value)))
    if env is not None:
        _attach_env(model, env, report)
    return model


def _check_algorithm(cls: Any, algorithm: str, detected_by: str) -> None:
    accepted = set(cls._accepted_algos()) if hasattr(cls, "_accepted_algos") else {cls.__name__}
    for name in list(accepted):
        spec = ALGORITHMS.get(name)
        if spec is not None:
            accepted.update(spec.accepts)
    if algorithm not in accepted:
        raise WrongAlgorithmError(
            f"This stable-baselines file holds a {algorithm} model (detected from {detected_by}); use "
            f"{algorithm}.load (from sbtf import {algorithm}) instead of {cls.__name__}.load.")


def load_sb2_model(cls: Any, payload: Source, env: Any = None, custom_objects: Optional[dict] = None,
                   allow_pickle: bool = False, **kwargs: Any) -> Any:
    """
    Build an sbtf model of class ``cls`` from a stable-baselines 2.x file (bytes, path or file object).

    :param cls: the sbtf algorithm class (``PPO2``, ``A2C``, ...); must match the file's algorithm
    :param payload: the file's bytes (or a path / file object)
    :param env: environment to attach (gymnasium successor envs are accepted, e.g. Pendulum-v1 for Pendulum-v0)
    :param custom_objects: values that replace stored ones, by key (``policy``, ``policy_kwargs``,
        ``learning_rate``, ...); a replaced entry is not unpickled in zip files
    :param allow_pickle: import classes that are not on the allow-list (trusted files only); pickled
        functions are still never executed
    :param kwargs: attributes set on the model before it is built (``policy_kwargs`` replaces the stored ones)
    :return: the model
    """
    policy_kwargs = kwargs.pop("policy_kwargs", None)
    parsed = parse_sb2(payload, custom_objects=custom_objects, allow_pickle=allow_pickle, policy_kwargs=policy_kwargs,
                       expected_class=cls)
    parsed.report.emit_warnings(stacklevel=3)  # at the caller of <Algorithm>.load
    return _build_model(cls, parsed, env, kwargs)


# ------------------------------------------------------------------------------------------------
# VecNormalize statistics
# ------------------------------------------------------------------------------------------------
def _read_bytes(path: Union[str, os.PathLike, bytes]) -> Tuple[bytes, str]:
    if isinstance(path, (bytes, bytearray)):
        return _read_limited(path, "statistics file"), "<bytes>"
    return _read_limited(path, "statistics file"), os.fspath(path)


def is_sb2_pickle(path_or_bytes: Union[str, os.PathLike, bytes]) -> bool:
    """True when the file is a pickle that refers to ``stable_baselines`` classes (read statically, not run)."""
    try:
        payload, _ = _read_bytes(path_or_bytes)
    except (OSError, ModelFileError):
        return False
    if payload[:1] != b"\x80" and payload[:1] not in (b"(", b"c", b"}", b"]"):
        return False
    try:
        found = pickle_globals(payload)
    except ValueError:
        return b"stable_baselines" in payload
    return any(module.split(".")[0] == "stable_baselines" for module, _ in found)


def _check_refs(value: Any, where: str) -> None:
    unknown = find_unknown_globals(value, kinds=("unknown", "policy", "function", "activation", "algorithm"))
    if unknown:
        raise RefusedGlobalError(f"{where} refers to {unknown[0].sb2_path!r}, which is not allowed in a statistics "
                                 "file; refusing to load it.")


def _rms_from_value(value: Any, name: str) -> Any:
    _check_refs(value, name)
    if isinstance(value, RunningMeanStd):
        return running_mean_std_from_data(value, name)
    if isinstance(value, dict) and all(k in value for k in ("mean", "var", "count")):
        return running_mean_std_from_data(rms_from_state(value, name), name)
    raise ModelDataError(f"{name} does not hold RunningMeanStd statistics (found {describe(value)}).")


_VECNORM_SETTINGS = ("clip_obs", "clip_reward", "gamma", "epsilon", "training", "norm_obs", "norm_reward")


def _vec_normalize_from_value(value: Any, name: str) -> dict:
    if not isinstance(value, dict) or not all(k in value for k in ("obs_rms", "ret_rms")):
        raise ModelDataError(f"{name} is not a stable-baselines VecNormalize file (found {describe(value)}).")
    out = {key: _rms_from_value(value[key], f"{name}[{key!r}]") for key in ("obs_rms", "ret_rms")}
    for key in _VECNORM_SETTINGS:
        if key in value:
            item = value[key]
            item = item.item() if isinstance(item, np.generic) else item
            flag = key in ("training", "norm_obs", "norm_reward")
            if (flag and not isinstance(item, (bool, int))) or (not flag and (
                    isinstance(item, bool) or not isinstance(item, (int, float)) or item != item
                    or (isinstance(item, int) and abs(item) > 2 ** 64))):
                raise ModelDataError(f"{name}: the VecNormalize setting {key!r} is {describe(item)}, not a "
                                     f"{'bool' if flag else 'number'}; the file is corrupted.")
            out[key] = bool(item) if flag else float(item)
    VecNormalize.from_data(out, name)  # the settings checked against their meaning (clips, epsilon > 0, gamma)
    return out


def read_running_mean_std(path: Union[str, os.PathLike, bytes]) -> Any:
    """
    Read an SB2 ``obs_rms.pkl`` / ``ret_rms.pkl`` (a pickled ``stable_baselines.common.running_mean_std
    .RunningMeanStd``) -- or a plain ``{mean, var, count}`` dict pickle -- into an sbtf ``RunningMeanStd``.
    Nothing in the file is executed.
    """
    payload, name = _read_bytes(path)
    return _rms_from_value(_unpickle(payload, False, f"statistics file {name}"), name)


def read_vec_normalize(path: Union[str, os.PathLike, bytes]) -> dict:
    """
    Read a VecNormalize pickle written by SB2 >= 2.9 (``VecNormalize.save``: the whole wrapper minus its venv)
    into a dict ``{obs_rms, ret_rms, clip_obs, clip_reward, gamma, epsilon, training, norm_obs, norm_reward}``
    (settings that the file lacks are left out). Nothing in the file is executed.
    """
    payload, name = _read_bytes(path)
    return _vec_normalize_from_value(_unpickle(payload, False, f"VecNormalize file {name}"), name)


def read_sb2_statistics(path: Union[str, os.PathLike, bytes]) -> Any:
    """
    Either kind of SB2 normalisation file: a VecNormalize pickle -> the dict of :func:`read_vec_normalize`;
    a RunningMeanStd pickle -> an sbtf ``RunningMeanStd``.
    """
    payload, name = _read_bytes(path)
    value = _unpickle(payload, False, f"statistics file {name}")
    if isinstance(value, dict) and "obs_rms" in value:
        return _vec_normalize_from_value(value, name)
    return _rms_from_value(value, name)


def _write_vecnormalize(stats: dict, path: str) -> None:
    VecNormalize.from_data(stats).save(path)


# ------------------------------------------------------------------------------------------------
# convert
# ------------------------------------------------------------------------------------------------
def convert(old_path: Union[str, os.PathLike], new_path: Union[str, os.PathLike],
            vecnormalize_folder: Optional[Union[str, os.PathLike]] = None,
            vecnormalize_path: Optional[Union[str, os.PathLike]] = None, custom_objects: Optional[dict] = None,
            allow_pickle: bool = False) -> ConversionReport:
    """
    Convert a stable-baselines 2.x model file to an sbtf model file.

    :param old_path: the SB2 ``.pkl`` / ``.zip`` file
    :param new_path: where to write the sbtf ``.zip`` (written atomically)
    :param vecnormalize_folder: a folder with SB2 VecNormalize statistics: ``vecnormalize.pkl`` (SB2 >= 2.9) or
        ``obs_rms.pkl`` + ``ret_rms.pkl`` (``save_running_average``); converted to an sbtf VecNormalize file
    :param vecnormalize_path: where to write that file (default: ``vecnormalize.pkl`` next to ``new_path``); load
        it with ``VecNormalize.load(path, venv)`` and set ``training=False, norm_reward=False`` to evaluate
    :param custom_objects: as for ``load``
    :param allow_pickle: as for ``load`` (trusted files only)
    :return: (ConversionReport) what was mapped and what could not be
    """
    report = ConversionReport(source=os.fspath(old_path))
    parsed = parse_sb2(old_path, custom_objects=custom_objects, allow_pickle=allow_pickle, report=report)
    report.emit_warnings(stacklevel=2)
    cls = ALGORITHMS[parsed.algorithm].sbtf_class()
    model = _build_model(cls, parsed, None, {"verbose": 0})  # no "model without an env" chatter
    model.verbose = parsed.data.get("verbose", 0)
    target = resolve_save_path(os.fspath(new_path))
    model.save(target)
    report.target = str(target)
    if vecnormalize_folder is not None:
        folder = os.fspath(vecnormalize_folder)
        out_path = os.fspath(vecnormalize_path) if vecnormalize_path is not None else os.path.join(
            os.path.dirname(os.path.abspath(target)), "vecnormalize.pkl")
        whole = os.path.join(folder, "vecnormalize.pkl")
        if os.path.exists(whole):
            stats = read_vec_normalize(whole)
            source = whole
        else:
            obs_path, ret_path = os.path.join(folder, "obs_rms.pkl"), os.path.join(folder, "ret_rms.pkl")
            if not os.path.exists(obs_path):
                raise FileNotFoundError(f"{folder} has neither vecnormalize.pkl nor obs_rms.pkl")
            stats = {"obs_rms": read_running_mean_std(obs_path)}
            if os.path.exists(ret_path):
                stats["ret_rms"] = read_running_mean_std(ret_path)
            else:
                stats["ret_rms"] = RunningMeanStd(shape=())
                report.notes.append("no ret_rms.pkl: return statistics start fresh")
            source = obs_path
            report.notes.append("obs_rms.pkl/ret_rms.pkl carry no settings: the VecNormalize file has the defaults "
                                "(clip_obs=10, training=True, norm_reward=True); for evaluation set training=False "
                                "and norm_reward=False after loading")
        _write_vecnormalize(stats, out_path)
        report.vecnormalize.append((source, out_path))
    return report


# ------------------------------------------------------------------------------------------------
# command line: ``sbtf convert`` (sbtf_converters.cli_plugin registers it with the sbtf command)
# ------------------------------------------------------------------------------------------------
CLI_HELP = "convert a stable-baselines 2.x model file (.pkl/.zip) to the sbtf format"
CLI_DESCRIPTION = ("Convert a stable-baselines 2.x model file (.pkl or .zip) to an sbtf model file, without running "
                   "code from the old file, and print what was mapped and what could not be. Exit codes: 0 done, "
                   "2 the file cannot be converted (not a model, refused content, algorithm not in sbtf yet).")


def add_arguments(parser: argparse.ArgumentParser, paths_optional: bool = False) -> None:
    """
    The ``convert`` arguments (for ``sbtf.cli.register_subcommand`` or :func:`register_cli`).

    :param parser: (argparse.ArgumentParser)
    :param paths_optional: (bool) OLD and NEW may be left out (a command that converts other things too checks them)
    """
    nargs = "?" if paths_optional else None
    parser.add_argument("old_path", nargs=nargs, help="the stable-baselines 2.x model file")
    parser.add_argument("new_path", nargs=nargs, help="the sbtf model file to write (.zip)")
    parser.add_argument("--vecnormalize-folder", default=None,
                        help="folder with vecnormalize.pkl or obs_rms.pkl/ret_rms.pkl to convert too")
    parser.add_argument("--vecnormalize-path", default=None,
                        help="where to write the sbtf VecNormalize file (default: vecnormalize.pkl next to new_path)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def register_cli(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``convert`` to an ``argparse`` sub-parsers object; its handler is ``args.func(args)`` (:func:`run_cli`)."""
    parser = subparsers.add_parser("convert", help=CLI_HELP, description=CLI_DESCRIPTION)
    add_arguments(parser)
    parser.set_defaults(func=run_cli)
    return parser


def run_cli(args: argparse.Namespace) -> int:
    """Run ``convert`` for parsed arguments; errors are one line on stderr (exit code 2)."""
    try:
        report = convert(args.old_path, args.new_path, vecnormalize_folder=args.vecnormalize_folder,
                         vecnormalize_path=args.vecnormalize_path)
    except (LegacyModelError, ModelFileError, pickle.UnpicklingError, ImportError, FileNotFoundError) as exc:
        print(f"sbtf convert: error: {exc}", file=sys.stderr)
        return 2
    print(report.to_json() if args.json else str(report))
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m sbtf_converters.legacy convert OLD NEW [...]``."""
    parser = argparse.ArgumentParser(prog="sbtf")
    subparsers = parser.add_subparsers(dest="command", required=True)
    register_cli(subparsers)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
