"""Writing a zoo agent as a self-contained sbtf run folder (what ``sbtf convert --folder`` does).

The run folder has the layout ``sbtf train`` writes and ``sbtf enjoy`` reads::

    LOG_FOLDER/ALGO/ENV_ID_N/ENV_ID.zip         the model, in sbtf's own format
    LOG_FOLDER/ALGO/ENV_ID_N/config.yml         plain YAML: the zoo's hyperparameters, with normalize as applied,
                                                env_wrapper naming sbtf's TimeFeatureWrapper
    LOG_FOLDER/ALGO/ENV_ID_N/vecnormalize.pkl   the statistics (only when the zoo normalised observations)
    LOG_FOLDER/ALGO/ENV_ID_N/zoo.yml            where it came from and how the zoo played it (deterministic, Atari)

``ENV_ID`` is the gymnasium id (a retired id is replaced by its successor, as ``sbtf enjoy --env`` resolves it).
"""
from __future__ import annotations

import os
import re
import shutil
from typing import Any, Dict, Optional

import yaml

from sbtf.common.fileio.atomic_io import atomic_write_bytes
from sbtf.common.vec_env import unwrap_vec_normalize
from sbtf.zoo.agent import ZooAgent, load_zoo_agent
from sbtf.zoo.config import plain_config

__all__ = ["convert_zoo_folder", "write_run_folder", "run_folder_name"]


def run_folder_name(env_id: str) -> str:
    """An env id as a file / folder name (``/`` and ``:`` replaced, as ``sbtf train`` names runs)."""
    return env_id.replace("/", "-").replace(":", "-").replace(os.sep, "-")


def _new_run_dir(algo_dir: str, name: str) -> str:
    os.makedirs(algo_dir, exist_ok=True)
    pattern = re.compile(r"^{}_(\d+)$".format(re.escape(name)))
    ids = [int(match.group(1)) for match in map(pattern.match, os.listdir(algo_dir)) if match is not None]
    run_id = max(ids, default=0) + 1
    while True:
        path = os.path.join(algo_dir, "{}_{}".format(name, run_id))
        try:
            os.makedirs(path)
            return path
        except FileExistsError:
            run_id += 1


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(key): _plain(sub) for key, sub in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(sub) for sub in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return value.item()
    return value


def _write_yaml(data: Dict[str, Any], path: str) -> None:
    text = yaml.safe_dump(_plain(data), default_flow_style=False, sort_keys=True)
    atomic_write_bytes(path, text.encode("utf-8"))


def write_run_folder(agent: ZooAgent, log_folder: str) -> str:
    """
    Save a loaded zoo agent as a new sbtf run folder ``LOG_FOLDER/ALGO/ENV_ID_N`` (N: the next free run number).

    :param agent: (ZooAgent) from :func:`sbtf.zoo.load_zoo_agent`
    :param log_folder: (str) the sbtf log folder (``sbtf enjoy -f LOG_FOLDER``)
    :return: (str) the run folder
    """

    name = run_folder_name(agent.env_id)
    run_dir = _new_run_dir(os.path.join(os.fspath(log_folder), agent.algo), name)
    try:
        agent.model.save(os.path.join(run_dir, "{}.zip".format(name)))
        vec_normalize = unwrap_vec_normalize(agent.env)
        if vec_normalize is not None:
            vec_normalize.save(os.path.join(run_dir, "vecnormalize.pkl"))
        _write_yaml(plain_config(agent.config, agent.settings, agent.env_wrappers),
                    os.path.join(run_dir, "config.yml"))
        paths = agent.paths
        _write_yaml({
            "algo": agent.algo,
            "env": agent.env_id,
            "zoo_env": paths.file_env_id if paths else agent.env_id,
            "source_model": os.path.abspath(paths.model_path) if paths else None,
            "source_config": os.path.abspath(paths.config_path) if paths and paths.config_path else None,
            "deterministic": agent.deterministic,
            "atari": agent.atari,
            "normalize_source": agent.settings.normalize_source or None,
            "notes": list(agent.notes),
        }, os.path.join(run_dir, "zoo.yml"))
    except BaseException:
        shutil.rmtree(run_dir, ignore_errors=True)
        raise
    return run_dir


def convert_zoo_folder(folder: str, algo: str, env_id: str, log_folder: str, *, exp_id: Optional[int] = None,
                       **load_kwargs: Any) -> str:
    """
    Load a zoo agent (as :func:`sbtf.zoo.load_zoo_agent` does, which validates it against its env) and write it as a
    self-contained sbtf run folder; ``sbtf enjoy --algo ALGO --env ENV_ID -f LOG_FOLDER`` then plays it.

    :param folder: (str) the zoo folder (``trained_agents/``)
    :param algo: (str) the algorithm
    :param env_id: (str) the env id (the zoo's or its gymnasium successor)
    :param log_folder: (str) the sbtf log folder to write into
    :param exp_id: (int or None) see :func:`sbtf.zoo.locate_zoo_agent`
    :param load_kwargs: other arguments of :func:`sbtf.zoo.load_zoo_agent` (``time_feature``, ``allowed_wrappers``,
        ``env_kwargs``, ``custom_objects``, ``verbose``)
    :return: (str) the run folder written
    """
    agent = load_zoo_agent(folder, algo, env_id, exp_id=exp_id, **load_kwargs)
    try:
        run_dir = write_run_folder(agent, log_folder)
    finally:
        agent.close()
    if load_kwargs.get("verbose", 0) >= 1:
        print("sbtf.zoo: wrote {} (play it with: sbtf enjoy --algo {} --env {} -f {})".format(
            run_dir, agent.algo, agent.env_id, log_folder))
    return run_dir
