"""The ``sbtf`` command line tool (rl-baselines-zoo style).

Subcommands::

    sbtf train --algo ppo2 --env CartPole-v1 [-n TIMESTEPS] [-f logs] [--hyperparams FILE.yml | KEY:VALUE ...] ...
    sbtf enjoy --algo ppo2 --env CartPole-v1 [-f logs] [--exp-id N] [--episodes N] [--gif out.gif] ...

``python -m sbtf`` runs the same program. ``docs/cli.md`` documents every flag and the hyperparameter file format.

``train`` reads the tuned hyperparameters shipped in ``sbtf/hyperparams/<algo>.yml`` (the rl-baselines-zoo format:
one entry per env id), applies the user's overrides (``--hyperparams`` files and ``KEY:VALUE`` pairs, then the
``-n`` / ``--n-envs`` flags), builds the (monitored, optionally normalised / frame-stacked) VecEnv, trains, and saves
into ``LOG_FOLDER/<algo>/<ENV_ID>_<run_id>/``: ``<ENV_ID>.zip`` (the model), ``config.yml`` (the final
hyperparameters, reusable with ``--hyperparams``), ``args.yml`` (the command's arguments), ``vecnormalize.pkl``
(when ``normalize`` is on), ``best_model.zip`` + ``evaluations.npz`` (when evaluating), ``checkpoints/`` (with
``--save-freq``) and the ``Monitor`` files ``<rank>.monitor.csv``. ``enjoy`` loads such a run and plays it.

Exit codes: 0 success; 1 the work could not be done (an env needs a package that is missing, rendering failed...);
2 bad input (unknown algorithm / env / hyperparameter, a value of the wrong type, an algorithm this version of sbtf
does not have, no trained model where one was asked for); 130 training interrupted with Ctrl-C (the model trained
so far is saved). Errors are one line on stderr, never a traceback.

Adding a subcommand
-------------------
Other modules add subcommands (``convert``, ``export``, ...) with one call, :func:`register_subcommand`::

    # sbtf/convert.py (say)
    from sbtf.cli import register_subcommand

    def _add_arguments(parser):               # parser: the subcommand's argparse.ArgumentParser
        parser.add_argument("path")

    def _run(args):                           # args: the parsed argparse.Namespace
        ...                                   # raise sbtf.cli.CLIError("one-line message", exit_code) on bad input
        return 0                              # the exit code

    register_subcommand("convert", _run, _add_arguments, help="convert a stable-baselines 2 model")

The module must be imported before the command line is parsed. For a module inside sbtf, add its name to
:data:`SUBCOMMAND_MODULES` below; another package declares an entry point in the ``sbtf.cli`` group whose target is
the module (``[project.entry-points."sbtf.cli"] convert = "mypkg.convert"``). A listed module that is missing is
skipped silently (so an optional subcommand can be absent); one that fails to import is skipped with a warning.
"""
from __future__ import annotations

import argparse
import ast
import difflib
import importlib
import inspect
import math
import os
import re
import shutil
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import yaml

# --------------------------------------------------------------------------------------------------- constants

#: CLI algorithm name -> attribute of the ``sbtf`` package (SB2 class names).
ALGOS: Dict[str, str] = {
    "a2c": "A2C",
    "acer": "ACER",
    "acktr": "ACKTR",
    "ddpg": "DDPG",
    "dqn": "DQN",
    "gail": "GAIL",
    "her": "HER",
    "ppo1": "PPO1",
    "ppo2": "PPO2",
    "sac": "SAC",
    "td3": "TD3",
    "trpo": "TRPO",
}
#: algorithms that collect experience from several envs at once (the others take exactly one env)
MULTI_ENV_ALGOS = frozenset({"a2c", "acer", "acktr", "ppo2"})
#: off-policy algorithms (deterministic actions are the sensible default when playing them)
OFF_POLICY_ALGOS = frozenset({"ddpg", "dqn", "her", "sac", "td3"})
#: algorithms whose learning_rate (and, for ppo2, cliprange / cliprange_vf) may be a schedule ('lin_<value>')
SCHEDULE_ALGOS = frozenset({"ppo2", "sac", "td3"})
SCHEDULE_KEYS = ("learning_rate", "cliprange", "cliprange_vf")
#: algorithms that take action noise (noise_type / noise_std)
NOISE_ALGOS = frozenset({"ddpg", "sac", "td3"})
NOISE_TYPES = ("normal", "ornstein-uhlenbeck", "adaptive-param")
#: the algorithms HER can wrap
HER_MODEL_CLASSES = ("dqn", "sac", "ddpg", "td3")

#: hyperparameters that the command uses itself (they are not passed to the model constructor)
ENV_KEYS = frozenset({"n_envs", "n_timesteps", "normalize", "frame_stack", "env_wrapper", "env_kwargs"})
NOISE_KEYS = frozenset({"noise_type", "noise_std"})
HER_KEYS = frozenset({"model_class"})
GAIL_KEYS = frozenset({"expert_path", "expert_traj_limitation"})
#: constructor arguments that come from command-line flags, not from hyperparameters
FLAG_KEYS: Dict[str, str] = {"verbose": "--verbose", "seed": "--seed", "tensorboard_log": "--tensorboard-log",
                             "env": "--env", "_init_setup_model": "(internal)"}
#: VecNormalize keyword arguments accepted in a ``normalize`` dict
VEC_NORMALIZE_KEYS = ("norm_obs", "norm_reward", "clip_obs", "clip_reward", "gamma", "epsilon")

#: custom policies of the rl-baselines-zoo, as (sbtf policy name, policy_kwargs)
ZOO_POLICIES: Dict[str, Tuple[str, Dict[str, Any]]] = {
    "CustomDQNPolicy": ("LnMlpPolicy", {"layers": [64]}),
    "CustomMlpPolicy": ("MlpPolicy", {"layers": [16]}),
    "CustomSACPolicy": ("MlpPolicy", {"layers": [256, 256]}),
}

#: envs that sbtf itself provides, registered with gymnasium by the command: id -> entry point
SBTF_ENVS: Dict[str, str] = {
    "BitFlippingEnv-v0": "sbtf.common.bit_flipping_env:BitFlippingEnv",
}

#: activation functions a ``policy_kwargs`` string may name (``tf.nn.<name>``)
_ACTIVATIONS = ("relu", "relu6", "tanh", "sigmoid", "elu", "selu", "softplus", "softsign", "leaky_relu", "swish",
                "silu", "gelu")

HYPERPARAMS_PACKAGE = "sbtf"
HYPERPARAMS_FOLDER = "hyperparams"

#: modules (inside sbtf) that register subcommands when imported; see the module docstring
SUBCOMMAND_MODULES: Tuple[str, ...] = ("sbtf_converters.convert_cli", "sbtf_converters.export")
#: entry-point group through which other packages add subcommands
ENTRY_POINT_GROUP = "sbtf.cli"

_ENV_KEY_PATTERN = re.compile(r".+-v\d+$")
_KEY_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class CLIError(Exception):
    """
    A problem to report to the user as one line (no traceback).

    :param message: (str) what went wrong, and what would be valid
    :param exit_code: (int) 2 for bad input, 1 when the work could not be done
    """

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


