"""Load and convert stable-baselines 2.x (SB2) agent files without running code from them.

Entry points
* :func:`load_sb2_model` -- called by ``BaseRLModel.load`` (``PPO2.load("old.pkl")``) for SB2 files;
* :func:`convert` -- write an sbtf model file (and VecNormalize statistics) from an SB2 file, with a
  :class:`ConversionReport` of what was mapped and what could not be (lives in :mod:`sbtf_converters.convert`,
  importable from here);
* :func:`parse_sb2` -- read an SB2 file into ``(algorithm, data, named parameters)`` without building a model
  (works for algorithms sbtf does not have yet);
* :func:`read_running_mean_std` / :func:`read_vec_normalize` -- SB2 ``obs_rms.pkl`` / ``ret_rms.pkl`` /
  ``vecnormalize.pkl`` statistics (:mod:`sbtf_converters.legacy_stats`);
* :func:`register_cli` -- adds the ``convert`` sub-command to an ``argparse`` parser (``sbtf convert``;
  :mod:`sbtf_converters.convert`).

Reading the files' bytes is :mod:`sbtf_converters.legacy_read`'s job; this module maps what is read onto sbtf.

Both SB2 formats are read: ``.pkl`` (a cloudpickle of ``(data, params)``; ``params`` is a nameless list in
files written before 2.6, an ``OrderedDict`` after) and ``.zip`` (``data`` JSON whose non-JSON entries are
base64 cloudpickles, ``parameters`` npz, ``parameter_list``). All pickles are interpreted by
:mod:`sbtf.common.fileio.safe_pickle` with the allow-list of :mod:`sbtf_converters.sb2_pickle` (no code of the file
runs); zip members and npz arrays are size-checked from their headers before anything is decompressed
(:mod:`sbtf.common.fileio.safe_zip`). Every way a file can be wrong raises a
:class:`~sbtf.common.file_errors.ModelFileError`; see ``docs/legacy.md`` and ``docs/security.md``.
"""
from __future__ import annotations

import copy
import dataclasses
import inspect
import json
import warnings
from collections import OrderedDict
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
from gymnasium import spaces

from sbtf.common import file_errors
from sbtf.common.file_errors import FileLimitError, ModelDataError, ModelFileError, describe_value
from sbtf.common.fileio.load_budget import exception_text
from sbtf.common.schedules import SCHEDULES, SampledSchedule
from sbtf_converters import sb2_layouts as L
from sbtf_converters.legacy_read import Source, _read_source, read_sb2_file
from sbtf_converters.legacy_stats import is_sb2_pickle, read_running_mean_std, read_sb2_statistics, read_vec_normalize
from sbtf_converters.sb2_algos import (ALGORITHMS, FAMILIES, AlgoSpec, LayoutContext, PolicyFamily, detect_algorithm,
                                       family_of, wrapped_algorithm)
from sbtf_converters.sb2_pickle import (LegacyFunction, LegacyStandIn, RefusedGlobalError, SB2GoalSelectionStrategy,
                                        describe, find_unknown_globals, is_legacy_global)

__all__ = [
    "load_sb2_model", "parse_sb2", "read_sb2_file", "ConversionReport", "ParsedSB2",
    "read_running_mean_std", "read_vec_normalize", "read_sb2_statistics", "is_sb2_pickle",
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
        what = ("the cnn_extractor given in policy_kwargs" if custom_extractor
                else f"policy {choice.sb2_path} is a user class")
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
    return (f" Its parameters fit {family.sbtf_module}.{name} with policy_kwargs={describe_value(kwargs, 200)} "
            "(same activation function assumed: check it).")


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
        for name, _value in params.items():
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


#: names that moved to :mod:`sbtf_converters.convert` (conversion and the ``convert`` command), still importable here
_CONVERT_NAMES = ("convert", "register_cli", "add_arguments", "run_cli", "main", "CLI_HELP", "CLI_DESCRIPTION")


def __getattr__(name: str) -> Any:
    """``legacy.convert`` & co.: imported from :mod:`sbtf_converters.convert` on first use (it imports this module)."""
    if name in _CONVERT_NAMES:
        from sbtf_converters import convert as _convert_module  # pylint: disable=import-outside-toplevel

        return getattr(_convert_module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":  # pragma: no cover  (python -m sbtf_converters.legacy convert OLD NEW)
    import sys

    from sbtf_converters.convert import main as _main

    sys.exit(_main())
