"""Reading an rl-baselines-zoo ``config.yml`` safely, and the zoo's rules for the env it describes.

The zoo wrote ``config.yml`` with ``yaml.dump`` of an ``OrderedDict``, so the file starts with the tag
``!!python/object/apply:collections.OrderedDict``; the zoo read it back with ``yaml.UnsafeLoader``, which would run
whatever a ``!!python/...`` tag names. :func:`read_zoo_yaml` uses a ``yaml.SafeLoader`` subclass that knows exactly
that one tag (built as a plain ``dict``, no code runs) and refuses every other ``!!python/...`` tag with
:class:`~sbtf.zoo.errors.UnsafeConfigError`.

:func:`zoo_settings` then applies the zoo's rules (its ``utils.get_saved_hyperparams`` / ``create_test_env``) to
decide how the agent's env is built: ``config.yml`` decides ``normalize``; only when there is no config does the
presence of ``obs_rms.pkl`` decide; ``frame_stack``, ``env_wrapper`` and ``env_kwargs`` come from the config.
"""
from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import yaml

from sbtf.zoo.errors import UnsafeConfigError, ZooConfigError

__all__ = ["ORDERED_DICT_TAG", "ZooConfigLoader", "read_zoo_yaml", "ZooSettings", "zoo_settings",
           "parse_env_wrappers", "is_time_feature_wrapper", "plain_config", "VEC_NORMALIZE_KEYS",
           "MAX_CONFIG_BYTES"]

#: the one Python tag a zoo config.yml may use (what ``yaml.dump`` writes for an ``OrderedDict``)
ORDERED_DICT_TAG = "tag:yaml.org,2002:python/object/apply:collections.OrderedDict"
_PYTHON_TAG_PREFIX = "tag:yaml.org,2002:python/"
#: largest config.yml read (real ones are well under 4 kB)
MAX_CONFIG_BYTES = 1 << 20
_MAX_DEPTH = 32
_MAX_ITEMS = 100_000
#: VecNormalize keyword arguments a ``normalize`` entry may give
VEC_NORMALIZE_KEYS = ("norm_obs", "norm_reward", "clip_obs", "clip_reward", "gamma", "epsilon")


def _describe_node(node: yaml.Node) -> str:
    mark = node.start_mark
    return "line {}".format(mark.line + 1) if mark is not None else "a node"


class ZooConfigLoader(yaml.SafeLoader):  # pylint: disable=too-many-ancestors
    """
    ``yaml.SafeLoader`` plus a constructor for the zoo's ``!!python/object/apply:collections.OrderedDict`` tag (built
    as a plain dict). Every other ``!!python/...`` tag raises :class:`UnsafeConfigError`; nothing is imported or
    called.
    """


def _construct_ordered_dict(loader: ZooConfigLoader, node: yaml.Node) -> Dict[Any, Any]:
    """``OrderedDict([[key, value], ...])`` as written by ``yaml.dump``, built as a dict (insertion-ordered)."""
    if isinstance(node, yaml.SequenceNode):
        args = loader.construct_sequence(node, deep=True)
        dict_items: Dict[Any, Any] = {}
    elif isinstance(node, yaml.MappingNode):  # the long form: {args: [[...]], dictitems: {...}}
        spec = loader.construct_mapping(node, deep=True)
        unknown = sorted(str(key) for key in spec if key not in ("args", "dictitems"))
        if unknown:
            raise ZooConfigError("The OrderedDict at {} has unsupported entries {} (only args and dictitems)".format(
                _describe_node(node), unknown))
        args = spec.get("args") or []
        dict_items = spec.get("dictitems") or {}
        if not isinstance(args, list) or not isinstance(dict_items, dict):
            raise ZooConfigError("The OrderedDict at {} has malformed args / dictitems".format(_describe_node(node)))
    else:
        raise ZooConfigError("The OrderedDict at {} must be followed by its items, got a scalar".format(
            _describe_node(node)))
    if len(args) > 1:
        raise ZooConfigError("The OrderedDict at {} has {} arguments; expected one list of [key, value] "
                             "pairs".format(_describe_node(node), len(args)))
    result: Dict[Any, Any] = {}
    items = args[0] if args else []
    if isinstance(items, dict):
        result.update(items)
    elif isinstance(items, list):
        for pair in items:
            if not isinstance(pair, list) or len(pair) != 2:
                raise ZooConfigError("The OrderedDict at {} must hold [key, value] pairs, got {!r}".format(
                    _describe_node(node), pair)[:300])
            key, value = pair
            if isinstance(key, (list, dict)):
                raise ZooConfigError("The OrderedDict at {} has a key that is not a scalar: {!r}".format(
                    _describe_node(node), key)[:300])
            result[key] = value
    else:
        raise ZooConfigError("The OrderedDict at {} must hold a list of [key, value] pairs, got {}".format(
            _describe_node(node), type(items).__name__))
    result.update(dict_items)
    return result