# --------------------------------------------------------------------------------------------------- subcommands

@dataclass(frozen=True)
class Subcommand:
    """A registered subcommand (see :func:`register_subcommand`)."""

    name: str
    run: Callable[[argparse.Namespace], Optional[int]]
    add_arguments: Optional[Callable[[argparse.ArgumentParser], None]] = None
    help: Optional[str] = None
    description: Optional[str] = None


_SUBCOMMANDS: Dict[str, Subcommand] = {}
_plugins_loaded = False


def register_subcommand(name: str, run: Callable[[argparse.Namespace], Optional[int]],  # pylint: disable=W0622
                        add_arguments: Optional[Callable[[argparse.ArgumentParser], None]] = None,
                        help: Optional[str] = None, description: Optional[str] = None,
                        replace: bool = False) -> None:
    """
    Add a subcommand to the ``sbtf`` command.

    :param name: (str) the subcommand name (``sbtf NAME ...``)
    :param run: (callable) ``run(args) -> exit code`` (None means 0); raise :class:`CLIError` for a one-line error
    :param add_arguments: (callable) ``add_arguments(parser)`` adds the subcommand's arguments to its parser
    :param help: (str) one line shown in ``sbtf --help``
    :param description: (str) shown in ``sbtf NAME --help`` (defaults to ``help``)
    :param replace: (bool) replace a subcommand already registered under this name (otherwise: ValueError)
    """
    if not re.match(r"^[a-z][a-z0-9-]*$", name):
        raise ValueError("subcommand names are lower-case words (letters, digits, '-'), got {!r}".format(name))
    if name in _SUBCOMMANDS and not replace:
        raise ValueError("the subcommand {!r} is already registered (pass replace=True to replace it)".format(name))
    if not callable(run):
        raise TypeError("run must be callable, got {!r}".format(run))
    _SUBCOMMANDS[name] = Subcommand(name, run, add_arguments, help, description)


def registered_subcommands() -> Dict[str, Subcommand]:
    """The registered subcommands, by name (plugins included)."""
    _load_subcommand_plugins()
    return dict(_SUBCOMMANDS)


def _load_subcommand_plugins() -> None:
    global _plugins_loaded  # pylint: disable=global-statement
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for module_name in SUBCOMMAND_MODULES:
        try:
            importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                print("sbtf: warning: subcommand module {} could not be imported: {}".format(module_name, exc),
                      file=sys.stderr)
        except Exception as exc:  # pylint: disable=broad-except
            print("sbtf: warning: subcommand module {} could not be imported: {}".format(module_name, exc),
                  file=sys.stderr)
    try:
        from importlib.metadata import entry_points  # pylint: disable=import-outside-toplevel
        found = entry_points(group=ENTRY_POINT_GROUP)
    except Exception:  # pylint: disable=broad-except
        found = []
    for entry_point in found:
        try:
            target = entry_point.load()
            if callable(target) and not inspect.ismodule(target):
                target()
        except Exception as exc:  # pylint: disable=broad-except
            print("sbtf: warning: subcommand plugin {} could not be loaded: {}".format(entry_point.value, exc),
                  file=sys.stderr)


# --------------------------------------------------------------------------------------------------- small helpers

