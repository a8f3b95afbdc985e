"""Hyperparameters of ``sbtf train``: the shipped tuned files, the user's overrides, and the model's arguments.

The rl-baselines-zoo format: ``sbtf/hyperparams/<algo>.yml`` holds one entry per env id; ``--hyperparams`` adds YAML
files (flat, or keyed by env id) and ``KEY:VALUE`` pairs. Values are data: Python literals, ``dict(...)`` and
``tf.nn.<activation>`` names are evaluated by :func:`safe_eval`, which runs nothing else. What each algorithm accepts
(several envs, ``lin_<value>`` schedules, action noise, the classes HER wraps) comes from the algorithm registry
:mod:`sbtf.algorithms`.
"""
from __future__ import annotations

import argparse
import ast
import difflib
import inspect
import math
import os
import re
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from sbtf import algorithms
from sbtf.cli.errors import FILE_READ_ERRORS, CLIError, exc_text, file_error
from sbtf.common.file_errors import ModelFileError, describe_value
from sbtf.common.envs.gym_compat import RETIRED_ENV_IDS
from sbtf.common.noise import AdaptiveParamNoiseSpec, NormalActionNoise, OrnsteinUhlenbeckActionNoise
from sbtf.common.fileio.safe_yaml import load_yaml, read_yaml
from sbtf.common.schedules import SampledSchedule

#: CLI algorithm name -> class name (SB2 class names, then the contrib ones: ``ppo_mask`` -> ``MaskablePPO``).
ALGOS: Dict[str, str] = {algo.cli_name: algo.name for algo in algorithms.all_algorithms()}
#: algorithms that collect experience from several envs at once (the others take exactly one env)
MULTI_ENV_ALGOS = frozenset(algo.cli_name for algo in algorithms.all_algorithms() if algo.multi_env)
#: off-policy algorithms (deterministic actions are the sensible default when playing them)
OFF_POLICY_ALGOS = frozenset(algo.cli_name for algo in algorithms.all_algorithms()
                             if algo.family == algorithms.OFF_POLICY)
#: algorithms whose learning_rate (and, for ppo2, cliprange / cliprange_vf) may be a schedule ('lin_<value>')
SCHEDULE_ALGOS = frozenset(algo.cli_name for algo in algorithms.all_algorithms() if algo.schedules)
SCHEDULE_KEYS = ("learning_rate", "cliprange", "cliprange_vf", "clip_range", "clip_range_vf", "delta_std")
#: algorithms that take action noise (noise_type / noise_std)
NOISE_ALGOS = frozenset(algo.cli_name for algo in algorithms.all_algorithms() if algo.noise_types)
NOISE_TYPES = algorithms.NOISE_TYPES
#: the algorithms HER can wrap
HER_MODEL_CLASSES = tuple(name.lower() for name in algorithms.get("HER").wraps)
#: hyperparameters that the command uses itself (they are not passed to the model constructor)
ENV_KEYS = frozenset({"n_envs", "n_timesteps", "normalize", "frame_stack", "env_wrapper", "env_kwargs"})
NOISE_KEYS = frozenset({"noise_type", "noise_std"})
HER_KEYS = frozenset({"model_class"})
GAIL_KEYS = frozenset({"expert_path", "expert_traj_limitation"})
#: constructor arguments that come from command-line flags, not from hyperparameters
FLAG_KEYS: Dict[str, str] = {"verbose": "--verbose", "seed": "--seed", "tensorboard_log": "--tensorboard-log",
                             "env": "--env", "_init_setup_model": "(internal)"}
