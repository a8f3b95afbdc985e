"""Reading the pickles of stable-baselines 2.x files (``.pkl`` models, the pickled entries of ``.zip``
models, ``obs_rms.pkl`` / ``ret_rms.pkl`` / ``vecnormalize.pkl``) without running code from them.

The pickles are interpreted by :mod:`sbtf.common.fileio.safe_pickle` (a pure-Python opcode interpreter, never
``pickle.Unpickler``) with the resolver :func:`classify_global`, which knows:

* data: numpy arrays, dtypes and scalars (rebuilt from plain numeric data), ``collections.OrderedDict``/``deque``,
  builtins that are data, ``copyreg._reconstructor`` (records only) and ``_codecs.encode`` (latin-1 only);
* gym spaces (``gym.spaces.box.Box`` ...): recorded as :class:`LegacyObject` and rebuilt as gymnasium
  spaces from their state by :func:`materialize`;
* ``stable_baselines`` classes: policies (kept as :class:`LegacyGlobal` references, mapped to sbtf by
  the converter), noise objects, ``RunningMeanStd``, ``VecNormalize``, ``GoalSelectionStrategy``,
  schedules; algorithm classes (HER's ``model_class``) as references;
* cloudpickle's function machinery (``_make_skel_func``, ``_fill_function``, ``_builtin_type``,
  ``_make_function``, cells, ...): replaced by inert stand-ins that *record* what a pickled function was
  (module, qualname, closure values, constants of its code) without ever building a code object or a
  function; see :class:`LegacyFunction`;
* TensorFlow / NumPy activation functions referenced by name (``act_fun`` in ``policy_kwargs``).

Any other global becomes a :class:`LegacyGlobal` reference of kind ``"unknown"``: calling or instantiating
it raises :class:`RefusedGlobalError` (an :class:`~sbtf.common.file_errors.UnsafeFileError` and a
``pickle.UnpicklingError``) naming it, and :func:`find_unknown_globals` lets the caller refuse a value that
merely refers to it. Every stand-in is created fresh by each load: no class of this module is changed by a
file, so a rejected file cannot change how the next one loads. With ``allow_pickle=True`` names that are not
on the list are imported and called as a normal unpickler would (only for files you trust); pickled
functions are still only recorded.
"""
from __future__ import annotations

import collections
import io
import math
import pickletools
import threading
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

import numpy as np

from sbtf import algorithms
from sbtf.common import noise, schedules
from sbtf.common.fileio import safe_pickle as sp
from sbtf.common.file_errors import FileLimitError, ModelDataError, UnsafeFileError, describe_value, get_load_limits
from sbtf.common.fileio.load_budget import check_space_elements
from sbtf.common.running_mean_std import RunningMeanStd
from sbtf.common.fileio.safe_zip import NUMERIC_KINDS

from sbtf_converters.sb2_standins import (_ADVICE, _CLOUDPICKLE_MODULES, _CLOUDPICKLE_NAMES, LegacyCode, LegacyFunction,
                                         LegacyGlobal, LegacyObject, LegacyStandIn, RefusedGlobalError,
                                         SB2GoalSelectionStrategy, _refusal_message, _short, _text, describe,
                                         is_legacy_global, legacy_global)

__all__ = [
    "RefusedGlobalError", "SB2Unpickler", "LegacyGlobal", "LegacyObject", "LegacyFunction", "LegacyCode",
    "LegacyStandIn", "SB2GoalSelectionStrategy", "restricted_loads", "materialize", "find_unknown_globals",
    "pickle_globals", "describe", "classify_global", "legacy_global", "is_legacy_global", "rms_from_state",
]

# ------------------------------------------------------------------------------------------------
# the allow-list
# ------------------------------------------------------------------------------------------------
_ACTIVATION_NAMES = {"relu", "tanh", "sigmoid", "elu", "softplus", "selu", "leaky_relu", "identity", "linear",
                     "relu6", "softsign", "swish", "gelu"}


def _ufunc_reconstruct(ctx: sp.SafeUnpickler, module: Any = None, name: Any = None) -> LegacyGlobal:
    """``numpy.core._ufunc_reconstruct``: only activation-like NumPy ufuncs, kept as references."""
    if module == "numpy" and name in _ACTIVATION_NAMES:
        return legacy_global("numpy", str(name), "activation")
    raise RefusedGlobalError(_refusal_message(f"{_text(module, 200)}.{_text(name, 200)}", "resolve the ufunc"))


