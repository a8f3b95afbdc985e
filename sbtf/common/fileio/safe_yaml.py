"""The one YAML reader of sbtf: run folders' ``config.yml`` / ``zoo.yml``, zoo folders, hyperparameter files.

YAML files travel with agents, so they are read as data with bounded cost:

* a ``yaml.SafeLoader`` that never builds a Python object: a ``!!python/...`` tag raises
  :class:`~sbtf.common.file_errors.UnsafeFileError` (nothing is imported or called). The one exception is the tag
  rl-baselines-zoo's ``config.yml`` starts with, ``!!python/object/apply:collections.OrderedDict``, built as a plain
  (insertion-ordered) ``dict``;
* **aliases** are counted while the document is composed: the value the document stands for once every alias is
  expanded may hold at most ``NODE_SLACK + NODES_PER_BYTE x (file bytes)`` nodes (and ``max_items`` of
  :class:`~sbtf.common.file_errors.LoadLimits`), so a 504-byte "billion laughs" is refused before anything walks it;
  an alias to the node that holds it (a value that contains itself) is refused;
* **nesting** is bounded by ``max_depth`` while composing (a 20,000-level nest is a
  :class:`~sbtf.common.file_errors.FileLimitError`, never a ``RecursionError``);
* **size**: at most ``max_bytes`` (default :data:`MAX_YAML_BYTES`) are read, from a regular file only;
* non-string mapping keys (whose hashes can be chosen to collide) are bounded per mapping (:data:`MAX_NONSTRING_KEYS`);
* every failure is a :class:`~sbtf.common.file_errors.ModelFileError` naming the file: not UTF-8, not YAML, an
  unknown tag, a top-level value of the wrong kind (:class:`~sbtf.common.file_errors.CorruptedFileError`).
"""
from __future__ import annotations

import os
import stat
from typing import Any, Dict, List, Optional, Union

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import Resolver

try:
    from yaml._yaml import CParser as _CParser
except ImportError:  # PyYAML without libyaml: the pure-Python parser (slower, same limits)
    _CParser = None

from sbtf.common.file_errors import (CorruptedFileError, FileLimitError, ModelFileError, UnsafeFileError,
                                     describe_value, get_load_limits)

__all__ = ["SafeYamlLoader", "load_yaml", "read_yaml", "MAX_YAML_BYTES", "NODE_SLACK", "NODES_PER_BYTE",
           "ORDERED_DICT_TAG"]

#: largest YAML file read (a config.yml is a few kB; the shipped hyperparameter files a few kB too)
MAX_YAML_BYTES = 256 << 10
#: nodes any document may expand to, whatever its size ...
NODE_SLACK = 10_000
#: ... plus this many per byte of the file (without aliases a document has fewer nodes than bytes)
NODES_PER_BYTE = 1
#: the one Python tag read: what ``yaml.dump`` writes for an ``OrderedDict`` (rl-baselines-zoo's config.yml)
ORDERED_DICT_TAG = "tag:yaml.org,2002:python/object/apply:collections.OrderedDict"
_PYTHON_TAG_PREFIX = "tag:yaml.org,2002:python/"
_STR_TAG = "tag:yaml.org,2002:str"
#: most non-string keys in one mapping (settings files have none; each costs a hash that can be made to collide)
MAX_NONSTRING_KEYS = 256
_PLAIN_TYPES = (str, bool, int, float)


def _line(node: Optional[Node]) -> str:
    mark = getattr(node, "start_mark", None)
    return "line {}".format(mark.line + 1) if mark is not None else "a node"