def _algo_name(value: str) -> str:
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
    import sbtf  # pylint: disable=import-outside-toplevel

    class_name = ALGOS[algo]
    try:
        return getattr(sbtf, class_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or str(exc)
        if missing.split(".")[0] == "sbtf":
            raise CLIError("algorithm {} is not available in this version of sbtf ({} is missing)".format(
                algo, missing)) from exc
        hint = " (pip install 'sbtf[mpi]')" if missing.split(".")[0] == "mpi4py" else ""
        raise CLIError("algorithm {} needs the Python package {!r}, which is not installed{}".format(
            algo, missing, hint), exit_code=1) from exc
    except (ImportError, AttributeError) as exc:
        missing = getattr(exc.__cause__, "name", None)
        detail = "{} is missing".format(missing) if missing else _exc_text(exc)
        raise CLIError("algorithm {} is not available in this version of sbtf ({})".format(algo, detail)) from exc


def hyperparams_file(algo: str) -> str:
    """Path of the shipped hyperparameter file of ``algo``."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), HYPERPARAMS_FOLDER, "{}.yml".format(algo))


def load_default_hyperparams(algo: str) -> Dict[str, Dict[str, Any]]:
    """
    The shipped hyperparameters of an algorithm: ``{env_id: {name: value}}`` (an empty dict if there is no file).

    :param algo: (str) one of :data:`ALGOS`
    """
    path = hyperparams_file(algo)
    if not os.path.isfile(path):
        return {}
    with open(path, "r", encoding="utf-8") as handle:
        data = yaml.safe_load(handle) or {}
    return {str(key): value for key, value in data.items() if isinstance(value, dict)}


def _successor(env_id: str) -> str:
    from sbtf.common.gym_compat import RETIRED_ENV_IDS  # pylint: disable=import-outside-toplevel
    return RETIRED_ENV_IDS.get(env_id, env_id)


def find_env_entry(table: Dict[str, Any], env_id: str, requested_id: Optional[str] = None) -> Optional[Dict[str, Any]]:
    """
    The entry of ``table`` for an env: by its id, by the id the user typed, or by an old id that gymnasium retired
    in favour of ``env_id`` (so zoo files keyed ``Pendulum-v0`` apply to ``Pendulum-v1``).

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
    return None


def _safe_name(env_id: str) -> str:
    """An env id as a file / folder name."""
    return env_id.replace("/", "-").replace(":", "-").replace(os.sep, "-")


def _plain(value: Any) -> Any:
    """A YAML-safe copy (tuples as lists, numpy scalars as Python numbers)."""
    if isinstance(value, dict):
        return {str(key): _plain(val) for key, val in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(val) for val in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        try:
            return value.item()
        except (TypeError, ValueError):
            pass
    return value


def _dump_yaml(data: Dict[str, Any], path: str) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        yaml.safe_dump(_plain(data), handle, default_flow_style=False, sort_keys=True)


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
        raise CLIError("{}: {!r} is not a valid Python expression ({})".format(what, text, exc.msg)) from exc

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
        raise CLIError("{}: {!r} is not allowed in {!r}: only literals, dict(...) and tf.nn.<activation> names "
                       "(activations: {})".format(what, ast.unparse(node), text, ", ".join(_ACTIVATIONS)))

    return evaluate(tree.body)


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
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return text


def _exc_text(exc: BaseException) -> str:
    """An exception's message on one line, without SB2's 'Error: ' prefix."""
    text = " ".join(str(exc).split())
    return text[len("Error: "):] if text.startswith("Error: ") else text


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _as_int(value: Any, what: str, minimum: int) -> int:
    if isinstance(value, str):
        value = parse_value(value)
    if not _is_number(value) or float(value) != int(value) or int(value) < minimum:
        raise CLIError("{} must be an integer >= {}, got {!r}".format(what, minimum, value))
    return int(value)


def _positive_int(text: str) -> int:
    """argparse type: an integer, also written like 1e5."""
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError("expected an integer, got {!r}".format(text)) from exc
    if not math.isfinite(value) or value != int(value):
        raise argparse.ArgumentTypeError("expected an integer, got {!r}".format(text))
    return int(value)


# --------------------------------------------------------------------------------------------------- envs

def _register_sbtf_envs() -> None:
    import gymnasium  # pylint: disable=import-outside-toplevel

    for env_id, entry_point in SBTF_ENVS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point=entry_point)


def _import_gym_packages(modules: Sequence[str]) -> None:
    for module in modules or ():
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise CLIError("--gym-packages: cannot import {!r}: {}".format(module, exc)) from exc


def resolve_env(env_arg: str, algo: str, tuned: Sequence[str] = ()) -> str:
    """
    Check an env id and return the id to make: ``module:EnvId`` imports ``module`` first (as ``gymnasium.make``
    does); ids that gymnasium retired are replaced by their successor (:data:`sbtf.common.gym_compat.RETIRED_ENV_IDS`).

    :param env_arg: (str) the id the user gave
    :param algo: (str) the algorithm (for the list of valid choices in the error)
    :param tuned: (list) env ids that have tuned hyperparameters for ``algo``
    :return: (str) a registered env id
    """
    import gymnasium  # pylint: disable=import-outside-toplevel
    from sbtf.common.gym_compat import resolve_env_id  # pylint: disable=import-outside-toplevel

    _register_sbtf_envs()
    env_id = env_arg.strip()
    if ":" in env_id:
        module, _, env_id = env_id.partition(":")
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise CLIError("cannot import {!r} (from the env id {!r}): {}".format(module, env_arg, exc)) from exc
    if env_id in gymnasium.registry:
        return env_id
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        successor = resolve_env_id(env_id)
    if successor != env_id and successor in gymnasium.registry:
        print("sbtf: note: env id {} was retired by gymnasium; using its successor {}".format(env_id, successor),
              file=sys.stderr)
        return successor
    close = difflib.get_close_matches(env_id, list(gymnasium.registry), n=3)
    hint = "; did you mean {}?".format(" or ".join(close)) if close else ""
    choices = ", ".join(tuned) if tuned else "(none)"
    raise CLIError("unknown env id {!r} (not registered in gymnasium{}){}. Envs with tuned {} hyperparameters: {}. "
                   "Envs of other packages: import them with --gym-packages MODULE".format(
                       env_arg, "" if ":" not in env_arg else " after importing its module", hint, algo, choices))


@dataclass
class EnvSettings:
    """The hyperparameters that shape the environment."""

    normalize: bool = False
    normalize_kwargs: Dict[str, Any] = field(default_factory=dict)
    frame_stack: int = 0
    env_wrapper: Any = None
    env_kwargs: Dict[str, Any] = field(default_factory=dict)
    #: 'module.Name' wrappers the user allowed (command line / Python) besides sbtf's and gymnasium's own
    allowed_wrappers: Tuple[str, ...] = ()
    #: where the settings were read (for messages)
    source: str = "the hyperparameters"


def env_settings(hyperparams: Dict[str, Any], allowed_wrappers: Sequence[str] = (),
                 source: str = "the hyperparameters") -> EnvSettings:
    """
    Read normalize / frame_stack / env_wrapper / env_kwargs from hyperparameters (shipped, user's or a config.yml).
    These are data: ``env_wrapper`` resolves only to sbtf's or gymnasium's wrappers, or to names in
    ``allowed_wrappers`` (``--allow-wrapper``), see :func:`wrapper_class`.

    :param hyperparams: (dict)
    :param allowed_wrappers: (list of str) 'module.Name' wrappers the user trusts
    :param source: (str) where ``hyperparams`` were read, for messages (e.g. the config.yml path)
    :return: (EnvSettings)
    """
    settings = EnvSettings(allowed_wrappers=tuple(_wrapper_path(p) for p in allowed_wrappers), source=source)
    normalize = hyperparams.get("normalize", False)
    if isinstance(normalize, str):
        try:
            normalize = safe_eval(normalize, "normalize")
        except CLIError:
            pass  # reported below, with what would be valid
    if normalize is None or isinstance(normalize, bool):
        settings.normalize = bool(normalize)
    elif isinstance(normalize, dict):
        unknown = sorted(set(normalize) - set(VEC_NORMALIZE_KEYS))
        if unknown:
            raise CLIError("normalize: unknown VecNormalize argument(s) {}; valid: {}".format(
                ", ".join(map(str, unknown)), ", ".join(VEC_NORMALIZE_KEYS)))
        settings.normalize = True
        settings.normalize_kwargs = dict(normalize)
    else:
        raise CLIError("normalize must be true, false or a dict of VecNormalize arguments ({}), got {!r}".format(
            ", ".join(VEC_NORMALIZE_KEYS), normalize))
    frame_stack = hyperparams.get("frame_stack", 0)
    settings.frame_stack = 0 if frame_stack in (None, False) else _as_int(frame_stack, "frame_stack", 0)
    settings.env_wrapper = hyperparams.get("env_wrapper")
    env_kwargs = hyperparams.get("env_kwargs") or {}
    if isinstance(env_kwargs, str):
        env_kwargs = safe_eval(env_kwargs, "env_kwargs")
    if not isinstance(env_kwargs, dict):
        raise CLIError("env_kwargs must be a dict of keyword arguments for the env, got {!r}".format(env_kwargs))
    settings.env_kwargs = dict(env_kwargs)
    return settings


def _import_object(path: str, what: str) -> Any:
    module_name, sep, attr = path.replace(":", ".").rpartition(".")
    if not sep or not module_name:
        raise CLIError("{}: {!r} is not a 'module.Name' path".format(what, path))
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise CLIError("{}: cannot import {!r}: {}".format(what, path, exc)) from exc


#: rl-baselines-zoo wrappers that zoo config.yml files name (sbtf does not provide them yet)
ZOO_WRAPPERS = ("utils.wrappers.", "utils.utils.")
_TRUSTED_WRAPPER_MODULES = ("sbtf", "gymnasium")


def _wrapper_path(path: str) -> str:
    return str(path).strip().replace(":", ".")


def _plain_kwargs(value: Any, depth: int = 0) -> bool:
    if depth > 16:
        return False
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_plain_kwargs(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain_kwargs(v, depth + 1) for k, v in value.items())
    return False


def _resolve_wrapper(path: str, settings: EnvSettings) -> Any:
    """
    The wrapper class a settings file names. sbtf's and gymnasium's wrapper classes (subclasses of
    ``gymnasium.Wrapper``) are resolved; any other name only when the user allowed it (``--allow-wrapper``), because
    importing and calling an arbitrary name from a file is running code from that file.
    """
    import gymnasium  # pylint: disable=import-outside-toplevel

    path = _wrapper_path(path)
    module_name, sep, attr = path.rpartition(".")
    if not sep or not module_name or not attr.isidentifier():
        raise CLIError("env_wrapper in {}: {!r} is not a 'module.Name' path".format(settings.source, path))
    if path in settings.allowed_wrappers:
        return _import_object(path, "env_wrapper")
    if module_name.split(".")[0] in _TRUSTED_WRAPPER_MODULES:
        try:
            obj = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError):
            obj = None
        if isinstance(obj, type) and issubclass(obj, gymnasium.Wrapper):
            return obj
    hint = ""
    if path.startswith(ZOO_WRAPPERS):
        hint = (" It is an rl-baselines-zoo wrapper, which sbtf does not provide yet; with the zoo's utils on your "
                "PYTHONPATH, pass --allow-wrapper {} to use it.".format(path))
    raise CLIError("env_wrapper in {} names {!r}, which is not an sbtf or gymnasium wrapper class. A settings file is "
                   "data: sbtf does not import and call other names from it. If you trust it, pass --allow-wrapper "
                   "{} (in Python: env_settings(..., allowed_wrappers=[{!r}])).{}".format(
                       settings.source, path, path, path, hint))