def _goal_selection_strategy(ctx: sp.SafeUnpickler, value: Any = None) -> SB2GoalSelectionStrategy:
    try:
        return SB2GoalSelectionStrategy(value)
    except (ValueError, TypeError) as exc:
        raise ModelDataError(f"A GoalSelectionStrategy in this stable-baselines file has the invalid value "
                             f"{_short(value)}.") from exc


_RNG_NAMES = {("numpy.random", "__RandomState_ctor"), ("numpy.random._pickle", "__randomstate_ctor"),
              ("numpy.random._pickle", "__generator_ctor"), ("numpy.random._pickle", "__bit_generator_ctor"),
              ("numpy.random.mtrand", "RandomState"), ("numpy.random", "RandomState"),
              ("numpy.random._generator", "Generator"), ("numpy.random._mt19937", "MT19937"),
              ("numpy.random._pcg64", "PCG64"), ("numpy.random.bit_generator", "SeedSequence")}
_GYM_SPACE_MODULES = {"gym.spaces", "gym.spaces.box", "gym.spaces.discrete", "gym.spaces.multi_discrete",
                      "gym.spaces.multi_binary", "gym.spaces.dict", "gym.spaces.dict_space", "gym.spaces.tuple",
                      "gym.spaces.tuple_space", "gymnasium.spaces", "gymnasium.spaces.box",
                      "gymnasium.spaces.discrete", "gymnasium.spaces.multi_discrete",
                      "gymnasium.spaces.multi_binary", "gymnasium.spaces.dict", "gymnasium.spaces.tuple"}
_GYM_SPACE_NAMES = {"Box", "Discrete", "MultiDiscrete", "MultiBinary", "Dict", "Tuple"}
_NOISE_MODULES = {"stable_baselines.ddpg.noise", "stable_baselines.common.noise"}
_NOISE_NAMES = {"NormalActionNoise", "OrnsteinUhlenbeckActionNoise", "AdaptiveParamNoiseSpec"}
_ZOO_CUSTOM_POLICIES = {"CustomDQNPolicy", "CustomMlpPolicy", "CustomSACPolicy"}
_ALGORITHM_NAMES = frozenset(algorithms.ALGORITHMS)
_SCHEDULE_CLASSES = {("stable_baselines.common.schedules", "ConstantSchedule"),
                     ("stable_baselines.common.schedules", "LinearSchedule"),
                     ("stable_baselines.common.schedules", "PiecewiseSchedule"),
                     ("stable_baselines.deepq.replay_buffer", "LinearSchedule"),
                     ("stable_baselines.a2c.utils", "Scheduler"),
                     ("stable_baselines.common.schedules", "Scheduler")}
_SCHEDULE_FUNCTIONS = {("stable_baselines.common.schedules", "linear_interpolation"),
                       ("stable_baselines.a2c.utils", "constant"), ("stable_baselines.a2c.utils", "linear_schedule"),
                       ("stable_baselines.a2c.utils", "middle_drop"),
                       ("stable_baselines.a2c.utils", "double_linear_con"),
                       ("stable_baselines.a2c.utils", "double_middle_drop"),
                       ("stable_baselines.common.schedules", "constant"),
                       ("stable_baselines.common.schedules", "linear_schedule"),
                       ("stable_baselines.common.schedules", "middle_drop"),
                       ("stable_baselines.common.schedules", "double_linear_con"),
                       ("stable_baselines.common.schedules", "double_middle_drop")}

_DATA_TABLE: Dict[Tuple[str, str], sp.Handler] = {**sp.NUMPY_HANDLERS, **sp.DATA_HANDLERS}
for _module in ("numpy.core", "numpy._core", "numpy.core.umath", "numpy._core.umath"):
    _DATA_TABLE[(_module, "_ufunc_reconstruct")] = sp.Function(_ufunc_reconstruct)


def _record(kind: str) -> sp.RecordClass:
    return sp.RecordClass(kind, LegacyObject)


def _ref(kind: str) -> sp.Reference:
    return sp.Reference(kind, LegacyGlobal)