#: custom policies of the rl-baselines-zoo, as (sbtf policy name, policy_kwargs)
ZOO_POLICIES: Dict[str, Tuple[str, Dict[str, Any]]] = {
    "CustomDQNPolicy": ("LnMlpPolicy", {"layers": [64]}),
    "CustomMlpPolicy": ("MlpPolicy", {"layers": [16]}),
    "CustomSACPolicy": ("MlpPolicy", {"layers": [256, 256]}),
}
#: activation functions a ``policy_kwargs`` string may name (``tf.nn.<name>``)
_ACTIVATIONS = ("relu", "relu6", "tanh", "sigmoid", "elu", "selu", "softplus", "softsign", "leaky_relu", "swish",
                "silu", "gelu")
HYPERPARAMS_PACKAGE = "sbtf"
HYPERPARAMS_FOLDER = "hyperparams"
#: the ``sbtf`` package folder, which holds HYPERPARAMS_FOLDER
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_ENV_KEY_PATTERN = re.compile(r".+-v\d+$")
_KEY_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def algo_name(value: str) -> str:
    """The CLI name of the algorithm the user typed (case-insensitive), or a CLIError listing the valid ones."""
    algo = value.strip().lower()
    if algo not in ALGOS:
        close = difflib.get_close_matches(algo, list(ALGOS), n=1)
        hint = " (did you mean {}?)".format(close[0]) if close else ""
        raise CLIError("unknown algorithm {!r}{}; valid choices: {}".format(value, hint, ", ".join(sorted(ALGOS))))
    return algo


def load_algorithm(algo: str) -> type:
    """
    The model class of a CLI algorithm name, or a :class:`CLIError` saying it is not available.

    :param algo: (str) one of :data:`ALGOS`
    :return: (type) e.g. ``sbtf.PPO2``
    """
    info = algorithms.get(algo)
    try:
        return info.load()
    except algorithms.AlgorithmNotAvailableError as exc:
        missing = getattr(exc.__cause__, "name", None)
        detail = "{} is missing".format(missing) if missing else exc_text(exc.__cause__ or exc)
        raise CLIError("algorithm {} is not available in this version of sbtf ({})".format(algo, detail)) from exc
    except ModuleNotFoundError as exc:
        missing = exc.name or str(exc)
        if missing.split(".")[0] == "sbtf":
            raise CLIError("algorithm {} is not available in this version of sbtf ({} is missing)".format(
                algo, missing)) from exc
        hint = " (pip install 'sbtf[mpi]')" if missing.split(".")[0] == "mpi4py" else ""
        raise CLIError("algorithm {} needs the Python package {!r}, which is not installed{}".format(
            algo, missing, hint), exit_code=1) from exc


def hyperparams_file(algo: str) -> str:
    """Path of the shipped hyperparameter file of ``algo``."""
    return os.path.join(_PACKAGE_DIR, HYPERPARAMS_FOLDER, "{}.yml".format(algo))


def load_default_hyperparams(algo: str) -> Dict[str, Dict[str, Any]]:
    """
    The shipped hyperparameters of an algorithm: ``{env_id: {name: value}}`` (an empty dict if there is no file).

    :param algo: (str) one of :data:`ALGOS`
    """
    path = hyperparams_file(algo)
    if not os.path.isfile(path):
        return {}
    data = read_yaml(path)
    return {str(key): value for key, value in data.items() if isinstance(value, dict)}


def _successor(env_id: str) -> str:
    return RETIRED_ENV_IDS.get(env_id, env_id)


def is_atari_id(env_id: str) -> bool:
    """The zoo's rule for an Atari env id (``NoFrameskip``): its hyperparameters are the ``atari`` entry, its env
    the DeepMind-wrapped one."""
    return "NoFrameskip" in env_id


