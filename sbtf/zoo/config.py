"""Reading an rl-baselines-zoo ``config.yml`` safely, the zoo's rules for the env it describes, and the checks of
the values a run folder gives (shared by :mod:`sbtf.zoo` and the ``sbtf`` command).

The zoo wrote ``config.yml`` with ``yaml.dump`` of an ``OrderedDict``, so the file starts with the tag
``!!python/object/apply:collections.OrderedDict``; the zoo read it back with ``yaml.UnsafeLoader``, which would run
whatever a ``!!python/...`` tag names. :func:`read_zoo_yaml` reads it with sbtf's one YAML reader
(:mod:`sbtf.common.fileio.safe_yaml`), which builds exactly that one tag (as a plain ``dict``, no code runs), refuses
every other ``!!python/...`` tag with :class:`~sbtf.zoo.errors.UnsafeConfigError`, and bounds aliases, nesting and size.

:func:`zoo_settings` then applies the zoo's rules (its ``utils.get_saved_hyperparams`` / ``create_test_env``) to
decide how the agent's env is built: ``config.yml`` decides ``normalize``; only when there is no config does the
presence of ``obs_rms.pkl`` decide; ``frame_stack``, ``env_wrapper`` and ``env_kwargs`` come from the config.

A run folder is data, so its values are checked against their meaning before anything is built from them
(:func:`check_frame_stack`, :func:`check_seed`, :func:`check_n_envs`, :func:`check_normalize_kwargs`,
:func:`check_wrapper_kwargs`, :func:`check_env_kwargs`): sizes a real agent never reaches are refused (a frame stack
of a billion frames would allocate gigabytes), and no wrapper or env argument may name a file (a wrapper from a run
folder writing ``<any path>.monitor.csv`` would write outside it).
"""
from __future__ import annotations

import ast
import math
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from sbtf.common.file_errors import FileLimitError, ModelFileError, UnsafeFileError, describe_value
from sbtf.common.fileio.safe_yaml import MAX_YAML_BYTES, ORDERED_DICT_TAG, SafeYamlLoader, read_yaml
from sbtf.zoo.errors import ConfigLimitError, UnsafeConfigError, ZooConfigError

__all__ = ["ORDERED_DICT_TAG", "ZooConfigLoader", "read_zoo_yaml", "ZooSettings", "zoo_settings", "parse_env_wrappers",
           "is_time_feature_wrapper", "plain_config", "VEC_NORMALIZE_KEYS", "MAX_CONFIG_BYTES", "MAX_FRAME_STACK",
           "MAX_N_ENVS", "MAX_SEED", "MAX_WRAPPERS", "check_frame_stack", "check_wrapper_count", "check_seed",
           "check_n_envs", "check_normalize_kwargs", "check_wrapper_kwargs", "check_env_kwargs"]

#: the loader of :func:`read_zoo_yaml` (sbtf's one YAML loader; the name earlier versions gave it)
ZooConfigLoader = SafeYamlLoader
#: largest config.yml read (real ones are well under 4 kB)
MAX_CONFIG_BYTES = MAX_YAML_BYTES
#: VecNormalize keyword arguments a ``normalize`` entry may give
VEC_NORMALIZE_KEYS = ("norm_obs", "norm_reward", "clip_obs", "clip_reward", "gamma", "epsilon")
#: most frames a run folder may ask to stack (the zoo stacks 4; VecFrameStack allocates n_stack observations per env)
MAX_FRAME_STACK = 64
#: most envs a settings file may ask for (the zoo's largest is 64)
MAX_N_ENVS = 1024
#: most env wrappers a settings file may list (real ones list one or two)
MAX_WRAPPERS = 32
#: seeds are what numpy's generators take: 0 .. 2**32 - 1
MAX_SEED = 2 ** 32 - 1


def read_zoo_yaml(path: str) -> Dict[str, Any]:
    """
    Read a zoo ``config.yml`` (or any YAML written by the zoo) without running code
    (:func:`sbtf.common.fileio.safe_yaml.read_yaml`).

    :param path: (str) the file
    :return: (dict) the hyperparameters, in file order (an empty file gives ``{}``)
    :raises UnsafeConfigError: a ``!!python/...`` tag other than the zoo's OrderedDict
    :raises ConfigLimitError: too big, too deep, too many values through aliases
    :raises ZooConfigError: not UTF-8, not YAML, not a mapping with string keys, or not plain data
    """
    try:
        return read_yaml(path, mapping=True, plain=True, max_bytes=MAX_CONFIG_BYTES)
    except UnsafeFileError as exc:
        raise UnsafeConfigError(str(exc)) from None
    except FileLimitError as exc:
        raise ConfigLimitError(str(exc)) from None
    except ModelFileError as exc:
        raise ZooConfigError(str(exc)) from None