def classify_global(module: str, name: str) -> Tuple[str, Optional[sp.Handler]]:
    """
    Decide what an allow-listed ``module.name`` is: ``(category, handler)`` with a
    :class:`sbtf.common.fileio.safe_pickle.Handler`, or ``("unknown", None)``.
    """
    handler = _DATA_TABLE.get((module, name))
    if handler is not None:
        return ("numpy" if module.startswith("numpy") else "builtin"), handler
    if (module, name) in _RNG_NAMES:
        return "rng", _record("rng")
    if module in _CLOUDPICKLE_MODULES and name in _CLOUDPICKLE_NAMES:
        return "cloudpickle", _CLOUDPICKLE_NAMES[name]
    if module in _GYM_SPACE_MODULES and name in _GYM_SPACE_NAMES:
        return "space", _record("space")
    if module.startswith("stable_baselines"):
        parts = module.split(".")
        if parts[-1] == "policies" or (module == "stable_baselines.common" and name.endswith("Policy")):
            return "policy", _ref("policy")
        if module in _NOISE_MODULES and name in _NOISE_NAMES:
            return "noise", _record("noise")
        if name == "RunningMeanStd" and parts[-1] in ("running_mean_std", "mpi_running_mean_std"):
            return "rms", _record("rms")
        if module.startswith("stable_baselines.common.vec_env") and name == "VecNormalize":
            return "vecnormalize", _record("vecnormalize")
        if name == "GoalSelectionStrategy":
            return "enum", sp.Function(_goal_selection_strategy)
        if (module, name) in _SCHEDULE_CLASSES:
            return "schedule", _record("schedule")
        if (module, name) in _SCHEDULE_FUNCTIONS:
            return "function", _ref("function")
        if name in _ALGORITHM_NAMES:
            return "algorithm", _ref("algorithm")
        if module == "stable_baselines.ddpg.memory" or (module.startswith("stable_baselines.gail.dataset")
                                                        and name in ("ExpertDataset", "DataLoader")):
            return "removed", _record("standin")
    if module in ("utils", "utils.utils") and name in _ZOO_CUSTOM_POLICIES:
        return "policy", _ref("policy")
    if module.split(".")[0] in ("tensorflow", "tensorflow_core") and name in _ACTIVATION_NAMES:
        return "activation", _ref("activation")
    if module == "numpy" and name in ("tanh",):
        return "activation", _ref("activation")
    return "unknown", None


# ------------------------------------------------------------------------------------------------
# the reader
# ------------------------------------------------------------------------------------------------
class SB2Unpickler:
    """
    Reads one stable-baselines pickle with :class:`sbtf.common.fileio.safe_pickle.SafeUnpickler` and the allow-list
    :func:`classify_global` (``seen`` lists the globals it named, with their category).

    :param file: (binary file) the pickle stream
    :param allow_pickle: (bool) import names that are not on the list (trusted files only)
    :param what: (str) what is read, for messages
    """

    def __init__(self, file: Any, allow_pickle: bool = False, what: str = "the stable-baselines file"):
        self.file = file
        self.allow_pickle = allow_pickle
        self.what = what
        self.seen: List[Tuple[str, str, str]] = []

    def _resolve(self, module: str, name: str) -> Optional[sp.Handler]:
        category, handler = classify_global(module, name)
        self.seen.append((module, name, category))
        return handler

    def load(self) -> Any:
        payload = self.file.read()
        reader = sp.SafeUnpickler(payload, self._resolve, what=self.what, advice=_ADVICE, trusted=self.allow_pickle,
                                  unknown=lambda module, name: LegacyGlobal(module, name, "unknown"))
        try:
            return reader.load()
        except RefusedGlobalError:
            raise
        except UnsafeFileError as exc:
            raise RefusedGlobalError(str(exc)) from exc


def restricted_loads(payload: bytes, allow_pickle: bool = False, what: str = "the stable-baselines file") -> Any:
    """Read ``payload`` with :class:`SB2Unpickler` (raw result with stand-ins; see :func:`materialize`)."""
    return SB2Unpickler(io.BytesIO(payload), allow_pickle=allow_pickle, what=what).load()