def wrapper_class(spec: Any, settings: Optional[EnvSettings] = None) -> Optional[Callable[[Any], Any]]:
    """
    The function that applies ``env_wrapper``: a 'module.Class' string, a ``{'module.Class': {kwargs}}`` dict, or a
    list of those (applied in order). Names resolve only to sbtf's and gymnasium's wrappers or to names in
    ``settings.allowed_wrappers``; arguments must be plain YAML data.

    :param spec: the ``env_wrapper`` hyperparameter
    :param settings: (EnvSettings) the allowed names and the source, for messages
    :return: (callable or None)
    """
    if not spec:
        return None
    settings = settings or EnvSettings()
    items = spec if isinstance(spec, list) else [spec]
    wrappers: List[Tuple[Any, Dict[str, Any]]] = []
    for item in items:
        if isinstance(item, dict) and len(item) == 1:
            path, kwargs = next(iter(item.items()))
            kwargs = kwargs or {}
        elif isinstance(item, str):
            path, kwargs = item, {}
        else:
            raise CLIError("env_wrapper: expected 'module.Class', {{'module.Class': {{kwargs}}}} or a list of "
                           "those, got {!r}".format(item))
        if not isinstance(kwargs, dict) or not _plain_kwargs(kwargs):
            raise CLIError("env_wrapper: the arguments of {} must be a dict of plain values, got {!r}".format(
                path, kwargs))
        wrappers.append((_resolve_wrapper(str(path), settings), dict(kwargs)))

    def wrap(env: Any) -> Any:
        for cls, kwargs in wrappers:
            env = cls(env, **kwargs)
        return env

    return wrap


def make_env(env_id: str, n_envs: int, seed: Optional[int], settings: EnvSettings, monitor_dir: Optional[str] = None,
             render_mode: Optional[str] = None) -> Any:
    """
    The monitored DummyVecEnv of an env id (without VecNormalize / VecFrameStack), with a one-line error when the
    env cannot be made.

    :param env_id: (str) a registered env id
    :param n_envs: (int) number of envs
    :param seed: (int) env i is seeded with seed + i
    :param settings: (EnvSettings) env_wrapper and env_kwargs
    :param monitor_dir: (str) folder of the Monitor files (None: no files)
    :param render_mode: (str) gymnasium render mode
    :return: (VecEnv)
    """
    import gymnasium  # pylint: disable=import-outside-toplevel
    from sbtf.common.cmd_util import make_vec_env  # pylint: disable=import-outside-toplevel

    env_kwargs = dict(settings.env_kwargs)
    if render_mode is not None:
        env_kwargs["render_mode"] = render_mode
    wrap = wrapper_class(settings.env_wrapper, settings)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*render_mode.*")
            return make_vec_env(env_id, n_envs=n_envs, seed=seed, monitor_dir=monitor_dir, wrapper_class=wrap,
                                env_kwargs=env_kwargs)
    except gymnasium.error.DependencyNotInstalled as exc:
        raise CLIError("cannot make {}: {}".format(env_id, exc), exit_code=1) from exc
    except ModuleNotFoundError as exc:
        if env_id in SBTF_ENVS and (exc.name or "").startswith("sbtf"):
            raise CLIError("env {} needs {}, which this version of sbtf does not have".format(
                env_id, SBTF_ENVS[env_id].split(":")[0])) from exc
        raise CLIError("cannot make {}: {}".format(env_id, exc), exit_code=1) from exc
    except TypeError as exc:
        if env_kwargs:
            raise CLIError("cannot make {} with env_kwargs {}: {}".format(env_id, env_kwargs, exc)) from exc
        raise


def wrap_vec_env(venv: Any, settings: EnvSettings, gamma: Optional[float] = None, training: bool = True) -> Any:
    """
    Add VecNormalize (when normalize is on) and VecFrameStack (when frame_stack > 0), as at training time.

    :param venv: (VecEnv)
    :param settings: (EnvSettings)
    :param gamma: (float) the algorithm's discount, used for reward normalisation unless normalize gives one
    :param training: (bool) False: an evaluation env (statistics frozen, rewards not normalised)
    :return: (VecEnv)
    """
    from sbtf.common.vec_env import VecFrameStack, VecNormalize  # pylint: disable=import-outside-toplevel

    if settings.normalize:
        kwargs = dict(settings.normalize_kwargs)
        if gamma is not None and "gamma" not in kwargs:
            kwargs["gamma"] = float(gamma)
        if not training:
            kwargs.update(training=False, norm_reward=False)
        venv = VecNormalize(venv, **kwargs)
    if settings.frame_stack > 0:
        venv = VecFrameStack(venv, settings.frame_stack)
    return venv


# --------------------------------------------------------------------------------------------------- hyperparameters

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
        try:
            with open(item, "r", encoding="utf-8") as handle:
                data = yaml.safe_load(handle)
        except (OSError, yaml.YAMLError) as exc:
            raise CLIError("--hyperparams: cannot read {}: {}".format(item, str(exc).replace("\n", " "))) from exc
        if data is None:
            return {}
        if not isinstance(data, dict):
            raise CLIError("--hyperparams: {} must hold a mapping of hyperparameters, got {}".format(
                item, type(data).__name__))
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
        raise CLIError("--hyperparams: {!r} is neither a YAML file nor a KEY:VALUE pair".format(item))
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
    if algo == "her":
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
            raise CLIError("{!r} cannot be set as a hyperparameter: it is set by the command {}".format(
                key, "line flag " + FLAG_KEYS[key] if FLAG_KEYS[key].startswith("--") else "itself"))
    if valid is None:
        return
    unknown = [key for key in hyperparams if key not in valid]
    if unknown:
        key = unknown[0]
        close = difflib.get_close_matches(key, valid, n=1)
        hint = " (did you mean {}?)".format(close[0]) if close else ""
        raise CLIError("unknown hyperparameter {!r} for {}{}; valid choices: {}".format(
            key, algo, hint, ", ".join(valid)))


