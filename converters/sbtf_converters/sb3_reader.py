"""Load stable-baselines3 / sb3-contrib model zips into sbtf's SB3 classes, without PyTorch and without running code.

An SB3 zip holds:

* ``data``: JSON; simple hyperparameters are plain values, others (spaces, ``policy_kwargs`` naming classes,
  schedules, ``train_freq``, buffers, the policy class) are ``{":type:": ..., ":serialized:": <base64 cloudpickle>}``.
  Only the entries sbtf needs are decoded, each by :mod:`sbtf.common.fileio.safe_pickle` with an allow-list
  (:func:`data_resolver`): gym / gymnasium spaces (rebuilt through ``save_util.space_from_dict``'s checks), numpy
  arrays / dtypes / scalars, SB3's ``TrainFreq``, schedule objects (``ConstantSchedule``, ``LinearSchedule``,
  ``FloatSchedule``) and action noises, torch's optimizer / activation classes by name. The policy class is read as a
  *name* (never resolved); the policy is the sbtf class's ``MlpPolicy`` / ``CnnPolicy`` / ``MultiInputPolicy``.
  Schedules that are cloudpickled functions (older SB3) are code: never built nor run; SB3's ``constant_fn`` /
  ``get_linear_fn`` and the RL Zoo's ``linear_schedule`` are recognised by name and read from their closure values
  (:func:`_schedule_of_function`), any other function is replaced by the sbtf default with a warning (pass
  ``custom_objects={"learning_rate": ...}`` to set one). The rest (rollout / replay buffer
  classes, last observations, episode buffers, ``lr_schedule``...) is ignored.
* ``policy.pth`` (the policy's state dict) and ``pytorch_variables.pth`` (SAC / TQC's ``log_ent_coef``; ``tensors.pth``
  in the oldest files): read by :mod:`sbtf_converters.torch_pickle`, mapped by :mod:`sbtf_converters.sb3_layouts`.
* ``*.optimizer.pth``: read as data like ``policy.pth`` and restored into sbtf's optimizers where they keep the same
  state (:mod:`sbtf_converters.sb3_optimizers`); ``_stable_baselines3_version`` and ``system_info.txt``: read as
  text (``print_system_info=True`` prints them next to this machine's).
"""
from __future__ import annotations

import base64
import binascii
import collections
import inspect
import warnings
from typing import Any, Dict, Optional, Tuple

import gymnasium as gym
import numpy as np

from sbtf.common import save_util
from sbtf.common.fileio import safe_pickle
from sbtf.common.file_errors import (CorruptedFileError, ModelDataError, UnsafeFileError, WrongAlgorithmError,
                                     describe_value, get_load_limits)
from sbtf.common.fileio.safe_zip import open_zip, read_member
from sbtf_converters.sb3_layouts import family_of, map_state_dict, plan_state_dict
from sbtf_converters.sb3_optimizers import OPTIMIZER_MEMBERS, restore_optimizers
from sbtf_converters.torch_pickle import read_torch_file, state_dict_arrays

__all__ = ["SB3_FILE_KIND", "is_sb3_zip", "read_sb3_zip", "load_sb3_model", "data_resolver", "Sb3File"]

#: what ``sbtf.common.save_util.inspect_model_bytes`` calls an SB3 zip
SB3_FILE_KIND = "sb3-zip"

_SPACES = {"Box", "Discrete", "MultiDiscrete", "MultiBinary", "Dict", "Tuple"}
_ACTIVATIONS = {"ReLU": "relu", "Tanh": "tanh", "ELU": "elu", "LeakyReLU": "leaky_relu", "Sigmoid": "sigmoid",
                "SiLU": "silu", "GELU": "gelu", "Softplus": "softplus", "SELU": "selu"}
_OPTIMIZERS = {"Adam": "Adam", "RMSprop": "RMSprop", "RMSpropTFLike": "RMSprop"}
_EXTRACTORS = {"FlattenExtractor", "NatureCNN", "CombinedExtractor"}
#: SB3 keys that are schedules: when they are cloudpickled code, the default replaces them (with a warning)
_SCHEDULE_KEYS = {"learning_rate", "clip_range", "clip_range_vf"}
#: SB3 data keys that are not constructor arguments but are read
_STATE_KEYS = {"num_timesteps", "n_envs"}
_ADVICE = (" SB3 files store some values as cloudpickle; sbtf reads only data from them. Pass "
           "custom_objects={key: value} to replace an entry, or allow_pickle=True only if you trust the file.")