def find_env_entry(table: Dict[str, Any], env_id: str, requested_id: Optional[str] = None) -> Optional[Dict[str, Any]]:
    """
    The entry of ``table`` for an env: by its id, by the id the user typed, or by an old id that gymnasium retired
    in favour of ``env_id`` (so zoo files keyed ``Pendulum-v0`` apply to ``Pendulum-v1``); for a ``NoFrameskip`` id
    without an entry of its own, the zoo's ``atari`` entry.

    :param table: (dict) ``{env_id: hyperparameters}``
    :param env_id: (str) the (resolved) env id
    :param requested_id: (str) the id as the user gave it
    :return: (dict or None)
    """
    for key in (env_id, requested_id):
        if key is not None and isinstance(table.get(key), dict):
            return table[key]
    for key, value in table.items():
        if isinstance(value, dict) and _successor(str(key)) == env_id:
            return value
    if is_atari_id(env_id) and isinstance(table.get("atari"), dict):  # the zoo: one entry for every game
        return table["atari"]
    return None


def safe_eval(text: str, what: str) -> Any:
    """
    Evaluate a hyperparameter written as Python: literals, ``dict(key=value, ...)``, and ``tf.nn.<activation>`` names
    (e.g. ``"dict(net_arch=[dict(pi=[64], vf=[64])], act_fun=tf.nn.tanh)"``). Nothing else runs.

    :param text: (str) the expression
    :param what: (str) the hyperparameter name, for error messages
    :return: the value
    """
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise CLIError("{}: {} is not a valid Python expression ({})".format(what, describe_value(text),
                                                                             exc.msg)) from exc
    except (MemoryError, RecursionError) as exc:
        raise CLIError("{}: {} is nested too deeply to read".format(what, describe_value(text))) from exc

    def dotted(node: ast.AST) -> Optional[str]:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute):
            base = dotted(node.value)
            return None if base is None else base + "." + node.attr
        return None

    def evaluate(node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.List):
            return [evaluate(elt) for elt in node.elts]
        if isinstance(node, ast.Tuple):
            return tuple(evaluate(elt) for elt in node.elts)
        if isinstance(node, ast.Dict) and all(key is not None for key in node.keys):
            return {evaluate(key): evaluate(val) for key, val in zip(node.keys, node.values)}
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            operand = evaluate(node.operand)
            if isinstance(operand, (int, float)) and not isinstance(operand, bool):
                return -operand if isinstance(node.op, ast.USub) else operand
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict"
                and not node.args and all(kw.arg is not None for kw in node.keywords)):
            return {kw.arg: evaluate(kw.value) for kw in node.keywords}
        name = dotted(node)
        if name is not None:
            parts = name.split(".")
            if len(parts) >= 2 and parts[0] == "tf" and parts[-1] in _ACTIVATIONS and parts[1:-1] in ([], ["nn"]):
                import tensorflow as tf  # pylint: disable=import-outside-toplevel
                module = tf.nn if hasattr(tf.nn, parts[-1]) else tf
                return getattr(module, parts[-1])
        raise CLIError("{}: {} is not allowed in {}: only literals, dict(...) and tf.nn.<activation> names "
                       "(activations: {})".format(what, describe_value(ast.unparse(node)), describe_value(text),
                                                  ", ".join(_ACTIVATIONS)))

    try:
        return evaluate(tree.body)
    except RecursionError as exc:
        raise CLIError("{}: {} is nested too deeply to read".format(what, describe_value(text))) from exc


def parse_value(text: str) -> Any:
    """
    The value of a ``KEY:VALUE`` pair: a Python literal (``0.001``, ``True``, ``[64, 64]``, ``{'a': 1}``), else a YAML
    scalar (``true``, ``null``), else the string itself (``lin_0.001``, ``dict(net_arch=[64])``).
    """
    text = text.strip()
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    try:
        value = load_yaml(text, "a KEY:VALUE pair", mapping=False)
    except ModelFileError:
        return text
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return text


def is_number(value: Any) -> bool:
    """
    Whether ``value`` is a finite int or float (booleans are not numbers here).

    :param value: any value
    :return: True for a finite number
    """
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def as_int(value: Any, what: str, minimum: int) -> int:
    """
    ``value`` as an int of at least ``minimum`` (a string is parsed first).

    :param value: the value (a number or its string)
    :param what: its name, for the error message
    :param minimum: the smallest valid value
    :return: the int
    :raises CLIError: naming ``what``, the valid range and the value given
    """
    if isinstance(value, str):
        value = parse_value(value)
    if not is_number(value) or float(value) != int(value) or int(value) < minimum:
        raise CLIError("{} must be an integer >= {}, got {}".format(what, minimum, describe_value(value)))
    return int(value)


