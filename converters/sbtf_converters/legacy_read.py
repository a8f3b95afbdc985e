"""Read stable-baselines 2.x model files (``.pkl`` and ``.zip``) into ``(data, parameters)`` without running code.

Split from :mod:`sbtf_converters.legacy` (which maps what is read onto sbtf models): zip members and npz arrays are
size-checked before they are decompressed, pickles go through :mod:`sbtf.common.fileio.safe_pickle` with the
allow-list of :mod:`sbtf_converters.sb2_pickle`, and the spaces a pickle describes are bounded by the arrays the file
carries.
"""
from __future__ import annotations

import base64
import binascii
import io
import os
from collections import OrderedDict
from typing import Any, Optional, Tuple, Union

import numpy as np

from sbtf.common.fileio import safe_pickle as sp
from sbtf.common.file_errors import (CorruptedFileError, FileLimitError, ModelDataError, ModelFileError, describe_value,
                                     get_load_limits)
from sbtf.common.fileio.load_budget import exception_text, space_budget
from sbtf.common.fileio.safe_pickle import check_tree
from sbtf.common.fileio.safe_zip import open_zip, read_file_limited, read_member, read_npz
from sbtf.common.save_util import inspect_model_bytes
from sbtf_converters.sb2_pickle import RefusedGlobalError, find_unknown_globals, materialize, restricted_loads

__all__ = ["Source", "read_sb2_file"]

Source = Union[bytes, bytearray, str, os.PathLike, io.IOBase]


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