def _state_of(obj: LegacyObject, what: str) -> dict:
    if not isinstance(obj.state, dict):
        raise ModelDataError(f"The {what} in this file has no attributes (its state is {describe(obj.state)}); the "
                             "file is corrupted.")
    return obj.state


def _state_get(state: Any, *names: str, default: Any = None) -> Any:
    if isinstance(state, dict):
        for name in names:
            if name in state:
                return state[name]
    return default


_MISSING = object()


def _required(state: dict, what: str, *names: str) -> Any:
    value = _state_get(state, *names, default=_MISSING)
    if value is _MISSING:
        raise ModelDataError(f"The {what} in this file has no {names[0]!r}; the file is corrupted.")
    return value


def _number(value: Any, what: str, integer: bool = False, finite: bool = True) -> Any:
    """A Python int/float from a number, numpy scalar or 0-d numeric array, else ModelDataError."""
    if isinstance(value, np.ndarray) and value.shape == () and value.dtype.kind in "iuf":
        value = value.item()
    elif isinstance(value, (np.integer, np.floating)):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ModelDataError(f"{what} in this file is {describe(value)}, not a number.")
    if integer and not (isinstance(value, int) or (math.isfinite(value) and value == int(value))):
        raise ModelDataError(f"{what} in this file is {describe_value(value)}, not an integer.")
    if finite and isinstance(value, float) and not math.isfinite(value):
        raise ModelDataError(f"{what} in this file is {describe_value(value)}, not a finite number.")
    return int(value) if integer else value


def _numeric_array(value: Any, what: str) -> np.ndarray:
    """A numeric numpy array from an array, number or (nested) list of numbers, else ModelDataError."""
    if isinstance(value, np.ndarray):
        array = value
    elif isinstance(value, (int, float, np.integer, np.floating, list, tuple)) and not isinstance(value, bool):
        try:
            array = np.asarray(value)
        except (ValueError, TypeError, OverflowError) as exc:
            raise ModelDataError(f"{what} in this file is not a numeric array ({describe_value(str(exc))}).") from exc
    else:
        raise ModelDataError(f"{what} in this file is {describe(value)}, not a numeric array.")
    if array.dtype.kind not in NUMERIC_KINDS or array.dtype.fields is not None:
        raise ModelDataError(f"{what} in this file has the dtype {array.dtype}, not a numeric one.")
    return array


def _space_dtype(value: Any, default: np.dtype) -> np.dtype:
    if value is None:
        return default
    if isinstance(value, type) and issubclass(value, np.generic):
        value = np.dtype(value)
    if isinstance(value, (np.dtype, str)):
        return sp.plain_dtype(value, "A gym space in this file")
    raise ModelDataError(f"A gym space in this file has the dtype {describe(value)}, not a numeric dtype.")


def _space_shape(value: Any, default: Tuple[int, ...]) -> Tuple[int, ...]:
    if value is None:
        return default
    if not isinstance(value, (tuple, list)) or len(value) > 32:
        raise ModelDataError(f"A gym space in this file has the shape {describe(value)}, not a tuple of sizes.")
    shape = tuple(_number(s, "A size of a gym space's shape", integer=True) for s in value)
    if any(s < 0 for s in shape):
        raise ModelDataError(f"A gym space in this file has the negative shape {shape}.")
    return shape


def _checked_space(build: Any, what: str) -> Any:
    try:
        return build()
    except ModelDataError:
        raise
    except (ValueError, TypeError, AssertionError, OverflowError, KeyError, IndexError) as exc:
        raise ModelDataError(f"The {what} in this file cannot be rebuilt ({type(exc).__name__}: "
                             f"{describe_value(str(exc))}).") from exc