class _TrainFreq(safe_pickle.SafeCallable):
    """``TrainFreq(frequency, unit)`` (a namedtuple) -> ``(frequency, "step" | "episode")``."""
    path = "stable_baselines3.common.type_aliases.TrainFreq"

    def safe_call(self, ctx, args):
        return ctx.make_tuple(args)

    def safe_new(self, ctx, args, kwargs):
        return ctx.make_tuple(args)


class _TrainFreqUnit(safe_pickle.SafeCallable):
    """``TrainFrequencyUnit("step")`` (an Enum) -> its value."""
    path = "stable_baselines3.common.type_aliases.TrainFrequencyUnit"

    def safe_call(self, ctx, args):
        if len(args) != 1 or args[0] not in ("step", "episode"):
            raise ctx.corrupt("a TrainFrequencyUnit that is neither 'step' nor 'episode'")
        return args[0]

    def safe_new(self, ctx, args, kwargs):
        return self.safe_call(ctx, args)


class _CodeStub(safe_pickle.SafeNode):
    """A cloudpickled code object, recorded (never built): only its free-variable names are read."""

    def __init__(self, freevars: tuple):
        self.freevars = freevars

    def safe_children(self):
        return ()


class _FunctionStub(safe_pickle.SafeNode):
    """A cloudpickled function, recorded (never built or called): its qualified name and closure values."""

    def __init__(self, code: Any = None, name: str = ""):
        self.code = code
        self.qualname = name
        self.closure: tuple = ()

    def safe_children(self):
        return self.closure

    def set_state(self, ctx, state: Any) -> None:
        """The state cloudpickle sets on the function: ``__qualname__`` and the closure's cell values."""
        if type(state) is tuple and len(state) == 2:
            attrs, slots = state
        else:
            attrs, slots = state, {}
        for part in (attrs, slots):
            if type(part) is not dict:
                raise ctx.corrupt("a cloudpickled function with a state that is not a dict")
        qualname = slots.get("__qualname__", attrs.get("__qualname__", attrs.get("qualname", self.qualname)))
        self.qualname = qualname if isinstance(qualname, str) else ""
        cells = slots.get("__closure__", attrs.get("closure_values"))
        if cells is not None:
            if type(cells) not in (tuple, list):
                raise ctx.corrupt("a cloudpickled function whose closure is not a tuple")
            self.closure = tuple(cell.value if isinstance(cell, _Cell) else cell for cell in cells)


class _Cell(safe_pickle.SafeNode):
    def __init__(self, value: Any = None):
        self.value = value

    def safe_children(self):
        return (self.value,)


class _CloudpickleCall(safe_pickle.SafeCallable):
    """cloudpickle's reconstructors, recorded instead of run (see :func:`_schedule_of_function`)."""

    def __init__(self, kind: str):
        self.kind = kind
        self.path = f"cloudpickle.{kind}"

    def safe_new(self, ctx, args, kwargs):
        raise ctx.refuse(self.path, "create an object of")

    def safe_call(self, ctx, args):  # noqa: C901 - one branch per reconstructor
        kind = self.kind
        if kind == "_builtin_type":
            if len(args) != 1 or args[0] not in ("CodeType", "LambdaType", "FunctionType"):
                raise ctx.refuse(f"types.{describe_value(args[0] if args else None)}", "rebuild")
            return _CloudpickleCall("code" if args[0] == "CodeType" else "function")
        if kind == "code":  # CodeType(..., freevars, cellvars)
            if len(args) < 2 or type(args[-2]) is not tuple or not all(isinstance(n, str) for n in args[-2]):
                raise ctx.corrupt("a cloudpickled code object without its free variable names")
            return _CodeStub(args[-2])
        if kind in ("function", "_make_function", "_make_skel_func"):
            code = args[0] if args else None
            if not isinstance(code, _CodeStub):
                raise ctx.corrupt("a cloudpickled function without code")
            function = _FunctionStub(code)
            if kind != "_make_skel_func" and len(args) >= 5 and type(args[4]) is tuple:
                function.closure = tuple(c.value if isinstance(c, _Cell) else c for c in args[4])
            return function
        if kind == "_make_empty_cell":
            return _Cell()
        if kind == "_make_cell":
            return _Cell(args[0] if args else None)
        if kind in ("_function_setstate", "_fill_function"):
            if not args or not isinstance(args[0], _FunctionStub):
                raise ctx.corrupt(f"{kind} on something else than a function")
            if kind == "_fill_function" and len(args) == 6:  # (func, globals, defaults, dict, module, closure)
                args[0].set_state(ctx, {"closure_values": args[5]})
            elif len(args) >= 2:
                args[0].set_state(ctx, args[1] if len(args) == 2 else (args[1], args[2]))
            return args[0] if kind == "_fill_function" else None
        if kind == "subimport":
            return None  # a module the function's globals name: not imported
        raise ctx.refuse(self.path, "call")