def positive_int(text: str) -> int:
    """argparse type: an integer, also written like 1e5."""
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError("expected an integer, got {!r}".format(text)) from exc
    if not math.isfinite(value) or value != int(value):
        raise argparse.ArgumentTypeError("expected an integer, got {!r}".format(text))
    return int(value)


def load_overrides(item: str, env_id: str, requested_id: str) -> Dict[str, Any]:
    """
    One ``--hyperparams`` item: a YAML file (flat ``{name: value}``, or zoo format keyed by env id) or a
    ``KEY:VALUE`` pair.

    :param item: (str)
    :param env_id: (str) the resolved env id
    :param requested_id: (str) the env id as the user gave it
    :return: (dict) hyperparameters
    """
    if os.path.isfile(item) or item.lower().endswith((".yml", ".yaml")):
        if not os.path.isfile(item):
            raise CLIError("--hyperparams: file {} not found".format(item))
        data = read_yaml(item)  # a ModelFileError (one line from the command) when it is not a mapping of data
        entry = find_env_entry(data, env_id, requested_id)
        if entry is not None:
            return dict(entry)
        env_keys = [str(key) for key in data if _ENV_KEY_PATTERN.match(str(key)) or str(key) == "atari"]
        if env_keys:
            raise CLIError("--hyperparams: {} has no entry for {} (entries: {})".format(
                item, env_id, ", ".join(env_keys)))
        return {str(key): value for key, value in data.items()}
    key, sep, value = item.partition(":")
    key = key.strip()
    if not sep or not _KEY_PATTERN.match(key):
        raise CLIError("--hyperparams: {} is neither a YAML file nor a KEY:VALUE pair".format(describe_value(item)))
    return {key: parse_value(value)}


def _constructor_names(cls: type) -> Tuple[set, bool]:
    params = inspect.signature(cls.__init__).parameters.values()
    names = {p.name for p in params if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                     inspect.Parameter.KEYWORD_ONLY)} - {"self"}
    return names, any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def valid_hyperparameters(algo: str, cls: type, delegate: Optional[type] = None,
                          model_class: Optional[str] = None) -> Optional[List[str]]:
    """
    The hyperparameter names accepted for ``algo``: its constructor's arguments (and those of the class it passes
    ``**kwargs`` to: TRPO for GAIL, the model class for HER) plus the command's own keys. None when they cannot be
    known (a constructor with ``**kwargs`` and no known target).

    :param algo: (str)
    :param cls: (type) the model class
    :param delegate: (type) the class that receives the constructor's ``**kwargs``
    :param model_class: (str) HER's wrapped algorithm (dqn, sac, ddpg, td3)
    :return: ([str] or None)
    """
    names, var_kw = _constructor_names(cls)
    if var_kw:
        if delegate is None:
            return None
        delegate_names, delegate_var_kw = _constructor_names(delegate)
        if delegate_var_kw:
            return None
        names |= delegate_names
    names -= {"policy"} | set(FLAG_KEYS)
    names |= ENV_KEYS | {"policy"}
    effective = algo
    if algorithms.get(algo).wraps:
        names |= HER_KEYS
        effective = model_class or ""
    if algo == "gail":
        names |= GAIL_KEYS
    if effective in NOISE_ALGOS:
        names |= NOISE_KEYS
    return sorted(names)