def _build_space(obj: LegacyObject, depth: int = 0) -> Any:
    from gymnasium import spaces

    kind = obj.sb2_name
    what = f"{kind} space"
    state = _state_of(obj, what)
    if kind == "Box":
        low = _numeric_array(_required(state, what, "low", "_low"), f"The 'low' of a {what}")
        high = _numeric_array(_required(state, what, "high", "_high"), f"The 'high' of a {what}")
        dtype = _space_dtype(_state_get(state, "dtype", "_dtype"), low.dtype)
        shape = _space_shape(_state_get(state, "shape", "_shape"), low.shape)
        check_space_elements(math.prod(shape), f"The {what} of shape {_short(shape, 80)} in this file")
        if math.prod(shape) * dtype.itemsize > get_load_limits().max_array_bytes:
            raise FileLimitError(f"The {what} in this file has the shape {shape}, beyond the array-size limit; the "
                                 "file is damaged or hostile.")

        def box() -> Any:
            return spaces.Box(low=np.broadcast_to(low, shape).astype(dtype),
                              high=np.broadcast_to(high, shape).astype(dtype), shape=shape, dtype=dtype)
        return _checked_space(box, what)
    if kind == "Discrete":
        n = _number(_required(state, what, "n"), f"The 'n' of a {what}", integer=True)
        start = _number(_state_get(state, "start", default=0), f"The 'start' of a {what}", integer=True)
        if n <= 0:
            raise ModelDataError(f"The {what} in this file has n={n}; it must be positive.")
        check_space_elements(n, f"The {what} in this file")
        return _checked_space(lambda: spaces.Discrete(n, start=start), what)
    if kind == "MultiDiscrete":
        nvec = _numeric_array(_required(state, what, "nvec"), f"The 'nvec' of a {what}")
        if nvec.dtype.kind not in "iu" or np.any(nvec <= 0):
            raise ModelDataError(f"The 'nvec' of a {what} in this file must hold positive integers.")
        check_space_elements(sum(int(v) for v in nvec.ravel().tolist()), f"The {what} in this file (one-hot width)")
        return _checked_space(lambda: spaces.MultiDiscrete(nvec.astype(np.int64)), what)
    if kind == "MultiBinary":
        n = _required(state, what, "n")
        if isinstance(n, (list, tuple, np.ndarray)):
            sizes = [_number(v, f"The 'n' of a {what}", integer=True) for v in np.asarray(n).ravel().tolist()]
            if len(sizes) > 32 or any(s <= 0 for s in sizes):
                raise ModelDataError(f"The {what} in this file has the invalid n={_short(sizes, 120)}.")
            check_space_elements(math.prod(sizes), f"The {what} of shape {_short(tuple(sizes), 80)} in this file")
            return _checked_space(lambda: spaces.MultiBinary(sizes), what)
        size = _number(n, f"The 'n' of a {what}", integer=True)
        if size <= 0:
            raise ModelDataError(f"The {what} in this file has n={size}; it must be positive.")
        check_space_elements(size, f"The {what} in this file")
        return _checked_space(lambda: spaces.MultiBinary(size), what)
    if kind == "Dict":
        subs = _required(state, what, "spaces")
        if not isinstance(subs, dict):
            raise ModelDataError(f"The 'spaces' of a {what} in this file is {describe(subs)}, not a dict.")
        built = collections.OrderedDict()
        for key, value in subs.items():
            if not isinstance(key, str):
                raise ModelDataError(f"A {what} in this file has the key {describe(key)}, not a string.")
            built[key] = _sub_space(value, what, depth)
        return _checked_space(lambda: spaces.Dict(built), what)
    if kind == "Tuple":
        subs = _required(state, what, "spaces")
        if not isinstance(subs, (list, tuple)):
            raise ModelDataError(f"The 'spaces' of a {what} in this file is {describe(subs)}, not a list.")
        items = tuple(_sub_space(v, what, depth) for v in subs)
        return _checked_space(lambda: spaces.Tuple(items), what)
    raise ModelDataError(f"Unknown gym space class {obj.path()} in this file.")


def _sub_space(value: Any, what: str, depth: int) -> Any:
    from gymnasium import spaces

    built = materialize(value, depth + 1)
    if not isinstance(built, spaces.Space):
        raise ModelDataError(f"A {what} in this file holds {describe(value)}, not a space.")
    return built


def _noise_array(value: Any, what: str) -> Any:
    array = _numeric_array(value, what).astype(np.float64)
    if not np.all(np.isfinite(array)):
        raise ModelDataError(f"{what} in this file is not finite.")
    return array if array.shape else float(array)