# --------------------------------------------------------------------------------------------------- values

def _integer(value: Any) -> Optional[int]:
    """``value`` as an int when it is an integer number (``4``, ``4.0``, ``3e8``), else None (bools are not)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        return int(value)
    return None


def check_frame_stack(value: Any, source: str) -> int:
    """
    ``frame_stack`` of a settings file: 0 (or null / false) for none, else an integer 1 .. :data:`MAX_FRAME_STACK`.

    :param value: the value read
    :param source: (str) where it was read, for messages
    :return: (int)
    :raises ZooConfigError: not an integer; ConfigLimitError: beyond MAX_FRAME_STACK
    """
    if value is None or value is False:
        return 0
    number = _integer(value)
    if number is None or number < 0:
        raise ZooConfigError("frame_stack in {} must be a non-negative integer, got {}".format(
            source, describe_value(value)))
    if number > MAX_FRAME_STACK:
        raise ConfigLimitError("frame_stack in {} is {}: sbtf stacks at most {} frames (VecFrameStack keeps that many "
                               "observations per env; the zoo stacks 4)".format(source, number, MAX_FRAME_STACK))
    return number


def check_seed(value: Any, source: str) -> int:
    """
    A seed: an integer 0 .. 2**32 - 1 (what numpy's generators take).

    :param value: the value
    :param source: (str) where it was given, for messages
    :return: (int)
    :raises ZooConfigError: not an integer in range
    """
    number = _integer(value) if not isinstance(value, float) else None
    if number is None or not 0 <= number <= MAX_SEED:
        raise ZooConfigError("seed in {} must be an integer from 0 to 2**32 - 1 = {}, got {}".format(
            source, MAX_SEED, describe_value(value)))
    return number


def check_n_envs(value: Any, source: str) -> int:
    """
    ``n_envs`` of a settings file: an integer 1 .. :data:`MAX_N_ENVS`.

    :return: (int)
    :raises ZooConfigError: not a positive integer; ConfigLimitError: beyond MAX_N_ENVS
    """
    number = _integer(value)
    if number is None or number < 1:
        raise ZooConfigError("n_envs in {} must be a positive integer, got {}".format(source, describe_value(value)))
    if number > MAX_N_ENVS:
        raise ConfigLimitError("n_envs in {} is {:,}: sbtf makes at most {} envs from a settings file".format(
            source, number, MAX_N_ENVS))
    return number


def check_normalize_kwargs(kwargs: Dict[str, Any], source: str) -> Dict[str, Any]:
    """
    The VecNormalize arguments of a ``normalize`` entry: known names, ``norm_obs`` / ``norm_reward`` booleans,
    ``clip_obs`` / ``clip_reward`` / ``epsilon`` finite numbers > 0, ``gamma`` a number in [0, 1].

    :return: (dict) a copy
    :raises ZooConfigError: an unknown name or a value of the wrong type or range
    """
    unknown = sorted(str(key) for key in kwargs if key not in VEC_NORMALIZE_KEYS)
    if unknown:
        raise ZooConfigError("normalize in {}: unknown VecNormalize argument(s) {}; valid: {}".format(
            source, describe_value(", ".join(unknown)), ", ".join(VEC_NORMALIZE_KEYS)))
    for key, value in kwargs.items():
        if key in ("norm_obs", "norm_reward"):
            valid = isinstance(value, bool)
            expected = "true or false"
        else:
            valid = (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
                     and (0 <= value <= 1 if key == "gamma" else value > 0))
            expected = "a number in [0, 1]" if key == "gamma" else "a finite number > 0"
        if not valid:
            raise ZooConfigError("normalize in {}: {} must be {}, got {}".format(
                source, key, expected, describe_value(value)))
    return dict(kwargs)


#: words in an argument name that make it a file or folder (``filename``, ``video_folder``, ``name_prefix``, ...)
_PATH_WORDS = ("file", "path", "dir", "folder", "prefix")
#: wrapper arguments that size memory or work per step, with the largest value accepted from a settings file
_SIZE_ARGUMENTS: Dict[str, int] = {
    "stack_size": MAX_FRAME_STACK, "n_frames": MAX_FRAME_STACK, "num_stack": MAX_FRAME_STACK,
    "n_stack": MAX_FRAME_STACK, "frame_stack": MAX_FRAME_STACK, "delay": 1000, "skip": 100, "frame_skip": 100,
    "num_repeats": 100, "repeat_action_duration": 100, "noop_max": 1000, "buffer_length": 100_000,
    "deque_size": 100_000, "width": 4096, "height": 4096, "screen_size": 4096, "bins": 10_000,
}
#: most values in a ``shape`` argument (ResizeObservation / ReshapeObservation)
_MAX_SHAPE_SIZE = 1 << 24


def _function_like(name: str) -> bool:
    """Arguments a wrapper calls (``func`` of TransformObservation, ``episode_trigger`` of RecordVideo, ``*_fn``; an
    ``*_fn`` may be a method name, as ActionMasker's ``action_mask_fn``)."""
    return name in ("func", "fn") or name.endswith(("_fn", "_func", "_trigger"))


def _path_like(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in _PATH_WORDS)


def _check_size(name: str, value: Any, limit: int, where: str) -> None:
    values = value if isinstance(value, (list, tuple)) else [value]
    if len(values) > 8:
        raise ConfigLimitError("{}: {} holds {} values; expected at most 8".format(where, name, len(values)))
    for item in values:
        number = _integer(item)
        if number is None or number < 0:
            raise ZooConfigError("{}: {} must be a non-negative integer (or a list of them), got {}".format(
                where, name, describe_value(value)))
        if number > limit:
            raise ConfigLimitError("{}: {} is {:,}, beyond the {:,} sbtf accepts from a settings file (it sizes "
                                   "memory or the work of each step)".format(where, name, number, limit))


def check_wrapper_kwargs(path: str, kwargs: Dict[str, Any], source: str) -> Dict[str, Any]:
    """
    The arguments of an ``env_wrapper`` named in a settings file: no argument may name a file or folder (a wrapper
    from a run folder must not write outside it: ``Monitor(filename=...)``, ``RecordVideo(video_folder=...)``), nor
    be a function (``func``, ``*_trigger``: a file holds data; an ``*_fn`` may be a method name), and arguments that
    size memory or per-step work (frame stacks, delays, frame skips, image sizes, ``shape``) are bounded.

    :param path: (str) the wrapper's ``module.Class`` path
    :param kwargs: (dict) its arguments
    :param source: (str) where they were read, for messages
    :return: (dict) a copy
    :raises ZooConfigError: a path argument or a value of the wrong type; ConfigLimitError: a size beyond the bound
    """
    where = "env_wrapper {} in {}".format(describe_value(path, 120).strip("'"), source)
    for name, value in kwargs.items():
        name = str(name)
        if _path_like(name):
            raise ZooConfigError("{}: the argument {} names a file or folder; a wrapper named in a settings file may "
                                 "not read or write files (sbtf writes a run's Monitor files into the run folder "
                                 "itself). Remove the argument, or wrap the env in Python.".format(
                                     where, describe_value(name, 60)))
        if _function_like(name) and value is not None and not (name.endswith("_fn") and isinstance(value, str)):
            raise ZooConfigError("{}: the argument {} takes a function, which a settings file cannot hold (it holds "
                                 "data; {} was given). Wrap the env in Python to pass one.".format(
                                     where, describe_value(name, 60), describe_value(value, 60)))
        if name in _SIZE_ARGUMENTS:
            _check_size(name, value, _SIZE_ARGUMENTS[name], where)
        elif name == "shape":
            _check_size(name, value, _MAX_SHAPE_SIZE, where)
            if math.prod(_integer(item) or 1 for item in (value if isinstance(value, (list, tuple)) else [value])) \
                    > _MAX_SHAPE_SIZE:
                raise ConfigLimitError("{}: shape {} has more than {:,} values".format(
                    where, describe_value(value), _MAX_SHAPE_SIZE))
    return dict(kwargs)


def check_wrapper_count(count: int, source: str) -> None:
    """
    At most :data:`MAX_WRAPPERS` ``env_wrapper`` entries (each wraps the env once more; thousands would overflow the
    stack of every attribute lookup through them).

    :raises ConfigLimitError: more
    """
    if count > MAX_WRAPPERS:
        raise ConfigLimitError("env_wrapper in {} lists {:,} wrappers; sbtf applies at most {} from a settings "
                               "file".format(source, count, MAX_WRAPPERS))


def check_env_kwargs(kwargs: Dict[str, Any], source: str) -> Dict[str, Any]:
    """
    ``env_kwargs`` of a settings file (keyword arguments of ``gymnasium.make``): string names, none naming a file or
    folder (an env reading or writing a path the file chooses).

    :return: (dict) a copy
    :raises ZooConfigError: a name that is not a string, or names a file
    """
    for name in kwargs:
        if not isinstance(name, str):
            raise ZooConfigError("env_kwargs in {}: argument names must be strings, got {}".format(
                source, describe_value(name)))
        if _path_like(name):
            raise ZooConfigError("env_kwargs in {}: the argument {} names a file or folder; env arguments from a "
                                 "settings file may not (make the env in Python to pass it)".format(
                                     source, describe_value(name, 60)))
    return dict(kwargs)


# --------------------------------------------------------------------------------------------------- settings

#: longest Python literal read from a string value (``normalize: "{'norm_obs': True}"``)
_MAX_LITERAL_CHARS = 10_000
_LITERAL_ERRORS = (SyntaxError, ValueError, TypeError, MemoryError, RecursionError)


def _literal(text: str, what: str, source: str) -> Any:
    """A Python literal written as a string (``"{'norm_obs': True}"``, ``"dict(norm_obs=True)"``), never run."""
    if len(text) > _MAX_LITERAL_CHARS:
        raise ConfigLimitError("{} in {} is a string of {:,} characters; a Python literal there is short (limit "
                               "{:,})".format(what, source, len(text), _MAX_LITERAL_CHARS))
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except _LITERAL_ERRORS as exc:
        raise ZooConfigError("{} in {}: {} is not a Python literal".format(what, source, describe_value(text))) \
            from exc
    try:
        if (isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name) and tree.func.id == "dict"
                and not tree.args and all(kw.arg for kw in tree.keywords)):
            try:
                return {kw.arg: ast.literal_eval(kw.value) for kw in tree.keywords}
            except _LITERAL_ERRORS as exc:
                raise ZooConfigError("{} in {}: {} may only hold literal values".format(
                    what, source, describe_value(text))) from exc
        return ast.literal_eval(tree)
    except _LITERAL_ERRORS as exc:
        raise ZooConfigError("{} in {}: {} is not a literal (sbtf does not evaluate code from a config)".format(
            what, source, describe_value(text))) from exc


def is_time_feature_wrapper(path: str) -> bool:
    """Whether a wrapper path names a ``TimeFeatureWrapper`` (the zoo's ``utils.wrappers.``, sb3-contrib's, sbtf's)."""
    return str(path).replace(":", ".").rsplit(".", 1)[-1] == "TimeFeatureWrapper"


def parse_env_wrappers(spec: Any, source: str) -> List[Tuple[str, Dict[str, Any]]]:
    """
    The zoo's ``env_wrapper`` entry as a list of ``(path, kwargs)``: a ``'module.Class'`` string, a
    ``{'module.Class': {kwargs}}`` dict, or a list of those (applied in order).

    :param spec: the ``env_wrapper`` value (None: no wrapper)
    :param source: (str) where it was read, for messages
    :return: (list of (str, dict))
    """
    if spec is None or spec == "" or spec == []:
        return []
    items = spec if isinstance(spec, list) else [spec]
    check_wrapper_count(len(items), source)
    wrappers: List[Tuple[str, Dict[str, Any]]] = []
    for item in items:
        if isinstance(item, dict) and len(item) == 1:
            path, kwargs = next(iter(item.items()))
            kwargs = {} if kwargs is None else kwargs
        elif isinstance(item, str):
            path, kwargs = item, {}
        else:
            raise ZooConfigError("env_wrapper in {}: expected 'module.Class', {{'module.Class': {{kwargs}}}} or a "
                                 "list of those, got {}".format(source, describe_value(item)))
        if not isinstance(path, str) or not path.strip():
            raise ZooConfigError("env_wrapper in {}: {} is not a 'module.Class' path".format(
                source, describe_value(path)))
        if not isinstance(kwargs, dict) or not all(isinstance(key, str) for key in kwargs):
            raise ZooConfigError("env_wrapper in {}: the arguments of {} must be a mapping of names to values, got "
                                 "{}".format(source, describe_value(path), describe_value(kwargs)))
        wrappers.append((path.strip(), check_wrapper_kwargs(path.strip(), kwargs, source)))
    return wrappers


@dataclass
class ZooSettings:
    """How the env of a zoo agent is built, decided by the zoo's rules from its ``config.yml`` and stats files."""

    #: whether observations are normalised with the folder's statistics
    normalize: bool = False
    #: the VecNormalize arguments of the config (training-time meaning; playing adds training=False,
    #: norm_reward=False as the zoo's enjoy did)
    normalize_kwargs: Dict[str, Any] = field(default_factory=dict)
    #: what decided ``normalize`` ('config.yml', 'obs_rms.pkl (no config.yml)', or '' when off)
    normalize_source: str = ""
    #: ``env_wrapper`` as ``(path, kwargs)`` pairs, in the order they are applied
    env_wrappers: List[Tuple[str, Dict[str, Any]]] = field(default_factory=list)
    #: number of frames stacked by VecFrameStack (0: none); Atari envs get 4 more, as in the zoo
    frame_stack: int = 0
    #: keyword arguments for ``gymnasium.make``
    env_kwargs: Dict[str, Any] = field(default_factory=dict)
    #: messages about decisions the user may want to know (e.g. a stale obs_rms.pkl that is ignored)
    notes: List[str] = field(default_factory=list)

    @property
    def time_feature(self) -> bool:
        """Whether one of the env wrappers is a TimeFeatureWrapper."""
        return any(is_time_feature_wrapper(path) for path, _ in self.env_wrappers)


def _normalize_setting(value: Any, source: str) -> Tuple[bool, Dict[str, Any]]:
    if isinstance(value, str):
        value = _literal(value, "normalize", source)
    if value is None or value is False:
        return False, {}
    if value is True:
        return True, {}
    if isinstance(value, dict):
        return True, check_normalize_kwargs(value, source)
    raise ZooConfigError("normalize in {} must be true, false or a dict of VecNormalize arguments, got {}".format(
        source, describe_value(value)))


def _env_kwargs_setting(value: Any, source: str) -> Dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, str):
        value = _literal(value, "env_kwargs", source)
    if not isinstance(value, dict):
        raise ZooConfigError("env_kwargs in {} must be a mapping of argument names to values, got {}".format(
            source, describe_value(value)))
    return check_env_kwargs(value, source)