def _schedule_value(key: str, value: Any, effective_algo: str) -> Any:
    if not isinstance(value, str):
        return value
    if not value.startswith("lin_"):
        raise CLIError("{}: expected a number or 'lin_<initial value>' (a linear schedule), got {!r}".format(
            key, value))
    if effective_algo not in SCHEDULE_ALGOS:
        extra = " ({} anneals with lr_schedule: 'linear')".format(effective_algo) \
            if effective_algo in ("a2c", "acer", "acktr") else ""
        raise CLIError("{}: linear schedules ('lin_<value>') are only supported by {}, not by {}{}".format(
            key, ", ".join(sorted(SCHEDULE_ALGOS)), effective_algo, extra))
    try:
        initial = float(value[len("lin_"):])
    except ValueError as exc:
        raise CLIError("{}: {!r} is not 'lin_<number>'".format(key, value)) from exc
    from sbtf.common.schedules import SampledSchedule  # pylint: disable=import-outside-toplevel
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
        raise CLIError("unknown noise_type {!r}; valid choices: {}".format(noise_type, ", ".join(NOISE_TYPES)))
    noise_std = hyperparams.get("noise_std")
    if not _is_number(noise_std) or noise_std < 0:
        raise CLIError("noise_type {} needs noise_std, a number >= 0 (got {!r})".format(noise_type, noise_std))
    import numpy as np  # pylint: disable=import-outside-toplevel
    from sbtf.common.noise import (AdaptiveParamNoiseSpec, NormalActionNoise,  # pylint: disable=import-outside-toplevel
                                   OrnsteinUhlenbeckActionNoise)

    if noise_type == "adaptive-param":
        if effective_algo != "ddpg":
            raise CLIError("noise_type adaptive-param (parameter noise) is only supported by ddpg, not by {}".format(
                effective_algo))
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
        raise CLIError("policy_kwargs must be a dict (e.g. \"dict(net_arch=[64, 64])\"), got {!r}".format(
            policy_kwargs))
    policy = kwargs.get("policy", "MlpPolicy")
    if not isinstance(policy, str):
        raise CLIError("policy must be a policy name such as 'MlpPolicy', got {!r}".format(policy))
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
            raise CLIError("expert_path: file {} not found".format(expert_path))
        limitation = _as_int(hyperparams.get("expert_traj_limitation", -1), "expert_traj_limitation", -1)
        from sbtf.gail import ExpertDataset  # pylint: disable=import-outside-toplevel
        try:
            kwargs["expert_dataset"] = ExpertDataset(expert_path=str(expert_path), traj_limitation=limitation,
                                                     verbose=0)
        except (OSError, ValueError, KeyError) as exc:
            raise CLIError("expert_path: cannot read {}: {}".format(expert_path, exc)) from exc
    return kwargs


def _her_model_class(hyperparams: Dict[str, Any]) -> Tuple[str, type]:
    name = hyperparams.get("model_class")
    if not isinstance(name, str) or name.lower() not in HER_MODEL_CLASSES:
        raise CLIError("her needs model_class, one of {} (got {!r})".format(", ".join(HER_MODEL_CLASSES), name))
    name = name.lower()
    cls = load_algorithm(name)
    return name, cls


def _default_policy(observation_space: Any) -> str:
    shape = getattr(observation_space, "shape", None) or ()
    return "CnnPolicy" if len(shape) == 3 and str(getattr(observation_space, "dtype", "")) == "uint8" else "MlpPolicy"


# --------------------------------------------------------------------------------------------------- runs

def _run_ids(algo_dir: str, name: str) -> List[int]:
    if not os.path.isdir(algo_dir):
        return []
    pattern = re.compile(r"^{}_(\d+)$".format(re.escape(name)))
    ids = []
    for entry in os.listdir(algo_dir):
        match = pattern.match(entry)
        if match and os.path.isdir(os.path.join(algo_dir, entry)):
            ids.append(int(match.group(1)))
    return sorted(ids)


def _new_run_dir(algo_dir: str, name: str) -> Tuple[str, int]:
    os.makedirs(algo_dir, exist_ok=True)
    run_id = max(_run_ids(algo_dir, name), default=0) + 1
    while True:
        path = os.path.join(algo_dir, "{}_{}".format(name, run_id))
        try:
            os.makedirs(path)
            return path, run_id
        except FileExistsError:
            run_id += 1


def find_run_dir(log_folder: str, algo: str, name: str, exp_id: int) -> str:
    """
    The folder of a trained run: ``LOG_FOLDER/<algo>/<name>_<exp_id>`` (exp_id 0: the latest).

    :return: (str)
    """
    algo_dir = os.path.join(log_folder, algo)
    ids = _run_ids(algo_dir, name)
    if not ids:
        raise CLIError("no trained {} agent for {} in {} (train one with: sbtf train --algo {} --env {} -f {})".format(
            algo, name, algo_dir, algo, name, log_folder))
    if exp_id == 0:
        exp_id = ids[-1]
    elif exp_id not in ids:
        raise CLIError("no run {}_{} in {}; runs found: {}".format(name, exp_id, algo_dir,
                                                                  ", ".join(str(i) for i in ids)))
    return os.path.join(algo_dir, "{}_{}".format(name, exp_id))


# --------------------------------------------------------------------------------------------------- train

def _add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--algo", required=True, metavar="ALGO",
                        help="RL algorithm: {}".format(", ".join(sorted(ALGOS))))
    parser.add_argument("--env", required=True, metavar="ENV_ID", help="gymnasium env id (e.g. CartPole-v1)")
    parser.add_argument("-f", "--log-folder", default="logs", metavar="LOG_FOLDER",
                        help="root folder of the runs (default: logs)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    parser.add_argument("--gym-packages", nargs="+", default=[], metavar="MODULE",
                        help="Python modules to import first (they register extra envs)")
    parser.add_argument("--allow-wrapper", action="append", default=[], metavar="MODULE.NAME",
                        help="an env_wrapper named by the hyperparameters or the run's config.yml that is neither "
                             "sbtf's nor gymnasium's and that you trust (repeatable)")


def _add_train_arguments(parser: argparse.ArgumentParser) -> None:
    _add_common_arguments(parser)
    parser.add_argument("-n", "--n-timesteps", type=_positive_int, default=None, metavar="TIMESTEPS",
                        help="number of timesteps to train (default: n_timesteps of the hyperparameters)")
    parser.add_argument("--hyperparams", nargs="+", default=[], metavar="FILE_OR_KEY:VALUE",
                        help="overrides: YAML files (flat, or keyed by env id as the shipped files) and/or "
                             "KEY:VALUE pairs (e.g. learning_rate:lin_0.001 n_steps:64), applied in order")
    parser.add_argument("--n-envs", type=int, default=None, metavar="N", help="override n_envs")
    parser.add_argument("--eval-freq", type=int, default=10000, metavar="N",
                        help="evaluate every N timesteps and keep the best model (<= 0: no evaluation; "
                             "default: 10000)")
    parser.add_argument("--eval-episodes", type=int, default=5, metavar="N",
                        help="episodes per evaluation (default: 5)")
    parser.add_argument("--save-freq", type=int, default=-1, metavar="N",
                        help="save a checkpoint every N timesteps in <run>/checkpoints (<= 0: none; default)")
    parser.add_argument("--log-interval", type=int, default=None, metavar="N",
                        help="log_interval of learn() (default: the algorithm's)")
    parser.add_argument("-tb", "--tensorboard-log", default=None, metavar="DIR",
                        help="TensorBoard log folder (runs go to DIR/<ENV_ID>)")
    parser.add_argument("--verbose", type=int, default=1, choices=(0, 1, 2),
                        help="0: quiet, 1: training information (default), 2: debug")
    parser.add_argument("--no-progress", action="store_true", help="do not show the progress bar")