_CLOUDPICKLE_NAMES = ("_builtin_type", "_make_function", "_make_skel_func", "_fill_function", "_function_setstate",
                      "_make_cell", "_make_empty_cell", "subimport")


def _schedule_of_function(function: _FunctionStub, where: str) -> Any:
    """
    The schedule a cloudpickled stable-baselines3 / RL-Zoo schedule function stands for, from its name and closure
    values only (its code is never built nor run): SB3's ``constant_fn`` and ``get_linear_fn``, the zoo's
    ``linear_schedule``. Any other function is code sbtf will not guess: UnsafeFileError.
    """
    from sbtf.common.schedules import ConstantSchedule, SampledSchedule  # pylint: disable=import-outside-toplevel

    names = function.code.freevars if isinstance(function.code, _CodeStub) else ()
    if len(names) != len(function.closure):
        raise CorruptedFileError(f"{where}: a function whose closure does not match its free variables.")
    values = dict(zip(names, function.closure))
    number = (int, float, np.floating, np.integer)
    if not all(isinstance(v, number) and not isinstance(v, bool) for v in values.values()):
        raise UnsafeFileError(f"{where} is a function {describe_value(function.qualname)} with non-numeric closure "
                              f"values: code sbtf does not run.{_ADVICE}")
    if function.qualname == "constant_fn.<locals>.func" and set(values) == {"val"}:
        return ConstantSchedule(float(values["val"]))
    if function.qualname == "get_linear_fn.<locals>.func" and set(values) == {"start", "end", "end_fraction"}:
        fraction = float(values["end_fraction"])
        if not 0.0 < fraction <= 1.0:
            raise ModelDataError(f"{where}: a linear schedule with end_fraction {fraction}.")
        return SampledSchedule([(1.0, float(values["start"])), (1.0 - fraction, float(values["end"])),
                                (0.0, float(values["end"]))])
    if function.qualname == "linear_schedule.<locals>.func" and set(values) == {"initial_value"}:
        return SampledSchedule([(1.0, float(values["initial_value"])), (0.0, 0.0)])
    raise UnsafeFileError(f"{where} is the function {describe_value(function.qualname)}: code, which sbtf does not "
                          f"run (only SB3's constant_fn / get_linear_fn and the zoo's linear_schedule are read as "
                          f"data).{_ADVICE}")


_SPACE = safe_pickle.RecordClass("space")
_INERT = safe_pickle.RecordClass("inert")
_SCHEDULE = safe_pickle.RecordClass("schedule")
_NOISE = safe_pickle.RecordClass("noise")
_TABLE = {**safe_pickle.NUMPY_HANDLERS, **safe_pickle.DATA_HANDLERS,
          ("stable_baselines3.common.type_aliases", "TrainFreq"): safe_pickle.Constant(_TrainFreq()),
          ("stable_baselines3.common.type_aliases", "TrainFrequencyUnit"): safe_pickle.Constant(_TrainFreqUnit()),
          ("torch", "device"): _INERT}


def data_resolver(module: str, name: str) -> Optional[safe_pickle.Handler]:
    """The allow-list of the ``:serialized:`` entries of an SB3 ``data`` member (see the module docstring)."""
    handler = _TABLE.get((module, name))
    if handler is not None:
        return handler
    root = module.split(".")[0]
    if root == "cloudpickle" and name in _CLOUDPICKLE_NAMES:
        return safe_pickle.Constant(_CloudpickleCall(name))
    if root in ("gym", "gymnasium") and ".spaces" in module and name in _SPACES:
        return _SPACE
    if module.startswith("numpy.random"):
        return _INERT  # a space's random generator: not needed
    if root in ("stable_baselines3", "sb3_contrib"):
        if name in ("ConstantSchedule", "LinearSchedule", "FloatSchedule"):
            return _SCHEDULE
        if name in ("NormalActionNoise", "OrnsteinUhlenbeckActionNoise"):
            return _NOISE
        if name in _EXTRACTORS:
            return safe_pickle.Constant(name)
    if root == "torch" and module.startswith("torch.optim") and name in _OPTIMIZERS:
        return safe_pickle.Constant(_OPTIMIZERS[name])
    if module == "stable_baselines3.common.sb2_compat.rmsprop_tf_like" and name == "RMSpropTFLike":
        return safe_pickle.Constant("RMSpropTFLike")  # trained on as PyTorch's RMSprop (see load_sb3_model)
    if module.startswith("torch.nn.modules.activation") and name in _ACTIVATIONS:
        return safe_pickle.Constant(_ACTIVATIONS[name])
    return None