def zoo_settings(config: Optional[Dict[str, Any]], stats_dir: Optional[str],
                 source: str = "config.yml") -> ZooSettings:
    """
    Apply the zoo's rules: ``config.yml`` decides ``normalize`` (a stale ``obs_rms.pkl`` next to a config without
    ``normalize`` is ignored, with a note); only without a config does the presence of ``obs_rms.pkl`` (or
    ``vecnormalize.pkl``) decide.

    :param config: (dict or None) the hyperparameters of ``config.yml``; None when the folder has no config.yml
    :param stats_dir: (str or None) the folder holding config.yml / obs_rms.pkl / vecnormalize.pkl
    :param source: (str) the config's path, for messages
    :return: (ZooSettings)
    """
    settings = ZooSettings()
    stats_files = [name for name in ("vecnormalize.pkl", "obs_rms.pkl")
                   if stats_dir is not None and os.path.isfile(os.path.join(stats_dir, name))]
    if config is None:
        if stats_files:
            settings.normalize = True
            settings.normalize_source = "{} (no config.yml)".format(stats_files[0])
        return settings

    settings.normalize, settings.normalize_kwargs = _normalize_setting(config.get("normalize", False), source)
    if settings.normalize:
        settings.normalize_source = "config.yml"
    elif stats_files:
        settings.notes.append("{} has no 'normalize' entry, so {} next to it is ignored (the zoo's rule: an agent "
                              "trained without normalisation would be ruined by stale statistics)".format(
                                  source, " and ".join(stats_files)))
    settings.frame_stack = check_frame_stack(config.get("frame_stack", 0), source)
    settings.env_wrappers = parse_env_wrappers(config.get("env_wrapper"), source)
    settings.env_kwargs = _env_kwargs_setting(config.get("env_kwargs"), source)
    return settings