def _refuse_python_tag(loader: ZooConfigLoader, tag_suffix: str, node: yaml.Node) -> Any:
    raise UnsafeConfigError(
        "The YAML tag !!python/{} at {} asks for a Python object to be built; a zoo config.yml only uses "
        "!!python/object/apply:collections.OrderedDict. Nothing was run. If you trust the file, remove the tag or "
        "replace the value by plain YAML.".format(tag_suffix, _describe_node(node)))


ZooConfigLoader.add_constructor(ORDERED_DICT_TAG, _construct_ordered_dict)
ZooConfigLoader.add_multi_constructor(_PYTHON_TAG_PREFIX, _refuse_python_tag)


def _check_plain(value: Any, where: str) -> None:
    """Refuse anything but plain YAML data, nested at most ``_MAX_DEPTH`` deep with at most ``_MAX_ITEMS`` items."""
    budget = [_MAX_ITEMS]

    def visit(item: Any, depth: int) -> None:
        budget[0] -= 1
        if budget[0] < 0:
            raise ZooConfigError("{} holds more than {} values; a zoo config is a short list of "
                                 "hyperparameters".format(where, _MAX_ITEMS))
        if depth > _MAX_DEPTH:
            raise ZooConfigError("{} is nested more than {} levels deep (or refers to itself)".format(
                where, _MAX_DEPTH))
        if isinstance(item, dict):
            for key, sub in item.items():
                visit(key, depth + 1)
                visit(sub, depth + 1)
        elif isinstance(item, list):
            for sub in item:
                visit(sub, depth + 1)
        elif item is not None and not isinstance(item, (str, bool, int, float)):
            # dates and binary values of plain YAML: not hyperparameters
            raise ZooConfigError("{} holds a {} value ({!r}); expected plain values".format(
                where, type(item).__name__, item)[:300])

    visit(value, 0)


def read_zoo_yaml(path: str) -> Dict[str, Any]:
    """
    Read a zoo ``config.yml`` (or any YAML written by the zoo) without running code.

    :param path: (str) the file
    :return: (dict) the hyperparameters, in file order (an empty file gives ``{}``)
    :raises UnsafeConfigError: a ``!!python/...`` tag other than the zoo's OrderedDict
    :raises ZooConfigError: not YAML, not a mapping with string keys, or not plain data
    """
    path = os.fspath(path)
    try:
        size = os.path.getsize(path)
        if size > MAX_CONFIG_BYTES:
            raise ZooConfigError("{} is {} bytes; a zoo config.yml is a few kB (limit {})".format(
                path, size, MAX_CONFIG_BYTES))
        with open(path, "r", encoding="utf-8") as handle:
            text = handle.read(MAX_CONFIG_BYTES + 1)
    except (OSError, UnicodeDecodeError) as exc:
        raise ZooConfigError("cannot read {}: {}".format(path, exc)) from exc
    try:
        data = yaml.load(text, Loader=ZooConfigLoader)  # noqa: S506 - a SafeLoader subclass
    except UnsafeConfigError as exc:
        raise UnsafeConfigError("{}: {}".format(path, exc)) from None
    except ZooConfigError as exc:
        raise ZooConfigError("{}: {}".format(path, exc)) from None
    except (yaml.YAMLError, RecursionError) as exc:
        detail = " ".join(str(exc).split())
        raise ZooConfigError("{} is not a valid YAML file: {}".format(path, detail)[:500]) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ZooConfigError("{} must hold a mapping of hyperparameters, got a {}".format(path, type(data).__name__))
    bad_keys = [key for key in data if not isinstance(key, str)]
    if bad_keys:
        raise ZooConfigError("{}: hyperparameter names must be strings, got {!r}".format(path, bad_keys[:5]))
    _check_plain(data, path)
    return data