# ------------------------------------------------------------------------------------------------ data values
def _plain(value: Any) -> Any:
    """numpy scalars / arrays of a decoded value as Python numbers / lists (what space_from_dict reads)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def _space(record: Any, where: str, depth: int = 0) -> Any:
    """A gymnasium space from the record of a gym / gymnasium space (checked by ``save_util.space_from_dict``)."""
    return save_util.space_from_dict(_space_description(record, where, depth))


def _space_description(record: Any, where: str, depth: int = 0) -> dict:
    if not (isinstance(record, safe_pickle.Record) and record.kind == "space" and isinstance(record.state, dict)):
        raise ModelDataError(f"{where} is not a space.")
    if depth > 16:
        raise ModelDataError(f"{where} nests spaces too deeply.")
    state = record.state
    get = state.get
    dtype = get("dtype")
    dtype_name = str(np.dtype(dtype)) if isinstance(dtype, (np.dtype, type)) else dtype
    if record.name == "Box":
        shape = get("_shape", get("shape"))
        return {"type": "Box", "low": _plain(get("low")), "high": _plain(get("high")), "shape": _plain(shape),
                "dtype": dtype_name}
    if record.name == "Discrete":
        return {"type": "Discrete", "n": _plain(get("n")), "start": _plain(get("start", 0))}
    if record.name == "MultiDiscrete":
        return {"type": "MultiDiscrete", "nvec": _plain(get("nvec")), "dtype": dtype_name}
    if record.name == "MultiBinary":
        return {"type": "MultiBinary", "n": _plain(get("n"))}
    spaces = get("spaces")
    if record.name == "Dict" and type(spaces) in (dict, collections.OrderedDict):
        return {"type": "Dict", "spaces": [[key, _space_description(value, where, depth + 1)]
                                           for key, value in spaces.items()]}
    if record.name == "Tuple" and type(spaces) in (tuple, list):
        return {"type": "Tuple", "spaces": [_space_description(value, where, depth + 1) for value in spaces]}
    raise ModelDataError(f"{where} is a {record.name} space with fields sbtf does not know.")


def _schedule(record: safe_pickle.Record, where: str) -> Any:
    """SB3's schedule objects as sbtf schedules (functions of the progress remaining)."""
    from sbtf.common.schedules import ConstantSchedule, SampledSchedule  # pylint: disable=import-outside-toplevel

    state = record.state if isinstance(record.state, dict) else {}
    number = (int, float, np.floating, np.integer)
    if record.name == "FloatSchedule":
        inner = state.get("value_schedule")
        return _schedule(inner, where) if isinstance(inner, safe_pickle.Record) else _number(inner, where)
    if record.name == "ConstantSchedule" and isinstance(state.get("val"), number):
        return ConstantSchedule(float(state["val"]))
    if record.name == "LinearSchedule" and all(isinstance(state.get(k), number)
                                               for k in ("start", "end", "end_fraction")):
        start, end, fraction = float(state["start"]), float(state["end"]), float(state["end_fraction"])
        if not 0.0 < fraction <= 1.0:
            raise ModelDataError(f"{where}: a LinearSchedule with end_fraction {fraction}.")
        return SampledSchedule([(1.0, start), (1.0 - fraction, end), (0.0, end)])
    raise ModelDataError(f"{where} is a {record.name} whose fields sbtf does not know.")


def _number(value: Any, where: str) -> float:
    if isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool):
        return float(value)
    raise ModelDataError(f"{where} is not a number.")