@dataclass
class TrainPlan:
    """What ``sbtf train`` will do, worked out before anything is built."""

    algo: str
    env_id: str
    name: str
    hyperparams: Dict[str, Any]
    n_timesteps: int
    n_envs: int
    settings: EnvSettings
    algo_class: type
    model_class: Optional[Tuple[str, type]]
    tuned: bool


def plan_training(args: argparse.Namespace) -> TrainPlan:
    """
    Check the algorithm, the env and the hyperparameters of a ``train`` command, and merge the hyperparameters
    (shipped defaults, then ``--hyperparams`` items in order, then ``-n`` / ``--n-envs``).

    :param args: (argparse.Namespace) parsed ``train`` arguments
    :return: (TrainPlan)
    """
    algo = _algo_name(args.algo)
    _import_gym_packages(args.gym_packages)
    defaults = load_default_hyperparams(algo)
    env_id = resolve_env(args.env, algo, sorted(defaults))
    entry = find_env_entry(defaults, env_id, args.env)
    hyperparams: Dict[str, Any] = dict(entry) if entry is not None else {}
    for item in args.hyperparams:
        hyperparams.update(load_overrides(item, env_id, args.env))
    if args.n_timesteps is not None:
        if args.n_timesteps <= 0:
            raise CLIError("-n/--n-timesteps must be positive, got {}".format(args.n_timesteps))
        hyperparams["n_timesteps"] = args.n_timesteps
    if args.n_envs is not None:
        hyperparams["n_envs"] = args.n_envs
    if "n_timesteps" not in hyperparams:
        raise CLIError("no tuned {} hyperparameters for {} (tuned envs: {}); give the number of timesteps with -n "
                       "(and hyperparameters with --hyperparams) to train with the algorithm's defaults".format(
                           algo, env_id, ", ".join(sorted(defaults)) or "none"))
    n_timesteps = hyperparams["n_timesteps"]
    if not _is_number(n_timesteps) or n_timesteps < 1:
        raise CLIError("n_timesteps must be a positive number, got {!r}".format(n_timesteps))
    n_timesteps = int(n_timesteps)
    hyperparams["n_timesteps"] = n_timesteps
    n_envs = _as_int(hyperparams.get("n_envs", 1), "n_envs", 1)
    hyperparams["n_envs"] = n_envs
    if n_envs > 1 and algo not in MULTI_ENV_ALGOS:
        raise CLIError("{} trains on a single env: n_envs must be 1, got {} (multi-env algorithms: {})".format(
            algo, n_envs, ", ".join(sorted(MULTI_ENV_ALGOS))))
    settings = env_settings(hyperparams, getattr(args, "allow_wrapper", ()), "the hyperparameters")
    if algo == "her" and (settings.normalize or settings.frame_stack):
        raise CLIError("her does not support normalize or frame_stack (HER wraps the env itself)")

    algo_class = load_algorithm(algo)
    model_class = None
    delegate = None
    if algo == "her":
        model_class = _her_model_class(hyperparams)
        delegate = model_class[1]
    elif algo == "gail":
        delegate = load_algorithm("trpo")
    valid = valid_hyperparameters(algo, algo_class, delegate, model_class[0] if model_class else None)
    check_hyperparameter_names(algo, hyperparams, valid)
    return TrainPlan(algo, env_id, _safe_name(env_id), hyperparams, n_timesteps, n_envs, settings, algo_class,
                     model_class, entry is not None)


def _learn(model: Any, n_timesteps: int, callbacks: List[Any], progress: bool, log_interval: Optional[int]) -> None:
    learn_params = inspect.signature(model.learn).parameters
    kwargs: Dict[str, Any] = {}
    if log_interval is not None:
        kwargs["log_interval"] = log_interval
    if progress:
        if "progress_bar" in learn_params:
            kwargs["progress_bar"] = True
        else:
            from sbtf.common.callbacks import ProgressBarCallback  # pylint: disable=import-outside-toplevel
            callbacks = callbacks + [ProgressBarCallback()]
    model.learn(n_timesteps, callback=callbacks or None, **kwargs)