def _build_noise(obj: LegacyObject) -> Any:
    name = obj.sb2_name
    state = _state_of(obj, name)
    if name == "NormalActionNoise":
        return noise.NormalActionNoise(_noise_array(_required(state, name, "_mu", "mean"), f"The mean of a {name}"),
                                       _noise_array(_required(state, name, "_sigma", "sigma"),
                                                    f"The sigma of a {name}"))
    if name == "OrnsteinUhlenbeckActionNoise":
        initial = _state_get(state, "initial_noise")
        result = noise.OrnsteinUhlenbeckActionNoise(
            _noise_array(_required(state, name, "_mu", "mean"), f"The mean of an {name}"),
            _noise_array(_required(state, name, "_sigma", "sigma"), f"The sigma of an {name}"),
            theta=float(_number(_state_get(state, "_theta", default=0.15), f"The theta of an {name}")),
            dt=float(_number(_state_get(state, "_dt", default=1e-2), f"The dt of an {name}")),
            initial_noise=None if initial is None else _noise_array(initial, f"The initial noise of an {name}"))
        if _state_get(state, "noise_prev") is not None:
            result.noise_prev = np.asarray(_noise_array(state["noise_prev"], f"The noise_prev of an {name}"))
        return result
    if name == "AdaptiveParamNoiseSpec":
        spec = noise.AdaptiveParamNoiseSpec(
            float(_number(_state_get(state, "initial_stddev", default=0.1), f"initial_stddev of an {name}")),
            float(_number(_state_get(state, "desired_action_stddev", default=0.1),
                          f"desired_action_stddev of an {name}")),
            float(_number(_state_get(state, "adoption_coefficient", default=1.01),
                          f"adoption_coefficient of an {name}")))
        spec.current_stddev = float(_number(_state_get(state, "current_stddev", default=spec.initial_stddev),
                                            f"current_stddev of an {name}"))
        return spec
    raise ModelDataError(f"Unknown noise class {obj.path()} in this file.")


def rms_from_state(state: Any, where: str = "A RunningMeanStd") -> Any:
    """An sbtf ``RunningMeanStd`` from a ``{mean, var, count}`` state, validated (else ModelDataError)."""
    if not isinstance(state, dict) or not all(k in state for k in ("mean", "var", "count")):
        keys = _short(sorted(map(str, state))) if isinstance(state, dict) else describe(state)
        raise ModelDataError(f"{where} in this file has no mean/var/count statistics (found {keys}); the file is "
                             "corrupted.")
    mean = _numeric_array(state["mean"], f"The mean of {where}").astype(np.float64)
    var = _numeric_array(state["var"], f"The var of {where}").astype(np.float64)
    if mean.shape != var.shape:
        raise ModelDataError(f"{where} in this file has a mean of shape {mean.shape} but a var of shape "
                             f"{var.shape}; the file is corrupted.")
    count = float(_number(state["count"], f"The count of {where}"))
    if count < 0:
        raise ModelDataError(f"{where} in this file has the negative count {count}.")
    rms = RunningMeanStd(shape=mean.shape)
    rms.mean, rms.var, rms.count = mean, var, count
    return rms


def _build_rms(obj: LegacyObject) -> Any:
    return rms_from_state(obj.state, obj.path())