def _noise(record: safe_pickle.Record, where: str) -> Any:
    from sbtf.common import noise  # pylint: disable=import-outside-toplevel

    state = record.state if isinstance(record.state, dict) else {}
    mean, sigma = state.get("_mu"), state.get("_sigma")
    if not (isinstance(mean, np.ndarray) and isinstance(sigma, np.ndarray) and mean.shape == sigma.shape):
        raise ModelDataError(f"{where} is an action noise without mean / sigma arrays.")
    if record.name == "NormalActionNoise":
        return noise.NormalActionNoise(mean=mean, sigma=sigma)
    return noise.OrnsteinUhlenbeckActionNoise(mean=mean, sigma=sigma, theta=_number(state.get("_theta", 0.15), where),
                                              dt=_number(state.get("_dt", 1e-2), where))


def _convert(value: Any, where: str) -> Any:
    """A decoded value with its records turned into sbtf objects (spaces, schedules, noises); other records refused."""
    if isinstance(value, safe_pickle.Record):
        if value.kind == "space":
            return _space(value, where)
        if value.kind == "schedule":
            return _schedule(value, where)
        if value.kind == "noise":
            return _noise(value, where)
        if value.kind == "inert":
            return None  # torch.device, random generators: nothing sbtf uses
        raise ModelDataError(f"{where} holds a {value.path} object, which is not data sbtf uses.")
    if isinstance(value, safe_pickle.Ref):
        return value
    if isinstance(value, _FunctionStub):
        return _schedule_of_function(value, where)
    if type(value) in (dict, collections.OrderedDict):
        return {key: _convert(item, where) for key, item in value.items()}
    if type(value) in (list, tuple):
        return type(value)(_convert(item, where) for item in value)
    if isinstance(value, np.generic):
        return value.item()
    return value


class Sb3File:
    """What an SB3 zip holds, read: ``data`` (the JSON, entries still serialized), ``state`` (tensor name -> array),
    ``version``, ``system_info``, ``ignored`` (members not read)."""

    def __init__(self, data: dict, state: Dict[str, np.ndarray], version: str, system_info: str, ignored: list,
                 source: str, allow_pickle: bool, optimizers: Optional[Dict[str, Any]] = None):
        self.data = data
        #: ``*.optimizer.pth`` member -> its content, read as data (nested dicts / lists / arrays)
        self.optimizers = dict(optimizers or {})
        self.state = state
        self.version = version
        self.system_info = system_info
        self.ignored = ignored
        self.source = source
        self.allow_pickle = allow_pickle

    def decode(self, key: str) -> Any:
        """The value of ``data[key]``: plain JSON as is; a ``:serialized:`` entry read by the safe interpreter."""
        entry = self.data[key]
        if not (isinstance(entry, dict) and ":serialized:" in entry):
            return entry
        where = f"the '{key}' entry of {self.source}"
        text = entry[":serialized:"]
        if not isinstance(text, str):
            raise CorruptedFileError(f"{where} is not base64 text.")
        try:
            blob = base64.b64decode(text.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError, ValueError) as exc:
            raise CorruptedFileError(f"{where} is not valid base64.") from exc
        value = safe_pickle.loads(blob, data_resolver, what=where, advice=_ADVICE, trusted=self.allow_pickle)
        if self.allow_pickle and not isinstance(value, (safe_pickle.Record, safe_pickle.Ref, dict, list, tuple)):
            return value
        return _convert(value, where)

    def policy_class_name(self) -> Tuple[str, str]:
        """``(module, name)`` of the policy class the file was saved with (read as a name, never resolved)."""
        entry = self.data.get("policy_class")
        if isinstance(entry, dict) and ":serialized:" in entry:
            try:
                blob = base64.b64decode(str(entry[":serialized:"]).encode("ascii"), validate=True)
            except (binascii.Error, UnicodeEncodeError, ValueError) as exc:
                raise CorruptedFileError(f"The 'policy_class' entry of {self.source} is not valid base64.") from exc
            ref = safe_pickle.loads(blob, None, what=f"the 'policy_class' entry of {self.source}")
            if isinstance(ref, safe_pickle.Ref):
                return ref.module, ref.name
        if isinstance(entry, str):
            module, _, name = entry.rpartition(".")
            return module, name
        return "", "MlpPolicy"


def is_sb3_zip(names: Any) -> bool:
    """Whether a zip's member names are an SB3 model's (``data`` and ``policy.pth``)."""
    names = set(names)
    return "data" in names and "policy.pth" in names