def check_hyperparameter_names(algo: str, hyperparams: Dict[str, Any], valid: Optional[List[str]]) -> None:
    """Raise a :class:`CLIError` for a hyperparameter the algorithm does not take."""
    for key in hyperparams:
        if key in FLAG_KEYS:
            raise CLIError("{} cannot be set as a hyperparameter: it is set by the command {}".format(
                describe_value(key), "line flag " + FLAG_KEYS[key] if FLAG_KEYS[key].startswith("--") else "itself"))
    if valid is None:
        return
    unknown = [key for key in hyperparams if key not in valid]
    if unknown:
        key = unknown[0]
        close = difflib.get_close_matches(key, valid, n=1)
        hint = " (did you mean {}?)".format(close[0]) if close else ""
        raise CLIError("unknown hyperparameter {} for {}{}; valid choices: {}".format(
            describe_value(key), algo, hint, ", ".join(valid)))


def _schedule_value(key: str, value: Any, effective_algo: str) -> Any:
    if not isinstance(value, str):
        return value
    if not value.startswith("lin_"):
        raise CLIError("{}: expected a number or 'lin_<initial value>' (a linear schedule), got {}".format(
            key, describe_value(value)))
    if effective_algo not in SCHEDULE_ALGOS:
        info = algorithms.find(effective_algo)
        extra = " ({} anneals with lr_schedule: 'linear')".format(effective_algo) \
            if info is not None and info.lr_schedule_argument else ""
        raise CLIError("{}: linear schedules ('lin_<value>') are only supported by {}, not by {}{}".format(
            key, ", ".join(sorted(SCHEDULE_ALGOS)), effective_algo, extra))
    try:
        initial = float(value[len("lin_"):])
    except ValueError as exc:
        raise CLIError("{}: {} is not 'lin_<number>'".format(key, describe_value(value))) from exc
    # value(progress) = progress * initial, progress going from 1 (start) to 0 (end): the zoo's linear_schedule
    return SampledSchedule([(0.0, 0.0), (1.0, initial)])


def _action_noise(hyperparams: Dict[str, Any], effective_algo: str, action_space: Any) -> Dict[str, Any]:
    noise_type = hyperparams.get("noise_type")
    if noise_type is None:
        if "noise_std" in hyperparams:
            raise CLIError("noise_std is given without noise_type (one of {})".format(", ".join(NOISE_TYPES)))
        return {}
    noise_type = str(noise_type).strip()
    if noise_type not in NOISE_TYPES:
        raise CLIError("unknown noise_type {}; valid choices: {}".format(describe_value(noise_type),
                                                                         ", ".join(NOISE_TYPES)))
    noise_std = hyperparams.get("noise_std")
    if not is_number(noise_std) or noise_std < 0:
        raise CLIError("noise_type {} needs noise_std, a number >= 0 (got {})".format(noise_type,
                                                                                     describe_value(noise_std)))

    if noise_type not in algorithms.get(effective_algo).noise_types:
        supported = sorted(algo.cli_name for algo in algorithms.all_algorithms() if noise_type in algo.noise_types)
        raise CLIError("noise_type {}{} is only supported by {}, not by {}".format(
            noise_type, " (parameter noise)" if noise_type == "adaptive-param" else "", ", ".join(supported),
            effective_algo))
    if noise_type == "adaptive-param":
        return {"param_noise": AdaptiveParamNoiseSpec(initial_stddev=float(noise_std),
                                                      desired_action_stddev=float(noise_std))}
    shape = getattr(action_space, "shape", None)
    if not shape:
        raise CLIError("noise_type {} needs a Box action space, the env has {}".format(noise_type, action_space))
    n_actions = int(shape[0])
    mean, sigma = np.zeros(n_actions), float(noise_std) * np.ones(n_actions)
    if noise_type == "normal":
        return {"action_noise": NormalActionNoise(mean=mean, sigma=sigma)}
    return {"action_noise": OrnsteinUhlenbeckActionNoise(mean=mean, sigma=sigma)}


