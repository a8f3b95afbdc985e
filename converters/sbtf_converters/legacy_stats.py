"""Read stable-baselines 2.x normalisation statistics (``vecnormalize.pkl``, ``obs_rms.pkl`` / ``ret_rms.pkl``).

Split from :mod:`sbtf_converters.legacy`; the pickles are read by the same safe interpreter (nothing in a file runs)
and every statistic is checked as sbtf's ``VecNormalize.from_data`` checks its own.
"""
from __future__ import annotations

import os
from typing import Any, Tuple, Union

import numpy as np

from sbtf.common.file_errors import ModelDataError, ModelFileError
from sbtf.common.running_mean_std import RunningMeanStd
from sbtf.common.vec_env.vec_normalize import VecNormalize, running_mean_std_from_data
from sbtf_converters.legacy_read import _read_limited, _unpickle
from sbtf_converters.sb2_pickle import (RefusedGlobalError, describe, find_unknown_globals, pickle_globals,
                                        rms_from_state)

__all__ = ["read_running_mean_std", "read_vec_normalize", "read_sb2_statistics", "is_sb2_pickle",
           "write_vecnormalize"]


def _read_bytes(path: Union[str, os.PathLike, bytes]) -> Tuple[bytes, str]:
    if isinstance(path, (bytes, bytearray)):
        return _read_limited(path, "statistics file"), "<bytes>"
    return _read_limited(path, "statistics file"), os.fspath(path)


def is_sb2_pickle(path_or_bytes: Union[str, os.PathLike, bytes]) -> bool:
    """True when the file is a pickle that refers to ``stable_baselines`` classes (read statically, not run)."""
    try:
        payload, _ = _read_bytes(path_or_bytes)
    except (OSError, ModelFileError):
        return False
    if payload[:1] != b"\x80" and payload[:1] not in (b"(", b"c", b"}", b"]"):
        return False
    try:
        found = pickle_globals(payload)
    except ValueError:
        return b"stable_baselines" in payload
    return any(module.split(".")[0] == "stable_baselines" for module, _ in found)


def _check_refs(value: Any, where: str) -> None:
    unknown = find_unknown_globals(value, kinds=("unknown", "policy", "function", "activation", "algorithm"))
    if unknown:
        raise RefusedGlobalError(f"{where} refers to {unknown[0].sb2_path!r}, which is not allowed in a statistics "
                                 "file; refusing to load it.")


def _rms_from_value(value: Any, name: str) -> Any:
    _check_refs(value, name)
    if isinstance(value, RunningMeanStd):
        return running_mean_std_from_data(value, name)
    if isinstance(value, dict) and all(k in value for k in ("mean", "var", "count")):
        return running_mean_std_from_data(rms_from_state(value, name), name)
    raise ModelDataError(f"{name} does not hold RunningMeanStd statistics (found {describe(value)}).")


_VECNORM_SETTINGS = ("clip_obs", "clip_reward", "gamma", "epsilon", "training", "norm_obs", "norm_reward")


def _vec_normalize_from_value(value: Any, name: str) -> dict:
    if not isinstance(value, dict) or not all(k in value for k in ("obs_rms", "ret_rms")):
        raise ModelDataError(f"{name} is not a stable-baselines VecNormalize file (found {describe(value)}).")
    out = {key: _rms_from_value(value[key], f"{name}[{key!r}]") for key in ("obs_rms", "ret_rms")}
    for key in _VECNORM_SETTINGS:
        if key in value:
            item = value[key]
            item = item.item() if isinstance(item, np.generic) else item
            flag = key in ("training", "norm_obs", "norm_reward")
            if (flag and not isinstance(item, (bool, int))) or (not flag and (
                    isinstance(item, bool) or not isinstance(item, (int, float)) or item != item
                    or (isinstance(item, int) and abs(item) > 2 ** 64))):
                raise ModelDataError(f"{name}: the VecNormalize setting {key!r} is {describe(item)}, not a "
                                     f"{'bool' if flag else 'number'}; the file is corrupted.")
            out[key] = bool(item) if flag else float(item)
    VecNormalize.from_data(out, name)  # the settings checked against their meaning (clips, epsilon > 0, gamma)
    return out


def read_running_mean_std(path: Union[str, os.PathLike, bytes]) -> Any:
    """
    Read an SB2 ``obs_rms.pkl`` / ``ret_rms.pkl`` (a pickled ``stable_baselines.common.running_mean_std
    .RunningMeanStd``) -- or a plain ``{mean, var, count}`` dict pickle -- into an sbtf ``RunningMeanStd``.
    Nothing in the file is executed.
    """
    payload, name = _read_bytes(path)
    return _rms_from_value(_unpickle(payload, False, f"statistics file {name}"), name)


def read_vec_normalize(path: Union[str, os.PathLike, bytes]) -> dict:
    """
    Read a VecNormalize pickle written by SB2 >= 2.9 (``VecNormalize.save``: the whole wrapper minus its venv)
    into a dict ``{obs_rms, ret_rms, clip_obs, clip_reward, gamma, epsilon, training, norm_obs, norm_reward}``
    (settings that the file lacks are left out). Nothing in the file is executed.
    """
    payload, name = _read_bytes(path)
    return _vec_normalize_from_value(_unpickle(payload, False, f"VecNormalize file {name}"), name)


def read_sb2_statistics(path: Union[str, os.PathLike, bytes]) -> Any:
    """
    Either kind of SB2 normalisation file: a VecNormalize pickle -> the dict of :func:`read_vec_normalize`;
    a RunningMeanStd pickle -> an sbtf ``RunningMeanStd``.
    """
    payload, name = _read_bytes(path)
    value = _unpickle(payload, False, f"statistics file {name}")
    if isinstance(value, dict) and "obs_rms" in value:
        return _vec_normalize_from_value(value, name)
    return _rms_from_value(value, name)


def write_vecnormalize(stats: dict, path: str) -> None:
    """Write statistics read by :func:`read_vec_normalize` as an sbtf VecNormalize file at ``path``."""
    VecNormalize.from_data(stats).save(path)


