"""Parameters, ``save`` / ``load`` and ``export`` of a model (stable-baselines 2's API): the part of
``sbtf.common.base_class.BaseRLModel`` that reads and writes model files, as a mixin of it."""
from __future__ import annotations

import warnings
from collections import OrderedDict
from typing import Any, Optional

import numpy as np
import tensorflow as tf

from sbtf.common import save_util
from sbtf.common.fileio import load_budget, model_schema
from sbtf.common.file_errors import (MissingParametersError, ModelDataError, ModelFileError, ParameterShapeError,
                                     WrongAlgorithmError, describe_value)
from sbtf.common.fileio.model_schema import check_network_size
from sbtf.common.compile.weight_tracking import assign_variables

#: the largest ``buffer_size`` a model file may declare (``sbtf.common.buffers.MAX_BUFFER_SIZE``)
_MAX_BUFFER_SIZE = 1 << 32

#: exceptions that a model's constructor or ``setup_model`` raise on data they cannot use (when loading a file they
#: become ModelDataErrors)
FILE_DATA_ERRORS = (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError, ZeroDivisionError,
                    tf.errors.InvalidArgumentError)


def _stored_values(params) -> int:
    """How many parameter values a file stores (from the array headers when not read yet)."""
    if isinstance(params, save_util.StoredParameters):
        return int(sum(params.declared_sizes().values()))
    values = params.values() if isinstance(params, dict) else params
    return int(sum(int(np.size(v)) for v in values))