class _BoundedComposer(Composer):
    """The composer of :class:`SafeYamlLoader`: counts nodes with aliases expanded, nesting and non-string keys."""

    def _init_budgets(self, max_nodes: int, max_depth: int, max_nonstring_keys: int) -> None:
        self.max_nodes = int(max_nodes)
        self.max_depth = int(max_depth)
        self.max_nonstring_keys = int(max_nonstring_keys)
        self._depth = 0
        # id(node) -> (expanded weight, node): the node is kept so that its id stays unique during the load
        self._weights: Dict[int, Any] = {}

    def compose_node(self, parent: Optional[Node], index: Any) -> Node:
        if self._depth >= self.max_depth:
            raise FileLimitError("the YAML is nested more than {} levels deep (at {})".format(
                self.max_depth, _line(self.peek_event())))
        self._depth += 1
        try:
            node = Composer.compose_node(self, parent, index)
        finally:
            self._depth -= 1
        if id(node) not in self._weights:  # an alias to a node still being composed: it contains itself
            raise FileLimitError("the YAML alias at {} refers to the value that contains it (a value without "
                                 "end)".format(_line(node)))
        return node

    def _measure(self, node: Node, children: List[Node]) -> Node:
        weight = 1
        for child in children:
            weight += self._weights[id(child)][0]
        if weight > self.max_nodes:
            raise FileLimitError("the YAML expands to more than {:,} values through its aliases (at {}); a "
                                 "settings file is a short list of values".format(self.max_nodes, _line(node)))
        self._weights[id(node)] = (weight, node)
        return node

    def compose_scalar_node(self, anchor: Optional[str]) -> Node:
        return self._measure(Composer.compose_scalar_node(self, anchor), [])

    def compose_sequence_node(self, anchor: Optional[str]) -> Node:
        node = Composer.compose_sequence_node(self, anchor)
        return self._measure(node, node.value)

    def compose_mapping_node(self, anchor: Optional[str]) -> Node:
        node = Composer.compose_mapping_node(self, anchor)
        nonstring = sum(1 for key, _ in node.value if not (isinstance(key, ScalarNode) and key.tag == _STR_TAG))
        if nonstring > self.max_nonstring_keys:
            raise FileLimitError("a YAML mapping at {} has {:,} keys that are not strings (limit {:,})".format(
                _line(node), nonstring, self.max_nonstring_keys))
        return self._measure(node, [item for pair in node.value for item in pair])

    def fetch_flow_collection_start(self, token_class: Any) -> None:
        """(pure-Python scanner) bound ``[`` / ``{`` nesting while scanning: PyYAML's scanner checks every open
        flow level for each token, so a deep flow nest would cost quadratic time before the composer sees it."""
        if self.flow_level >= self.max_depth:  # type: ignore[attr-defined]
            raise FileLimitError("the YAML is nested more than {} levels deep (at line {})".format(
                self.max_depth, self.line + 1))  # type: ignore[attr-defined]
        super().fetch_flow_collection_start(token_class)  # type: ignore[misc]


class _PyLoader(_BoundedComposer, yaml.SafeLoader):  # pylint: disable=too-many-ancestors
    """The pure-Python loader (used when PyYAML has no libyaml)."""

    def __init__(self, stream: str, max_nodes: int = NODE_SLACK, max_depth: int = 64,
                 max_nonstring_keys: int = 4096) -> None:
        yaml.SafeLoader.__init__(self, stream)
        self._init_budgets(max_nodes, max_depth, max_nonstring_keys)


_LOADERS: List[type] = [_PyLoader]
if _CParser is not None:
    class _CLoader(_BoundedComposer, _CParser, SafeConstructor, Resolver):  # type: ignore[misc, valid-type]
        """libyaml's parser (C: fast, iterative) feeding the bounded Python composer."""

        def __init__(self, stream: str, max_nodes: int = NODE_SLACK, max_depth: int = 64,
                     max_nonstring_keys: int = 4096) -> None:
            _CParser.__init__(self, stream)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            self._init_budgets(max_nodes, max_depth, max_nonstring_keys)

    _LOADERS.insert(0, _CLoader)

#: the loader :func:`load_yaml` uses: libyaml's parser when PyYAML has it, with the bounded composer above and a
#: ``yaml.SafeLoader``'s constructors (``SafeYamlLoader(text, max_nodes, max_depth, max_nonstring_keys)``)
SafeYamlLoader: type = _LOADERS[0]