def plain_config(config: Dict[str, Any], settings: ZooSettings,
                 wrapper_paths: Sequence[Tuple[str, Dict[str, Any]]]) -> Dict[str, Any]:
    """
    The config as plain YAML data for an sbtf run folder: ``normalize`` as the zoo applied it (dropped when stale,
    added when the stats decided it), ``env_wrapper`` with the given (sbtf) paths, ``env_kwargs`` / ``frame_stack``
    as applied.

    :param config: (dict) the zoo's hyperparameters
    :param settings: (ZooSettings) the decisions of :func:`zoo_settings`
    :param wrapper_paths: the env wrappers as they should be named in the new config
    :return: (dict)
    """
    result = dict(config)
    result.pop("normalize", None)
    if settings.normalize:
        result["normalize"] = dict(settings.normalize_kwargs) if settings.normalize_kwargs else True
    result.pop("env_wrapper", None)
    if wrapper_paths:
        entries = [path if not kwargs else {path: dict(kwargs)} for path, kwargs in wrapper_paths]
        result["env_wrapper"] = entries[0] if len(entries) == 1 else entries
    result.pop("frame_stack", None)
    if settings.frame_stack:
        result["frame_stack"] = settings.frame_stack
    result.pop("env_kwargs", None)
    if settings.env_kwargs:
        result["env_kwargs"] = dict(settings.env_kwargs)
    return result