class ModelFilesMixin:
    """Parameters by stable-baselines 2 name, ``save`` / ``load`` (sbtf files and the formats registered in
    ``sbtf.common.fileio.formats``) and ``export``; mixed into ``BaseRLModel``, whose attributes it uses."""

    # ------------------------------------------------------------------ parameters
    def _named_parameters(self) -> "OrderedDict[str, Any]":
        """``{SB2 name: variable}`` of everything ``save()`` writes (algorithms with several networks extend it)."""
        return self.policy_tf.named_parameters()

    def get_parameter_list(self) -> list:
        """The TF variables of the model, in SB2 order (names: see ``get_parameters()``)."""
        return list(self._named_parameters().values())

    def _flat_parameters(self) -> "OrderedDict[str, np.ndarray]":
        """``OrderedDict`` of parameter name -> value (NumPy): what ``save()`` writes."""
        return OrderedDict((name, var.numpy()) for name, var in self._named_parameters().items())

    def get_parameters(self) -> "OrderedDict[str, np.ndarray]":
        """``OrderedDict`` of SB2 parameter name -> value (NumPy)."""
        return self._flat_parameters()

    def load_parameters(self, load_path_or_dict, exact_match: bool = True) -> None:
        """
        Load model parameters from a file, a dict (name -> array) or a list (in ``get_parameter_list`` order).

        :param load_path_or_dict: (str, file, dict or list)
        :param exact_match: (bool) every parameter of the model must be given (dict form)
        """
        named = self._named_parameters()
        if isinstance(load_path_or_dict, dict):
            params = load_path_or_dict
        elif isinstance(load_path_or_dict, (list, tuple)):
            warnings.warn("Loading model parameters from a list. This has been replaced with parameter dictionaries "
                          "with variable names and parameters. If you are loading from a file, consider re-saving "
                          "the file.", DeprecationWarning)
            if len(load_path_or_dict) < len(named):
                raise ValueError(f"Error: {len(load_path_or_dict)} parameters given, the model has {len(named)}.")
            params = OrderedDict(zip(named.keys(), load_path_or_dict))
        else:
            payload = save_util.read_file_bytes(save_util.resolve_load_path(load_path_or_dict))
            if save_util.inspect_model_bytes(payload) != "sbtf":
                raise save_util.CorruptedFileError("load_parameters() reads sbtf model files; load a stable-baselines "
                                                   "file with <Algorithm>.load() (or convert it with 'sbtf convert').")
            # only the weights: the file's 'data' is not decoded at all
            _, params, _ = save_util.load_from_zip_bytes(payload, decode_data=False)
        if isinstance(params, save_util.StoredParameters):
            params = params.read(expected_sizes={name: int(np.prod(var.shape)) for name, var in named.items()},
                                 names=list(named))
        missing = [name for name in named if name not in params]
        if exact_match and missing:
            raise MissingParametersError(f"Error: the parameters to load do not contain {missing[:5]}"
                                         f"{' ...' if len(missing) > 5 else ''} (set exact_match=False to load a "
                                         f"subset).", missing)
        pairs = []
        for name, var in named.items():
            if name not in params:
                continue
            value = np.asarray(params[name])
            target = np.dtype(var.dtype.as_numpy_dtype if hasattr(var.dtype, "as_numpy_dtype") else np.float32)
            allowed = "f" if target.kind == "f" else "iu"
            if value.dtype.kind not in allowed:
                raise ModelDataError(f"Error: parameter {name} is stored as {value.dtype} values, but the model's "
                                     f"parameter holds {target} numbers; the file is corrupted or not a model file.")
            if tuple(value.shape) != tuple(var.shape):
                if value.size == int(np.prod(var.shape)) and name.endswith("/b:0") and value.ndim == 4:
                    value = value.reshape(var.shape)  # SB2 conv bias (1, C, 1, 1)
                else:
                    raise ParameterShapeError(f"Error: parameter {name} has shape {tuple(value.shape)} in the given "
                                              f"parameters but {tuple(var.shape)} in the model.", name,
                                              tuple(value.shape), tuple(var.shape))
            pairs.append((var, value.astype(target)))
        assign_variables(pairs)  # a tracked write: the acting copies of these variables are re-read when used
        self._on_parameters_loaded()

    def _on_parameters_loaded(self) -> None:
        """Hook: the parameters were replaced (``load_parameters``, ``pretrain``); the acting copies already know."""

    # ------------------------------------------------------------------ save / load
    def _get_save_data(self) -> dict:
        data = {name: getattr(self, name) for name in self._save_schema}
        data.update({
            "verbose": self.verbose,
            "policy": self.policy_class,
            "observation_space": self.observation_space,
            "action_space": self.action_space,
            "n_envs": self.n_envs,
            "n_cpu_tf_sess": self.n_cpu_tf_sess,
            "seed": self.seed,
            "_vectorize_action": self._vectorize_action,
            "policy_kwargs": self.policy_kwargs,
            "num_timesteps": self.num_timesteps,
        })
        return data

    def save(self, save_path, cloudpickle: bool = False) -> None:
        """
        Save the model to a zip file (atomically). ``.zip`` is appended when the path has no extension.

        :param save_path: (str or file-like) where to save
        :param cloudpickle: (bool) ignored: sbtf always writes its zip format (SB2's pickle format could run
            code when opened)
        """
        if cloudpickle:
            warnings.warn("save(cloudpickle=True) is not supported: sbtf writes its safe zip format instead.")
        save_util.save_to_zip(save_path, self._get_save_data(), self._flat_parameters(),
                              meta={"algo": self._file_algo_name()})

    #: the algorithm name files store (None: the class name); a class whose name another algorithm already uses in
    #: files (sb3-contrib's TRPO: ``trpo_contrib``) sets its own
    FILE_ALGO_NAME: Optional[str] = None

    @classmethod
    def _file_algo_name(cls) -> str:
        return cls.FILE_ALGO_NAME or cls.__name__

    @classmethod
    def _accepted_algos(cls) -> tuple:
        return (cls._file_algo_name(),)

    @classmethod
    def load(cls, load_path, env=None, custom_objects: Optional[dict] = None, allow_pickle: bool = False,
             **kwargs):
        """
        Load a model from a file saved by sbtf or by stable-baselines 2.x.

        :param load_path: (str or file-like) the saved file (``.zip`` or, for SB2 files, ``.pkl``)
        :param env: (gymnasium.Env, VecEnv or str) the new environment (None: no env, predict only)
        :param custom_objects: (dict) values that replace the stored ones, by key (e.g. a custom policy class
            or a learning-rate function)
        :param allow_pickle: (bool) allow the file to run code (unpickle functions/objects and import modules).
            Never do this for a file you do not trust.
        :param kwargs: extra attributes set on the model before it is built (as SB2)
        """
        load_path = save_util.resolve_load_path(load_path)
        payload = save_util.read_file_bytes(load_path)
        kind = save_util.inspect_model_bytes(payload)
        if kind != "sbtf":  # a foreign file: read by the plugin registered for its kind (sbtf_converters)
            from sbtf.common.fileio import formats

            reader = formats.model_reader(kind, source=str(load_path))
            if kind == "sb3-zip":  # its reader's messages name the file
                kwargs = dict(kwargs, source=f"the stable-baselines3 file {load_path}")
            elif kwargs.pop("print_system_info", False):
                _print_current_system_info()
            return reader(cls, payload, env=env, custom_objects=custom_objects, allow_pickle=allow_pickle, **kwargs)
        if kwargs.pop("print_system_info", False):
            _print_current_system_info()
        data, params, info = save_util.load_from_zip_bytes(payload, custom_objects, allow_pickle)
        algo = info.get("algo")
        if algo is not None and algo not in cls._accepted_algos():
            raise WrongAlgorithmError(f"Error: {load_path} holds a {algo} model; load it with {algo}.load(...) "
                                      f"instead of {cls.__name__}.load(...).")
        return cls._from_data(data, params, env=env, _trusted_keys=frozenset(custom_objects or ()), **kwargs)

    @classmethod
    def _data_schema(cls) -> dict:
        """Every key a file of this algorithm stores, with its declared type (``sbtf.common.fileio.model_schema``)."""
        return {**model_schema.COMMON_SCHEMA, **cls._save_schema}

    @classmethod
    def _checked_data(cls, data: dict, trusted: frozenset = frozenset()) -> dict:
        """``data`` checked against :meth:`_data_schema`; unknown keys are reported and dropped, never assigned."""
        checked, unknown = model_schema.check_data(cls._data_schema(), data, trusted)
        if unknown:
            warnings.warn(f"The model file has keys that {cls.__name__} does not store: "
                          f"{sorted(k[:60] if isinstance(k, str) else describe_value(k, 60) for k in unknown[:10])}"
                          f"{' ...' if len(unknown) > 10 else ''}; they were ignored (not set on the model).")
        rollout = int(checked.get("n_steps", 1)) * int(checked.get("n_envs", 1))
        if "n_steps" in checked and rollout > model_schema.MAX_ROLLOUT:
            raise ModelDataError(f"The model file's n_steps * n_envs = {rollout:,} samples per rollout is beyond "
                                 f"{model_schema.MAX_ROLLOUT:,}; the file is corrupted or was edited.")
        buffer_size = checked.get("buffer_size")
        if isinstance(buffer_size, int) and buffer_size > _MAX_BUFFER_SIZE:
            raise ModelDataError(f"The model file's buffer_size {load_budget.count_text(buffer_size)} is beyond "
                                 f"{_MAX_BUFFER_SIZE:,} transitions (no replay buffer is that large); the file is "
                                 "corrupted or was edited.")
        missing = [key for key in ("policy", "observation_space", "action_space") if key not in checked]
        if missing:
            raise ModelDataError(f"The model file has no {missing}; it is truncated or not a {cls.__name__} file.")
        return checked

    @classmethod
    def _build_error(cls, exc: BaseException, data: dict, step: str) -> ModelDataError:
        """A constructor / ``setup_model`` failure caused by a file's data, as a ModelDataError naming the keys the
        file lacks (a TypeError such as ``None * int`` usually means one is missing)."""
        if isinstance(exc, ModelFileError):
            return exc
        missing = sorted(key for key in cls._data_schema() if key not in data)
        hint = (f" The file lacks {missing[:8]}{' ...' if len(missing) > 8 else ''}, which {cls.__name__} needs; it "
                "is truncated or was edited." if missing else " A value of the file does not fit the others; it is "
                                                              "corrupted or was edited.")
        return ModelDataError(f"The model file's data cannot {step} a {cls.__name__} model "
                              f"({load_budget.exception_text(exc)}).{hint} Pass custom_objects={{key: value}} to "
                              "supply a value.")

    @classmethod
    def _from_data(cls, data: dict, params, env=None, _trusted_keys: frozenset = frozenset(), **kwargs):
        """Build a model from its data dict and parameters (shared by sbtf and legacy loading)."""
        data = cls._checked_data(data, _trusted_keys)
        if "policy_kwargs" in kwargs and kwargs["policy_kwargs"] != data.get("policy_kwargs"):
            raise ValueError(f"The specified policy kwargs do not equal the stored policy kwargs. Stored kwargs: "
                             f"{describe_value(data.get('policy_kwargs'), 300)}, specified kwargs: "
                             f"{describe_value(kwargs['policy_kwargs'], 300)}")
        if isinstance(params, save_util.StoredParameters):
            check_network_size(data.get("policy_kwargs"), params.declared_sizes())
        # the network built from the file's spaces and policy_kwargs may not outgrow the parameters it stores
        with load_budget.parameter_budget(_stored_values(params), "the model file"):
            try:
                model = cls(policy=data["policy"], env=None, _init_setup_model=False)
            except FILE_DATA_ERRORS as exc:
                raise cls._build_error(exc, data, "create") from exc
            for key, value in data.items():
                setattr(model, key, value)
            for key, value in kwargs.items():
                setattr(model, key, value)
            model.set_env(env)
            try:
                model.setup_model()
            except FILE_DATA_ERRORS as exc:
                raise cls._build_error(exc, data, "build") from exc
        if isinstance(params, save_util.StoredParameters):
            named = model._named_parameters()
            params = params.read(expected_sizes={n: int(np.prod(v.shape)) for n, v in named.items()},
                                 names=list(named))
        model.load_parameters(params)
        return model

    # ------------------------------------------------------------------ export
    def export(self, path, format: str = "savedmodel", vecnormalize=None, **kwargs) -> str:  # pylint: disable=W0622
        """
        Export the deterministic policy (what ``predict(obs, deterministic=True)`` returns) for deployment.

        :param path: (str) output folder (``savedmodel``, ``tfjs``) or file (``onnx``)
        :param format: (str) ``"savedmodel"``, ``"tfjs"`` or ``"onnx"`` (tfjs and onnx need the ``export`` extra)
        :param vecnormalize: (VecNormalize or str) observation statistics to fold in (the export takes raw observations)
        :param kwargs: passed to the registered exporter, ``sbtf_converters.export.export_model`` (e.g. ``opset``
            for ONNX); see :mod:`sbtf.common.fileio.formats`
        :return: (str) the path written
        """
        from sbtf.common.fileio import formats

        return formats.exporter()(self, path, format=format, vecnormalize=vecnormalize, **kwargs)


def _print_current_system_info() -> None:
    """SB3's ``load(print_system_info=True)`` for files that store no system info: this machine's."""
    from sbtf.common.algo.sb3_api import get_system_info

    print("== CURRENT SYSTEM INFO ==")
    get_system_info(print_info=True)