def _construct_ordered_dict(loader: Any, node: Node) -> Dict[Any, Any]:
    """``OrderedDict([[key, value], ...])`` as ``yaml.dump`` writes it, built as a (insertion-ordered) dict."""
    where = _line(node)
    if isinstance(node, SequenceNode):
        args = loader.construct_sequence(node, deep=True)
        dict_items: Any = {}
    elif isinstance(node, MappingNode):  # the long form: {args: [[...]], dictitems: {...}}
        spec = loader.construct_mapping(node, deep=True)
        unknown = sorted(str(key) for key in spec if key not in ("args", "dictitems"))
        if unknown:
            raise CorruptedFileError("the OrderedDict at {} has unsupported entries {} (only args and "
                                     "dictitems)".format(where, describe_value(unknown)))
        args = spec.get("args") or []
        dict_items = spec.get("dictitems") or {}
        if not isinstance(args, list) or not isinstance(dict_items, dict):
            raise CorruptedFileError("the OrderedDict at {} has malformed args / dictitems".format(where))
    else:
        raise CorruptedFileError("the OrderedDict at {} must be followed by its items, got a scalar".format(where))
    if len(args) > 1:
        raise CorruptedFileError("the OrderedDict at {} has {} arguments; expected one list of [key, value] "
                                 "pairs".format(where, len(args)))
    result: Dict[Any, Any] = {}
    items = args[0] if args else []
    if isinstance(items, dict):
        result.update(items)
    elif isinstance(items, list):
        for pair in items:
            if not isinstance(pair, list) or len(pair) != 2:
                raise CorruptedFileError("the OrderedDict at {} must hold [key, value] pairs, got {}".format(
                    where, describe_value(pair)))
            key, value = pair
            if isinstance(key, (list, dict)):
                raise CorruptedFileError("the OrderedDict at {} has a key that is not a scalar: {}".format(
                    where, describe_value(key)))
            result[key] = value
    else:
        raise CorruptedFileError("the OrderedDict at {} must hold a list of [key, value] pairs, got {}".format(
            where, type(items).__name__))
    result.update(dict_items)
    return result


def _refuse_python_tag(loader: Any, tag_suffix: str, node: Node) -> Any:
    raise UnsafeFileError(
        "The YAML tag !!python/{} at {} asks for a Python object to be built; sbtf reads YAML as data (the only "
        "Python tag it reads is rl-baselines-zoo's !!python/object/apply:collections.OrderedDict). Nothing was run. "
        "If you trust the file, remove the tag or replace the value by plain YAML.".format(
            describe_value(tag_suffix, 80).strip("'"), _line(node)))


for _loader in _LOADERS:
    _loader.add_constructor(ORDERED_DICT_TAG, _construct_ordered_dict)
    _loader.add_multi_constructor(_PYTHON_TAG_PREFIX, _refuse_python_tag)


def _check_plain(value: Any, source: str, max_depth: int) -> None:
    """Refuse values plain YAML data cannot hold in a settings file (dates, binary, sets)."""
    stack = [(value, 0)]
    seen: set = set()
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if id(item) in seen:  # a shared value (an alias): checked once
                continue
            seen.add(id(item))
            if depth > max_depth:
                raise FileLimitError("{} is nested more than {} levels deep".format(source, max_depth))
            if isinstance(item, dict):
                stack.extend((key, depth + 1) for key in item)
                stack.extend((sub, depth + 1) for sub in item.values())
            else:
                stack.extend((sub, depth + 1) for sub in item)
        elif item is not None and not isinstance(item, _PLAIN_TYPES):
            raise CorruptedFileError("{} holds a {} value ({}); expected plain values (strings, numbers, booleans, "
                                     "lists, mappings)".format(source, type(item).__name__, describe_value(item)))


def _with_source(exc: ModelFileError, source: str) -> ModelFileError:
    """The same error type, its message prefixed with the file."""
    return type(exc)("{}: {}".format(source, exc))