def model_kwargs(algo: str, hyperparams: Dict[str, Any], action_space: Any,
                 model_class: Optional[Tuple[str, type]] = None) -> Dict[str, Any]:
    """
    The constructor arguments of the model from the (merged, checked) hyperparameters: schedules built from
    'lin_<value>', policy_kwargs evaluated, zoo custom policies translated, noise objects, HER's model class and
    GAIL's expert dataset.

    :param algo: (str)
    :param hyperparams: (dict)
    :param action_space: (gymnasium.Space) the env's action space (for the noise size)
    :param model_class: ((str, type)) HER's wrapped algorithm
    :return: (dict) keyword arguments (policy included)
    """
    effective = model_class[0] if model_class is not None else algo
    skip = ENV_KEYS | NOISE_KEYS | HER_KEYS | GAIL_KEYS
    kwargs = {key: value for key, value in hyperparams.items() if key not in skip}
    for key in SCHEDULE_KEYS:
        if key in kwargs:
            kwargs[key] = _schedule_value(key, kwargs[key], effective)
    policy_kwargs = kwargs.get("policy_kwargs")
    if isinstance(policy_kwargs, str):
        policy_kwargs = safe_eval(policy_kwargs, "policy_kwargs")
    if policy_kwargs is not None and not isinstance(policy_kwargs, dict):
        raise CLIError("policy_kwargs must be a dict (e.g. \"dict(net_arch=[64, 64])\"), got {}".format(
            describe_value(policy_kwargs)))
    policy = kwargs.get("policy", "MlpPolicy")
    if not isinstance(policy, str):
        raise CLIError("policy must be a policy name such as 'MlpPolicy', got {}".format(describe_value(policy)))
    if policy in ZOO_POLICIES:
        policy, extra = ZOO_POLICIES[policy]
        policy_kwargs = {**extra, **(policy_kwargs or {})}
    kwargs["policy"] = policy
    if policy_kwargs is not None:
        kwargs["policy_kwargs"] = policy_kwargs
    if effective in NOISE_ALGOS:
        kwargs.update(_action_noise(hyperparams, effective, action_space))
    if model_class is not None:
        kwargs["model_class"] = model_class[1]
    if algo == "gail":
        expert_path = hyperparams.get("expert_path")
        if not expert_path:
            raise CLIError("gail learns from expert demonstrations: give the expert file (an .npz written by "
                           "sbtf.gail.generate_expert_traj) with --hyperparams expert_path:PATH")
        if not os.path.isfile(str(expert_path)):
            raise CLIError("expert_path: file {} not found".format(describe_value(str(expert_path))))
        limitation = as_int(hyperparams.get("expert_traj_limitation", -1), "expert_traj_limitation", -1)
        from sbtf.gail import ExpertDataset  # pylint: disable=import-outside-toplevel
        try:
            kwargs["expert_dataset"] = ExpertDataset(expert_path=str(expert_path), traj_limitation=limitation,
                                                     verbose=0)
        except FILE_READ_ERRORS as exc:
            raise file_error(exc, "expert_path: cannot read {}".format(describe_value(str(expert_path)))) from exc
    return kwargs


def her_model_class(hyperparams: Dict[str, Any]) -> Tuple[str, type]:
    """HER's ``model_class`` hyperparameter: ``(cli name, class)`` of the algorithm it wraps (or a CLIError)."""
    name = hyperparams.get("model_class")
    if not isinstance(name, str) or name.lower() not in HER_MODEL_CLASSES:
        raise CLIError("her needs model_class, one of {} (got {})".format(", ".join(HER_MODEL_CLASSES),
                                                                          describe_value(name)))
    name = name.lower()
    cls = load_algorithm(name)
    return name, cls


def default_policy(observation_space: Any) -> str:
    """``CnnPolicy`` for image observations (uint8, 3 dimensions), else ``MlpPolicy``."""
    shape = getattr(observation_space, "shape", None) or ()
    return "CnnPolicy" if len(shape) == 3 and str(getattr(observation_space, "dtype", "")) == "uint8" else "MlpPolicy"