def _build_schedule(obj: LegacyObject) -> Any:
    name = obj.sb2_name
    state = _state_of(obj, name)
    try:
        if name == "ConstantSchedule":
            return schedules.ConstantSchedule(_number(_required(state, name, "_v", "_value", "value"),
                                                      f"The value of a {name}"))
        if name == "LinearSchedule":
            return schedules.LinearSchedule(_number(_required(state, name, "schedule_timesteps"), "schedule_timesteps"),
                                            _number(_required(state, name, "final_p"), "final_p"),
                                            _number(state.get("initial_p", 1.0), "initial_p"))
        if name == "PiecewiseSchedule":
            interpolation = state.get("_interpolation")
            if interpolation is not None and not (is_legacy_global(interpolation, "function")
                                                  and interpolation.sb2_name == "linear_interpolation"):
                raise ModelDataError(f"A PiecewiseSchedule in this file uses the interpolation "
                                     f"{describe(interpolation)}, which sbtf cannot rebuild without running code "
                                     "from the file.")
            endpoints = _required(state, name, "_endpoints")
            if not isinstance(endpoints, (list, tuple)) or not all(
                    isinstance(p, (list, tuple)) and len(p) == 2 for p in endpoints):
                raise ModelDataError(f"The endpoints of a {name} in this file are not (time, value) pairs.")
            outside = state.get("_outside_value")
            return schedules.PiecewiseSchedule(
                [(_number(t, "An endpoint time"), _number(v, "An endpoint value")) for t, v in endpoints],
                outside_value=None if outside is None else _number(outside, "outside_value"))
        if name == "Scheduler":
            fn = state.get("schedule")
            fn_name = fn.sb2_name if is_legacy_global(fn, "function") else None
            by_function = {"constant": "constant", "linear_schedule": "linear", "middle_drop": "middle_drop",
                           "double_linear_con": "double_linear_con", "double_middle_drop": "double_middle_drop"}
            if fn_name not in by_function:
                raise ModelDataError(f"A Scheduler in this file uses the schedule function {describe(fn)}, which is "
                                     "not one of stable-baselines' named schedules.")
            scheduler = schedules.Scheduler(_number(_required(state, name, "initial_value"), "initial_value"),
                                            _number(_required(state, name, "nvalues"), "nvalues"),
                                            by_function[fn_name])
            scheduler.step = float(_number(state.get("step", 0.0), "The step of a Scheduler"))
            return scheduler
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ModelDataError):
            raise
        raise ModelDataError(f"The {name} in this file cannot be rebuilt: {describe_value(str(exc))}") from exc
    raise ModelDataError(f"Unknown schedule class {obj.path()} in this file.")


_WALK = threading.local()


def materialize(value: Any, _depth: int = 0) -> Any:
    """
    Replace the recorded stand-ins in an unpickled value by sbtf / gymnasium objects: gym spaces ->
    gymnasium spaces, noise -> ``sbtf.common.noise``, ``RunningMeanStd`` -> sbtf's, schedules -> sbtf
    schedules, a pickled VecNormalize -> a plain dict of its state, random generators -> None, removed
    classes -> :class:`LegacyStandIn`. References (:class:`LegacyGlobal`) and :class:`LegacyFunction`
    are kept for the caller, who knows which key they belong to. Invalid recorded state raises
    :class:`ModelDataError`.
    """
    if not isinstance(value, (LegacyObject, LegacyFunction, dict, list, tuple)):
        return _materialize(value, _depth)
    # an object shared by many references (memo GETs) is rebuilt once: the result keeps the sharing, so a small
    # file cannot make a tree of millions of copies
    memo = getattr(_WALK, "materialized", None)
    top = memo is None
    if top:
        memo = _WALK.materialized = {}
    try:
        found = memo.get(id(value))
        if found is not None:
            return found[1]
        result = _materialize(value, _depth)
        memo[id(value)] = (value, result)  # the value is kept alive: its id stays its own
        return result
    finally:
        if top:
            _WALK.materialized = None


def _materialize(value: Any, _depth: int = 0) -> Any:
    """One step of :func:`materialize` (its recursive calls go through the memo)."""
    if _depth > get_load_limits().max_depth + 16:
        raise FileLimitError("The stable-baselines file nests objects too deeply to be a model file.")
    depth = _depth + 1
    if isinstance(value, LegacyObject):
        kind = value.sb2_kind
        if kind == "space":
            return _build_space(value, depth)
        if kind == "noise":
            return _build_noise(value)
        if kind == "rms":
            return _build_rms(value)
        if kind == "schedule":
            return _build_schedule(value)
        if kind == "rng":
            return None
        if kind == "vecnormalize":
            state = value.state if isinstance(value.state, dict) else {}
            return {"__sb2_vecnormalize__": True, **{k: materialize(v, depth) for k, v in state.items()}}
        return LegacyStandIn(kind, f"{value.path()} (a stable-baselines class sbtf does not rebuild)",
                             state=value.state)
    if isinstance(value, LegacyFunction):
        value._closure_values = [materialize(v, depth) for v in value.closure_values]
        value.defaults = materialize(value.defaults, depth)
        return value
    if isinstance(value, collections.OrderedDict):
        return collections.OrderedDict((k, materialize(v, depth)) for k, v in value.items())
    if isinstance(value, dict):
        return {k: materialize(v, depth) for k, v in value.items()}
    if isinstance(value, list):
        return [materialize(v, depth) for v in value]
    if isinstance(value, tuple):
        return tuple(materialize(v, depth) for v in value)
    return value