# --------------------------------------------------------------------------------------------------- settings

def _literal(text: str, what: str, source: str) -> Any:
    """A Python literal written as a string (``"{'norm_obs': True}"``, ``"dict(norm_obs=True)"``), never run."""
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ZooConfigError("{} in {}: {!r} is not a Python literal".format(what, source, text)) from exc
    if (isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name) and tree.func.id == "dict"
            and not tree.args and all(kw.arg for kw in tree.keywords)):
        try:
            return {kw.arg: ast.literal_eval(kw.value) for kw in tree.keywords}
        except ValueError as exc:
            raise ZooConfigError("{} in {}: {!r} may only hold literal values".format(what, source, text)) from exc
    try:
        return ast.literal_eval(tree)
    except ValueError as exc:
        raise ZooConfigError("{} in {}: {!r} is not a literal (sbtf does not evaluate code from a config)".format(
            what, source, text)) from exc


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
    wrappers: List[Tuple[str, Dict[str, Any]]] = []
    for item in items:
        if isinstance(item, dict) and len(item) == 1:
            path, kwargs = next(iter(item.items()))
            kwargs = {} if kwargs is None else kwargs
        elif isinstance(item, str):
            path, kwargs = item, {}
        else:
            raise ZooConfigError("env_wrapper in {}: expected 'module.Class', {{'module.Class': {{kwargs}}}} or a "
                                 "list of those, got {!r}".format(source, item)[:300])
        if not isinstance(path, str) or not path.strip():
            raise ZooConfigError("env_wrapper in {}: {!r} is not a 'module.Class' path".format(source, path))
        if not isinstance(kwargs, dict) or not all(isinstance(key, str) for key in kwargs):
            raise ZooConfigError("env_wrapper in {}: the arguments of {} must be a mapping of names to values, got "
                                 "{!r}".format(source, path, kwargs)[:300])
        wrappers.append((path.strip(), dict(kwargs)))
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
        unknown = sorted(str(key) for key in value if key not in VEC_NORMALIZE_KEYS)
        if unknown:
            raise ZooConfigError("normalize in {}: unknown VecNormalize argument(s) {}; valid: {}".format(
                source, ", ".join(unknown), ", ".join(VEC_NORMALIZE_KEYS)))
        return True, dict(value)
    raise ZooConfigError("normalize in {} must be true, false or a dict of VecNormalize arguments, got {!r}".format(
        source, value)[:300])


def _frame_stack_setting(value: Any, source: str) -> int:
    if value is None or value is False:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ZooConfigError("frame_stack in {} must be a non-negative integer, got {!r}".format(source, value))
    return value


def _env_kwargs_setting(value: Any, source: str) -> Dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, str):
        value = _literal(value, "env_kwargs", source)
    if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
        raise ZooConfigError("env_kwargs in {} must be a mapping of argument names to values, got {!r}".format(
            source, value)[:300])
    return dict(value)


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
    settings.frame_stack = _frame_stack_setting(config.get("frame_stack", 0), source)
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