def load_yaml(text: Union[str, bytes], source: str = "the YAML document", *, mapping: bool = True,
              plain: bool = True, max_bytes: int = MAX_YAML_BYTES) -> Any:
    """
    Parse a YAML document as data, with the budgets of this module.

    :param text: (str or bytes) the document (bytes must be UTF-8)
    :param source: (str) where it comes from, for messages (a path)
    :param mapping: (bool) the top-level value must be a mapping with string keys (an empty document gives ``{}``)
    :param plain: (bool) refuse dates, binary and sets (only strings, numbers, booleans, null, lists, mappings)
    :param max_bytes: (int) largest document
    :return: the value
    :raises ModelFileError: CorruptedFileError (not UTF-8, not YAML, wrong kind of value), UnsafeFileError
        (a ``!!python/...`` tag), FileLimitError (size, aliases, depth, non-string keys)
    """
    limits = get_load_limits()
    if len(text) > max_bytes:
        raise FileLimitError("{} is {:,} bytes; a settings file is a few kB (limit {:,})".format(
            source, len(text), max_bytes))
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise CorruptedFileError("{} is not UTF-8 text (byte {} is {!r}); a YAML file is text".format(
                source, exc.start, text[exc.start:exc.start + 1])) from None
    max_nodes = min(limits.max_items, NODE_SLACK + NODES_PER_BYTE * len(text))
    loader = None
    try:
        # the pure-Python reader checks the characters when it is made: inside the try
        loader = SafeYamlLoader(text, max_nodes=max_nodes, max_depth=limits.max_depth,
                                max_nonstring_keys=min(limits.max_nonstring_keys, MAX_NONSTRING_KEYS))
        data = loader.get_single_data()
    except ModelFileError as exc:
        raise _with_source(exc, source) from None
    except RecursionError:
        raise FileLimitError("{} is nested too deeply to read".format(source)) from None
    except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:
        # ValueError: e.g. an integer of more digits than Python converts; TypeError: an unhashable key
        detail = " ".join(str(exc).split())
        if "maximum nesting depth" in detail:  # newer libyaml bounds flow nesting itself, before our composer
            raise FileLimitError("{}: the YAML is nested more than {} levels deep".format(
                source, limits.max_depth)) from None
        raise CorruptedFileError("{} is not a valid YAML file: {}".format(source, detail[:300])) from None
    finally:
        if loader is not None:
            loader.dispose()
    if mapping:
        if data is None:
            return {}
        if not isinstance(data, dict):
            raise CorruptedFileError("{} must hold a mapping (name: value, ...), got a {}".format(
                source, type(data).__name__))
        bad_keys = [key for key in data if not isinstance(key, str)]
        if bad_keys:
            raise CorruptedFileError("{}: names must be strings, got {}".format(source, describe_value(bad_keys)))
    if plain:
        _check_plain(data, source, limits.max_depth)
    return data


def read_yaml(path: Union[str, "os.PathLike[str]"], *, mapping: bool = True, plain: bool = True,
              max_bytes: int = MAX_YAML_BYTES) -> Any:
    """
    Read a YAML file as data (see :func:`load_yaml`): a regular file of at most ``max_bytes`` bytes.

    :param path: (str) the file
    :param mapping: (bool) the top-level value must be a mapping with string keys (an empty file gives ``{}``)
    :param plain: (bool) only strings, numbers, booleans, null, lists and mappings
    :param max_bytes: (int) largest file read
    :return: the value
    :raises ModelFileError: see :func:`load_yaml`; CorruptedFileError also when the file cannot be read
    """
    path = os.fspath(path)
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # before opening: a FIFO would block open()
            raise CorruptedFileError("{} is not a regular file".format(path))
        with open(path, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise CorruptedFileError("{} is not a regular file".format(path))
            if info.st_size > max_bytes:
                raise FileLimitError("{} is {:,} bytes; a settings file is a few kB (limit {:,})".format(
                    path, info.st_size, max_bytes))
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise CorruptedFileError("cannot read {}: {}".format(path, exc.strerror or exc)) from None
    return load_yaml(data, path, mapping=mapping, plain=plain, max_bytes=max_bytes)