def run_train(args: argparse.Namespace) -> int:
    """The ``train`` subcommand."""
    plan = plan_training(args)
    algo, env_id, name, hyperparams = plan.algo, plan.env_id, plan.name, plan.hyperparams
    if args.verbose >= 1:
        source = hyperparams_file(algo) if plan.tuned else "no tuned entry: the algorithm's defaults"
        print("Hyperparameters for {} on {} ({}{}):".format(
            algo, env_id, source, ", with overrides" if args.hyperparams else ""))
        print("  " + yaml.safe_dump(_plain(hyperparams), default_flow_style=False, sort_keys=True)
              .rstrip().replace("\n", "\n  "))

    algo_dir = os.path.join(args.log_folder, algo)
    new_dirs = [path for path in (args.log_folder, algo_dir) if not os.path.isdir(path)]
    run_dir, run_id = _new_run_dir(algo_dir, name)
    envs_to_close: List[Any] = []
    try:
        venv = make_env(env_id, plan.n_envs, args.seed, plan.settings, monitor_dir=run_dir)
        envs_to_close.append(venv)
        gamma = hyperparams.get("gamma")
        train_env = wrap_vec_env(venv, plan.settings, gamma=gamma if _is_number(gamma) else None)
        if "policy" not in hyperparams:
            hyperparams["policy"] = _default_policy(train_env.observation_space)
        kwargs = model_kwargs(algo, hyperparams, train_env.action_space, plan.model_class)
        policy = kwargs.pop("policy")
        model_env = venv.envs[0] if algo == "her" else train_env
        tensorboard_log = os.path.join(args.tensorboard_log, name) if args.tensorboard_log else None
        try:
            model = plan.algo_class(policy, model_env, verbose=args.verbose, seed=args.seed,
                                    tensorboard_log=tensorboard_log, **kwargs)
        except (ValueError, TypeError, NotImplementedError, KeyError) as exc:
            raise CLIError("cannot create the {} model with these hyperparameters: {}".format(
                algo, _exc_text(exc))) from exc

        callbacks: List[Any] = []
        if args.eval_freq and args.eval_freq > 0:
            from sbtf.common.callbacks import EvalCallback  # pylint: disable=import-outside-toplevel
            if args.eval_episodes < 1:
                raise CLIError("--eval-episodes must be at least 1, got {}".format(args.eval_episodes))
            eval_venv = make_env(env_id, 1, args.seed + 1000, plan.settings)
            envs_to_close.append(eval_venv)
            eval_env = wrap_vec_env(eval_venv, plan.settings, training=False)
            callbacks.append(EvalCallback(eval_env, n_eval_episodes=args.eval_episodes,
                                          eval_freq=max(args.eval_freq // plan.n_envs, 1), log_path=run_dir,
                                          best_model_save_path=run_dir, deterministic=True,
                                          verbose=1 if args.verbose >= 1 else 0))
        if args.save_freq and args.save_freq > 0:
            from sbtf.common.callbacks import CheckpointCallback  # pylint: disable=import-outside-toplevel
            callbacks.append(CheckpointCallback(save_freq=max(args.save_freq // plan.n_envs, 1),
                                                save_path=os.path.join(run_dir, "checkpoints"),
                                                name_prefix="rl_model", verbose=args.verbose))
    except BaseException:
        for env in envs_to_close:
            env.close()
        shutil.rmtree(run_dir, ignore_errors=True)
        for path in reversed(new_dirs):  # folders this run created, if they are still empty
            try:
                os.rmdir(path)
            except OSError:
                pass
        raise

    exit_code = 0
    try:
        _learn(model, plan.n_timesteps, callbacks, not args.no_progress, args.log_interval)
    except KeyboardInterrupt:
        print("\nTraining interrupted: saving the model trained so far ({} timesteps).".format(
            getattr(model, "num_timesteps", "?")), file=sys.stderr)
        exit_code = 130
    if getattr(model, "num_timesteps", 1) == 0:
        print("sbtf: warning: the model made no training step: n_timesteps ({}) may be smaller than one rollout of "
              "{}".format(plan.n_timesteps, algo), file=sys.stderr)

    model_path = os.path.join(run_dir, "{}.zip".format(name))
    model.save(model_path)
    config_path = os.path.join(run_dir, "config.yml")
    _dump_yaml(hyperparams, config_path)
    _dump_yaml({"algo": algo, "env": env_id, "seed": args.seed, "n_timesteps": plan.n_timesteps,
                "log_folder": args.log_folder, "hyperparams": list(args.hyperparams), "eval_freq": args.eval_freq,
                "eval_episodes": args.eval_episodes, "save_freq": args.save_freq,
                "tensorboard_log": args.tensorboard_log, "gym_packages": list(args.gym_packages)},
               os.path.join(run_dir, "args.yml"))
    print("Saved the model to {}".format(model_path))
    print("Saved the hyperparameters to {}".format(config_path))
    if plan.settings.normalize:
        from sbtf.common.vec_env import unwrap_vec_normalize  # pylint: disable=import-outside-toplevel
        vec_normalize = unwrap_vec_normalize(train_env)
        stats_path = os.path.join(run_dir, "vecnormalize.pkl")
        vec_normalize.save(stats_path)
        print("Saved the VecNormalize statistics to {}".format(stats_path))
    best = os.path.join(run_dir, "best_model.zip")
    if os.path.isfile(best):
        print("Saved the best evaluated model to {} (evaluations: {})".format(
            best, os.path.join(run_dir, "evaluations.npz")))
    for env in envs_to_close:
        env.close()
    print("Watch it with: sbtf enjoy --algo {} --env {} -f {} --exp-id {}".format(algo, env_id, args.log_folder,
                                                                                  run_id))
    return exit_code


# --------------------------------------------------------------------------------------------------- enjoy

def _add_enjoy_arguments(parser: argparse.ArgumentParser) -> None:
    _add_common_arguments(parser)
    parser.add_argument("--exp-id", type=int, default=0, metavar="N",
                        help="run number (LOG_FOLDER/<algo>/<ENV_ID>_<N>); 0: the latest (default)")
    parser.add_argument("-n", "--n-timesteps", type=_positive_int, default=1000, metavar="STEPS",
                        help="maximum number of steps to play (default: 1000)")
    parser.add_argument("--episodes", type=int, default=None, metavar="N", help="stop after N episodes")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--deterministic", dest="deterministic", action="store_true", default=True,
                       help="deterministic actions (default)")
    group.add_argument("--stochastic", dest="deterministic", action="store_false",
                       help="sample actions from the policy")
    parser.add_argument("--gif", default=None, metavar="OUT.gif",
                        help="write the played frames as an animated GIF (the env is made with render_mode="
                             "'rgb_array')")
    parser.add_argument("--render", action="store_true", help="show the env in a window (render_mode='human')")
    parser.add_argument("--load-best", action="store_true", help="play best_model.zip instead of the final model")
    parser.add_argument("--model", default=None, metavar="PATH",
                        help="model file to play (instead of looking it up in LOG_FOLDER); vecnormalize.pkl and "
                             "config.yml next to it are used")


def _write_gif(frames: List[Any], path: str, fps: float) -> None:
    from PIL import Image  # pylint: disable=import-outside-toplevel

    # GIF frame durations are in 1/100 s (and viewers slow down anything shorter than 2/100 s)
    duration = 10 * max(int(round(100.0 / fps)), 2)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    frames[0].save(path, format="GIF", save_all=True, append_images=frames[1:], duration=duration, loop=0)


def make_play_env(env_id: str, stats_dir: str, settings: EnvSettings, seed: Optional[int],
                  render_mode: Optional[str] = None) -> Any:
    """
    The env ``enjoy`` plays in: one monitored env as at training time, with the run's VecNormalize statistics
    (``stats_dir/vecnormalize.pkl``, frozen: ``training=False``, ``norm_reward=False``) and frame stacking.

    :param env_id: (str) a registered env id
    :param stats_dir: (str) the run folder (or the folder of the model file)
    :param settings: (EnvSettings) from the run's config.yml
    :param seed: (int)
    :param render_mode: (str) gymnasium render mode ('rgb_array' for a GIF, 'human' for a window)
    :return: (VecEnv)
    """
    env = make_env(env_id, 1, seed, settings, render_mode=render_mode)
    stats_path = os.path.join(stats_dir, "vecnormalize.pkl")
    if os.path.isfile(stats_path):
        from sbtf.common.vec_env import VecNormalize  # pylint: disable=import-outside-toplevel
        try:
            env = VecNormalize.load(stats_path, env)
        except ValueError as exc:
            env.close()
            raise CLIError("cannot use {}: {}".format(stats_path, exc)) from exc
        env.training = False
        env.norm_reward = False
        print("Normalizing observations with the statistics of {}".format(stats_path))
    elif settings.normalize:
        print("sbtf: warning: the run was trained with normalize but {} is missing: observations are not "
              "normalized".format(stats_path), file=sys.stderr)
    if settings.frame_stack > 0:
        from sbtf.common.vec_env import VecFrameStack  # pylint: disable=import-outside-toplevel
        env = VecFrameStack(env, settings.frame_stack)
    return env


def run_enjoy(args: argparse.Namespace) -> int:
    """The ``enjoy`` subcommand."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    import gymnasium  # pylint: disable=import-outside-toplevel

    algo = _algo_name(args.algo)
    _import_gym_packages(args.gym_packages)
    env_id = resolve_env(args.env, algo, sorted(load_default_hyperparams(algo)))
    name = _safe_name(env_id)
    if args.gif and args.render:
        raise CLIError("--gif and --render cannot be used together (an env renders in one mode)")
    if args.episodes is not None and args.episodes < 1:
        raise CLIError("--episodes must be at least 1, got {}".format(args.episodes))
    if args.model:
        model_path = args.model
        if not os.path.isfile(model_path) and os.path.isfile(model_path + ".zip"):
            model_path += ".zip"
        if not os.path.isfile(model_path):
            raise CLIError("--model: file {} not found".format(args.model))
        stats_dir = os.path.dirname(os.path.abspath(model_path))
        if os.path.basename(stats_dir) == "checkpoints" and not os.path.isfile(os.path.join(stats_dir, "config.yml")):
            stats_dir = os.path.dirname(stats_dir)  # a checkpoint of a run: the run's config and statistics
    else:
        stats_dir = find_run_dir(args.log_folder, algo, name, args.exp_id)
        model_path = os.path.join(stats_dir, "best_model.zip" if args.load_best else "{}.zip".format(name))
        if not os.path.isfile(model_path):
            what = "best model (was the run evaluated? see --eval-freq)" if args.load_best else "model"
            raise CLIError("no {} in {}: {} not found".format(what, stats_dir, os.path.basename(model_path)))

    config: Dict[str, Any] = {}
    config_path = os.path.join(stats_dir, "config.yml")
    if os.path.isfile(config_path):
        with open(config_path, "r", encoding="utf-8") as handle:
            config = yaml.safe_load(handle) or {}
    settings = env_settings(config, getattr(args, "allow_wrapper", ()), config_path)
    algo_class = load_algorithm(algo)

    render_mode = "rgb_array" if args.gif else ("human" if args.render else None)
    env = make_play_env(env_id, stats_dir, settings, args.seed, render_mode=render_mode)
    try:
        # predict-only: no env attached (ACER and recurrent policies cannot take an env with another number of
        # envs than at training time; playing needs only the observations)
        model = algo_class.load(model_path)
    except (ValueError, TypeError, KeyError, OSError) as exc:
        env.close()
        raise CLIError("cannot load {} (--algo {}): {}".format(model_path, algo, _exc_text(exc))) from exc
    print("Playing {} ({} actions) on {} for at most {} steps{}".format(
        model_path, "deterministic" if args.deterministic else "stochastic", env_id, args.n_timesteps,
        "" if args.episodes is None else " / {} episode(s)".format(args.episodes)))

    frames: List[Any] = []

    def grab() -> None:
        from PIL import Image  # pylint: disable=import-outside-toplevel
        image = env.get_images()[0]
        frames.append(Image.fromarray(np.asarray(image, dtype=np.uint8)).convert("P", palette=Image.ADAPTIVE))

    returns: List[float] = []
    lengths: List[int] = []
    current_return, current_length = 0.0, 0
    try:
        obs = env.reset()
        if args.gif:
            grab()
        state = None
        dones = np.zeros((1,), dtype=bool)
        for _ in range(args.n_timesteps):
            action, state = model.predict(obs, state=state, mask=dones, deterministic=args.deterministic)
            obs, rewards, dones, infos = env.step(action)
            current_return += float(np.asarray(rewards).reshape(-1)[0])
            current_length += 1
            if args.gif:
                grab()
            if bool(np.asarray(dones).reshape(-1)[0]):
                episode = (infos[0] or {}).get("episode") if infos else None
                ep_return = float(episode["r"]) if episode else current_return
                ep_length = int(episode["l"]) if episode else current_length
                returns.append(ep_return)
                lengths.append(ep_length)
                print("Episode {}: return {:.2f}, length {}".format(len(returns), ep_return, ep_length))
                current_return, current_length = 0.0, 0
                if args.episodes is not None and len(returns) >= args.episodes:
                    break
    except gymnasium.error.DependencyNotInstalled as exc:
        raise CLIError("cannot render {}: {}".format(env_id, exc), exit_code=1) from exc
    except ValueError as exc:
        if args.gif and "render" in str(exc):
            raise CLIError("cannot render {} as images: {}".format(env_id, exc), exit_code=1) from exc
        raise
    finally:
        env.close()

    if returns:
        print("Mean return over {} episode(s): {:.2f} +/- {:.2f} (mean length {:.1f})".format(
            len(returns), float(np.mean(returns)), float(np.std(returns)), float(np.mean(lengths))))
    else:
        print("No episode finished within {} steps (return so far: {:.2f})".format(args.n_timesteps,
                                                                                  current_return))
    if args.gif:
        metadata = env.get_attr("metadata")[0] or {}
        fps = float(metadata.get("render_fps") or metadata.get("video.frames_per_second") or 30)
        _write_gif(frames, args.gif, fps)
        print("Saved a GIF of {} frames to {}".format(len(frames), args.gif))
    return 0


# --------------------------------------------------------------------------------------------------- main

register_subcommand("train", run_train, _add_train_arguments,
                    help="train an agent with tuned hyperparameters",
                    description="Train an agent with the tuned hyperparameters shipped in sbtf/hyperparams/<algo>.yml "
                                "(overridable) and save it in LOG_FOLDER/<algo>/<ENV_ID>_<run_id>/.")
register_subcommand("enjoy", run_enjoy, _add_enjoy_arguments,
                    help="play a trained agent (returns, GIF)",
                    description="Load a trained agent (and its VecNormalize statistics) and play it: prints each "
                                "episode's return and their mean +/- std, optionally writes a GIF.")


def build_parser() -> argparse.ArgumentParser:
    """The ``sbtf`` argument parser, with every registered subcommand."""
    from sbtf import __version__  # pylint: disable=import-outside-toplevel

    parser = argparse.ArgumentParser(prog="sbtf", description="Stable Baselines on TensorFlow 2: train and play "
                                                              "RL agents (rl-baselines-zoo style).")
    parser.add_argument("--version", action="version", version="sbtf {}".format(__version__))
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, command in registered_subcommands().items():
        sub = subparsers.add_parser(name, help=command.help, description=command.description or command.help)
        if command.add_arguments is not None:
            command.add_arguments(sub)
        sub.set_defaults(_subcommand=command)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """
    Run the ``sbtf`` command.

    :param argv: ([str]) the arguments (default: ``sys.argv[1:]``)
    :return: (int) the exit code
    """
    parser = build_parser()
    try:
        args = parser.parse_args(None if argv is None else list(argv))
    except SystemExit as exc:  # --help, --version, or a usage error (already printed by argparse)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    command: Optional[Subcommand] = getattr(args, "_subcommand", None)
    if command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        code = command.run(args)
    except CLIError as exc:
        print("sbtf {}: error: {}".format(command.name, exc.message), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("sbtf {}: interrupted".format(command.name), file=sys.stderr)
        return 130
    return 0 if code is None else int(code)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