def read_sb3_zip(payload: bytes, source: str = "the stable-baselines3 file", allow_pickle: bool = False) -> Sb3File:
    """
    Read an SB3 zip's members (bounded, no code run): the JSON ``data``, the tensors of ``policy.pth`` and
    ``pytorch_variables.pth`` / ``tensors.pth``, the version.

    :raises ModelFileError: typed errors for damaged or hostile files
    """
    limits = get_load_limits()
    with open_zip(payload, source) as archive:
        names = archive.namelist()
        if len(set(names)) != len(names):
            raise CorruptedFileError(f"{source} holds a member twice; it is damaged or was crafted.")
        if not is_sb3_zip(names):
            raise CorruptedFileError(f"{source} is not a stable-baselines3 model (no 'data' and 'policy.pth').")
        data = save_util.parse_json(read_member(archive, "data", limits.max_json_bytes, source),
                                    f"the 'data' member of {source}")
        if not isinstance(data, dict):
            raise CorruptedFileError(f"The 'data' member of {source} is not a JSON object.")
        state = state_dict_arrays(read_torch_file(read_member(archive, "policy.pth", limits.max_array_bytes + (1 << 20),
                                                              source),
                                                  f"the policy.pth of {source}", allow_pickle),
                                  f"the policy.pth of {source}")
        ignored = []
        optimizers: Dict[str, Any] = {}
        for member in names:
            if member in ("pytorch_variables.pth", "tensors.pth"):
                extra = state_dict_arrays(read_torch_file(read_member(archive, member, 1 << 20, source),
                                                          f"the {member} of {source}", allow_pickle),
                                          f"the {member} of {source}")
                for key, value in extra.items():
                    if key in state:
                        raise CorruptedFileError(f"{source} holds the tensor {key} twice.")
                    state[key] = value
            elif member in OPTIMIZER_MEMBERS:
                raw = read_member(archive, member, 2 * limits.max_array_bytes + (1 << 20), source)
                optimizers[member] = read_torch_file(raw, f"the {member} of {source}", allow_pickle)
            elif member not in ("data", "policy.pth", "_stable_baselines3_version", "system_info.txt"):
                ignored.append(member)
        version = ""
        if "_stable_baselines3_version" in names:
            version = read_member(archive, "_stable_baselines3_version", 256, source).decode("utf-8", "replace")
        system_info = ""
        if "system_info.txt" in names:
            system_info = read_member(archive, "system_info.txt", 1 << 16, source).decode("utf-8", "replace")
    return Sb3File(data, state, version.strip(), system_info, ignored, source, allow_pickle, optimizers)


# ------------------------------------------------------------------------------------------------ building
def _policy_name(sb3_name: str) -> str:
    if "MultiInput" in sb3_name:
        return "MultiInputPolicy"
    if "Cnn" in sb3_name:
        return "CnnPolicy"
    return "MlpPolicy"