def find_unknown_globals(value: Any, kinds: Iterable[str] = ("unknown",), _depth: int = 0) -> List[LegacyGlobal]:
    """The :class:`LegacyGlobal` references of the given kinds found anywhere inside ``value`` (each shared object is
    searched once)."""
    seen = getattr(_WALK, "searched", None)
    if seen is not None:
        return _find_unknown_globals(value, tuple(kinds), _depth, seen)
    _WALK.searched = set()
    try:
        return _find_unknown_globals(value, tuple(kinds), _depth, _WALK.searched)
    finally:
        _WALK.searched = None


def _find_unknown_globals(value: Any, kinds: tuple, _depth: int, seen: set) -> List[LegacyGlobal]:
    found: List[LegacyGlobal] = []
    if _depth > get_load_limits().max_depth + 16:
        return found
    if isinstance(value, (dict, list, tuple, set, frozenset, collections.deque, LegacyFunction, LegacyObject,
                          LegacyStandIn)):
        if id(value) in seen:
            return found
        seen.add(id(value))
    if is_legacy_global(value):
        if value.sb2_kind in kinds:
            found.append(value)
        return found
    if isinstance(value, dict):
        for k, v in value.items():
            found += find_unknown_globals(k, kinds, _depth + 1) + find_unknown_globals(v, kinds, _depth + 1)
    elif isinstance(value, (list, tuple, set, frozenset, collections.deque)):
        for v in value:
            found += find_unknown_globals(v, kinds, _depth + 1)
    elif isinstance(value, LegacyFunction):
        for v in value.closure_values:
            found += find_unknown_globals(v, kinds, _depth + 1)
    elif isinstance(value, (LegacyObject, LegacyStandIn)):
        found += find_unknown_globals(value.state, kinds, _depth + 1)
    return found


# ------------------------------------------------------------------------------------------------
# static inspection (no execution)
# ------------------------------------------------------------------------------------------------
def pickle_globals(payload: bytes) -> Set[Tuple[str, str]]:
    """
    The ``(module, name)`` globals a pickle refers to, found by reading its opcodes (nothing is executed).
    Raises ``ValueError`` when the bytes are not a complete pickle, or when it has more opcodes than the
    ``max_items`` limit or memo indices larger than the stream (so the memo cannot be made to collide).
    """
    found: Set[Tuple[str, str]] = set()
    memo: Dict[int, Any] = {}
    stack_strings: List[Any] = []
    next_memo = 0
    max_ops = get_load_limits().max_items
    try:
        for count, (opcode, arg, _pos) in enumerate(pickletools.genops(payload)):
            if count >= max_ops:
                raise ValueError(f"more than {max_ops:,} opcodes")
            name = opcode.name
            if name in ("PUT", "BINPUT", "LONG_BINPUT", "GET", "BINGET", "LONG_BINGET") and not (
                    0 <= int(arg) <= len(payload)):
                raise ValueError("a memo index larger than the stream")
            if name == "GLOBAL" or name == "INST":
                module, _, attr = str(arg).partition(" ")
                found.add((module, attr))
                stack_strings.append(None)
            elif name in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "STRING", "BINSTRING",
                          "SHORT_BINSTRING"):
                stack_strings.append(arg)
            elif name == "MEMOIZE":
                memo[next_memo] = stack_strings[-1] if stack_strings else None
                next_memo += 1
            elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
                memo[int(arg)] = stack_strings[-1] if stack_strings else None
            elif name in ("GET", "BINGET", "LONG_BINGET"):
                stack_strings.append(memo.get(int(arg)))
            elif name == "STACK_GLOBAL":
                if len(stack_strings) >= 2 and isinstance(stack_strings[-2], str) and isinstance(
                        stack_strings[-1], str):
                    found.add((stack_strings[-2], stack_strings[-1]))
                del stack_strings[-2:]
                stack_strings.append(None)
            else:
                stack_strings.append(None)
    except Exception as exc:  # noqa: BLE001 - pickletools raises ValueError / others on broken streams
        raise ValueError(f"not a complete pickle: {describe_value(str(exc))}") from exc
    return found