def _policy_kwargs(value: Any, source: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ModelDataError(f"The policy_kwargs of {source} are not a dict.")
    out = {}
    for key, item in value.items():
        if key in ("device", "use_sde"):
            continue  # PyTorch's device: sbtf runs where TensorFlow does; use_sde: the algorithm's (SB3 < 1.0)
        if isinstance(item, safe_pickle.Ref):
            raise UnsafeFileError(f"The policy_kwargs of {source} name {item.path} for {key!r}, which is not on "
                                  f"sbtf's allow-list.{_ADVICE}")
        if key == "net_arch" and isinstance(item, list) and item and isinstance(item[-1], dict):
            if len(item) > 1:
                raise ModelDataError(f"{source} uses shared layers in net_arch ({describe_value(item)}), which "
                                     "stable-baselines3 >= 1.8 and sbtf no longer build.")
            item = dict(item[0])  # SB3 < 1.8: [dict(pi=[...], vf=[...])]
        if key == "features_extractor_class" and isinstance(item, str):
            from sbtf.common import extractors  # pylint: disable=import-outside-toplevel

            item = getattr(extractors, item)
        out[key] = item
    return out


def _constructor_values(cls: type, sb3: Sb3File, custom_objects: dict) -> Tuple[dict, list]:
    """Constructor arguments of ``cls`` from the file's ``data`` (plain or safely decoded), and the keys left to
    their defaults (schedules that are code)."""
    parameters = inspect.signature(cls.__init__).parameters
    # sbtf keeps its own buffers (SB3's buffer classes are not data); the device is PyTorch's
    skip = {"self", "policy", "env", "policy_kwargs", "device", "_init_setup_model", "tensorboard_log",
            "rollout_buffer_class", "rollout_buffer_kwargs", "replay_buffer_class", "replay_buffer_kwargs"}
    values: Dict[str, Any] = {}
    defaulted = []
    for key in sb3.data:
        if key not in parameters or key in skip:
            continue
        if key in custom_objects:
            values[key] = custom_objects[key]
            continue
        try:
            value = sb3.decode(key)
        except UnsafeFileError:
            if key in _SCHEDULE_KEYS:
                defaulted.append(key)
                continue
            raise
        if key == "train_freq" and isinstance(value, int) and value < 0:
            continue  # SB3 < 1.0: train_freq=-1 with n_episodes_rollout
        values[key] = value
    if "train_freq" in parameters and "train_freq" not in values and "n_episodes_rollout" in sb3.data:
        episodes = sb3.data["n_episodes_rollout"]
        if isinstance(episodes, int) and episodes > 0:
            values["train_freq"] = (episodes, "episode")
    for key in custom_objects:
        if key in parameters and key not in skip:
            values[key] = custom_objects[key]
    return values, defaulted


def load_sb3_model(cls: type, payload: bytes, env: Any = None, custom_objects: Optional[dict] = None,
                   allow_pickle: bool = False, print_system_info: bool = False, source: str = "the stable-baselines3 "
                   "file", **kwargs: Any) -> Any:
    """
    An sbtf model of class ``cls`` (``sbtf.sb3.PPO``, ``sbtf.contrib.TQC``...) from a stable-baselines3 /
    sb3-contrib zip: hyperparameters and spaces from ``data``, weights from ``policy.pth`` and
    ``pytorch_variables.pth`` (every shape checked before any is assigned), as SB3's ``load`` does.

    :param cls: the sbtf class
    :param payload: the zip's bytes
    :param env: the environment to attach (None: predict only)
    :param custom_objects: values replacing the file's entries by key (e.g. ``learning_rate``)
    :param allow_pickle: let the file's pickles import what the allow-list does not know (trusted files only)
    :param print_system_info: print the system info the file records (its ``system_info.txt``) and this
        machine's, as SB3's ``load`` does
    :param kwargs: attributes set on the model before it is built (as SB3's ``load``)
    """
    if not cls.__module__.startswith(("sbtf.sb3.", "sbtf.contrib.")):
        raise WrongAlgorithmError(f"{source} is a stable-baselines3 / sb3-contrib model; load it with "
                                  f"{_sb3_counterpart(cls.__name__)}.load(...) instead of stable-baselines 2's "
                                  f"{cls.__module__}.{cls.__name__}.load(...).")
    custom_objects = dict(custom_objects or {})
    sb3 = read_sb3_zip(payload, source, allow_pickle)
    if print_system_info:
        _print_system_info(sb3)
    family_of(cls.__name__)
    policy_module, policy_class_name = sb3.policy_class_name()
    _check_algorithm(cls, policy_module, policy_class_name, source)
    spaces = {}
    for key in ("observation_space", "action_space"):
        if key in custom_objects:
            spaces[key] = custom_objects[key]
        elif key in sb3.data:
            spaces[key] = sb3.decode(key)
            if not isinstance(spaces[key], gym.Space):
                raise ModelDataError(f"The {key} of {source} is {describe_value(spaces[key])}, not a space.")
        else:
            raise ModelDataError(f"{source} has no {key}; it is truncated or not a model file.")
    policy_kwargs = custom_objects["policy_kwargs"] if "policy_kwargs" in custom_objects else \
        _policy_kwargs(sb3.decode("policy_kwargs") if "policy_kwargs" in sb3.data else None, source)
    file_optimizer = policy_kwargs.get("optimizer_class", "") if isinstance(policy_kwargs, dict) else ""
    if file_optimizer == "RMSpropTFLike":  # SB3's TF1-like RMSprop: trained on as PyTorch's (see sb3_optimizers)
        policy_kwargs = dict(policy_kwargs, optimizer_class="RMSprop")
    values, defaulted = _constructor_values(cls, sb3, custom_objects)
    if defaulted:
        warnings.warn(f"{source} stores {defaulted} as cloudpickled functions (code), which sbtf does not run: "
                      f"{cls.__name__}'s defaults are used for them (acting is unaffected). Pass custom_objects="
                      "{'learning_rate': ...} to set them for further training.")
    from sbtf.common.fileio import load_budget  # pylint: disable=import-outside-toplevel
    from sbtf.common.algo.model_files import FILE_DATA_ERRORS  # pylint: disable=import-outside-toplevel

    stored = int(sum(value.size for value in sb3.state.values()))
    # the network the file's spaces and policy_kwargs describe may not outgrow the tensors it stores
    with load_budget.parameter_budget(stored, source):
        try:
            model = cls(policy=_policy_name(policy_class_name), env=None, policy_kwargs=policy_kwargs,
                        _init_setup_model=False, **values)
            model.observation_space = _channels_last(spaces["observation_space"])  # SB3 saves (C, H, W) images
            model.action_space = spaces["action_space"]
            for key in _STATE_KEYS:
                value = sb3.data.get(key)
                if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                    setattr(model, key, value)
            for key, value in kwargs.items():
                setattr(model, key, value)
            model.set_env(env)
            model.setup_model()
        except FILE_DATA_ERRORS as exc:
            raise ModelDataError(f"{source}: its hyperparameters / spaces do not build a {cls.__name__} "
                                 f"({type(exc).__name__}: {describe_value(str(exc), 300)}); it is corrupted, was "
                                 "edited, or uses an option sbtf does not support.") from exc
    named = model._named_parameters()  # pylint: disable=protected-access
    shapes = {name: tuple(var.shape) for name, var in named.items()}
    params = map_state_dict(cls.__name__, sb3.state, shapes, source)
    model.load_parameters(params, exact_match=False)
    if sb3.optimizers:
        targets, aliases = plan_state_dict(cls.__name__, sb3.state, shapes, source)
        model.sb3_optimizer_restore = restore_optimizers(model, cls.__name__, sb3.optimizers, list(sb3.state),
                                                         targets, aliases, str(file_optimizer), source)
    return model


def _channels_last(space: gym.Space) -> gym.Space:
    """The channel-last form of a space whose images SB3 saved channel-first (``VecTransposeImage``)."""
    from sbtf.common.vec_env.vec_transpose import channels_last_space  # pylint: disable=import-outside-toplevel

    return channels_last_space(space) or space


def _print_system_info(sb3: Sb3File) -> None:
    """What SB3's ``load(print_system_info=True)`` prints: the file's system info, then this machine's."""
    from sbtf.common.algo.sb3_api import get_system_info  # pylint: disable=import-outside-toplevel

    print(f"== SAVED MODEL SYSTEM INFO ({sb3.source}) ==")
    print(sb3.system_info.rstrip() if sb3.system_info else
          f"(the file stores no system_info.txt; stable-baselines3 version {sb3.version or 'unknown'})")
    print("== CURRENT SYSTEM INFO ==")
    get_system_info(print_info=True)


def _sb3_counterpart(name: str) -> str:
    """``sbtf.sb3.<name>`` / ``sbtf.contrib.<name>``: the SB3-style class of an algorithm name."""
    from sbtf import algorithms  # pylint: disable=import-outside-toplevel

    for entry in algorithms.all_algorithms():
        if entry.name == name and entry.target.startswith(("sbtf.sb3.", "sbtf.contrib.")):
            return f"{entry.target.split('.')[0]}.{entry.target.split('.')[1]}.{name}"
    return "the matching sbtf.sb3 / sbtf.contrib class"


#: the algorithms whose files use the policies of an SB3 / sb3-contrib policies module
_MODULE_ALGOS = {"common": ("PPO", "A2C", "TRPO"), "ppo": ("PPO",), "a2c": ("A2C",), "trpo": ("TRPO",),
                 "dqn": ("DQN",), "qrdqn": ("QRDQN",), "sac": ("SAC",), "tqc": ("TQC",), "td3": ("TD3", "DDPG"),
                 "ddpg": ("DDPG", "TD3"), "ppo_mask": ("MaskablePPO",)}


def _check_algorithm(cls: type, module: str, policy_class_name: str, source: str) -> None:
    """WrongAlgorithmError when the file's policy class belongs to other algorithms (e.g. a DQN file to SAC)."""
    parts = module.split(".")
    if len(parts) < 2 or parts[0] not in ("stable_baselines3", "sb3_contrib"):
        return
    if "maskable" in parts:
        algos = _MODULE_ALGOS["ppo_mask"]
    elif parts[0] == "sb3_contrib" and parts[1] == "common":
        return  # sb3-contrib's other shared policies (recurrent...): the layout check decides
    else:
        algos = _MODULE_ALGOS.get(parts[1])
    if algos is not None and cls.__name__ not in algos:
        raise WrongAlgorithmError(f"{source} holds a {'/'.join(algos)} model (policy {policy_class_name}); load it "
                                  f"with {algos[0]}.load(...) instead of {cls.__name__}.load(...).")
