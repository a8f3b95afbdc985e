"""Find what a stable-baselines3 / sb3-contrib file or RL-Zoo3 run folder holds, for ``sbtf convert`` and
``sbtf export``.

* :func:`sb3_algorithm_name` -- the algorithm that wrote an SB3 zip (from its policy class's module, read as a name,
  and for the shared ``ActorCriticPolicy`` from the hyperparameters only that algorithm saves);
* :func:`sb3_class` -- the ``sbtf.sb3`` / ``sbtf.contrib`` class of an algorithm name;
* :func:`find_run_folder` -- the model and statistics of an RL-Zoo3 run folder (``ENV.zip``, ``ENV/config.yml``,
  ``ENV/vecnormalize.pkl``).

Nothing here runs code from a file: the zip is read by :func:`sbtf_converters.sb3_reader.read_sb3_zip`.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional, Union

from sbtf.common.file_errors import ModelDataError, WrongAlgorithmError
from sbtf_converters.sb3_reader import Sb3File

__all__ = ["RunFolder", "find_run_folder", "sb3_algorithm_name", "sb3_class", "SB3_ALGORITHMS"]

#: the policies module (``stable_baselines3.<key>.policies`` / ``sb3_contrib.<key>.policies``) -> algorithm
_POLICY_MODULES = {"ppo": "PPO", "a2c": "A2C", "dqn": "DQN", "sac": "SAC", "td3": "TD3", "ddpg": "DDPG",
                   "qrdqn": "QRDQN", "tqc": "TQC", "trpo": "TRPO", "ars": "ARS", "ppo_recurrent": "RecurrentPPO",
                   "ppo_mask": "MaskablePPO", "recurrent": "RecurrentPPO", "maskable": "MaskablePPO"}
#: the algorithms whose SB3 / sb3-contrib files sbtf reads
SB3_ALGORITHMS = ("PPO", "A2C", "DQN", "SAC", "TD3", "DDPG", "QRDQN", "TQC", "TRPO", "ARS", "RecurrentPPO",
                  "MaskablePPO")


def sb3_algorithm_name(sb3: Sb3File) -> str:
    """
    The algorithm (``PPO``, ``QRDQN``...) that wrote an SB3 / sb3-contrib zip.

    :param sb3: the file, as :func:`sbtf_converters.sb3_reader.read_sb3_zip` reads it
    :raises ModelDataError: when the file does not tell (pass the algorithm explicitly then)
    """
    module, name = sb3.policy_class_name()
    parts = module.split(".")
    data = sb3.data
    if len(parts) >= 2 and parts[0] in ("stable_baselines3", "sb3_contrib") and parts[1] != "common":
        algo = _POLICY_MODULES.get(parts[1])
        if algo == "TD3" and data.get("policy_delay") == 1 and data.get("target_noise_clip") == 0.0:
            return "DDPG"  # SB3's DDPG is TD3 with one actor update per critic update and no target smoothing
        if algo is not None:
            return algo
    if len(parts) >= 3 and parts[:2] == ["sb3_contrib", "common"] and parts[2] in _POLICY_MODULES:
        return _POLICY_MODULES[parts[2]]
    if name in ("ActorCriticPolicy", "ActorCriticCnnPolicy", "MultiInputActorCriticPolicy", "MlpPolicy",
                "CnnPolicy", "MultiInputPolicy"):
        if "cg_max_steps" in data:
            return "TRPO"
        if "clip_range" in data:
            return "PPO"
        if "normalize_advantage" in data or "use_rms_prop" in data or "rms_prop_eps" in data:
            return "A2C"
    raise ModelDataError(f"{sb3.source} does not tell which algorithm wrote it (policy {module}.{name}); pass the "
                         f"algorithm (--algo, one of {', '.join(SB3_ALGORITHMS)}).")


def sb3_class(name: str) -> type:
    """
    The ``sbtf.sb3`` / ``sbtf.contrib`` class of an algorithm name (``PPO``, ``qrdqn``, ``a2c_sb3``...).

    :raises WrongAlgorithmError: for a name that is no stable-baselines3 / sb3-contrib algorithm
    """
    from sbtf import algorithms  # pylint: disable=import-outside-toplevel

    wanted = name.strip()
    roots = ("sbtf.sb3.", "sbtf.contrib.")
    entries = [entry for entry in algorithms.all_algorithms() if entry.target.startswith(roots)]
    for entry in entries:
        if wanted in (entry.name, entry.cli_name) or wanted.lower() in (entry.name.lower(), entry.cli_name):
            return entry.load()
    raise WrongAlgorithmError(f"{name!r} is not a stable-baselines3 / sb3-contrib algorithm sbtf reads; use one of "
                              f"{', '.join(SB3_ALGORITHMS)}.")


@dataclass
class RunFolder:
    """An RL-Zoo3 run folder: ``model_path`` (``ENV.zip``), ``stats_dir`` (``ENV/``), ``env_id``, ``vecnormalize``
    (``ENV/vecnormalize.pkl`` or None) and ``algo`` (the parent folder's name, e.g. ``ppo``, or "")."""

    path: str
    model_path: str
    stats_dir: str
    env_id: str
    vecnormalize: Optional[str]
    algo: str


def find_run_folder(path: Union[str, os.PathLike]) -> RunFolder:
    """
    The parts of an RL-Zoo3 run folder (``logs/ppo/CartPole-v1_1/``: ``CartPole-v1.zip`` and ``CartPole-v1/`` with
    ``config.yml`` and, when the run normalised observations, ``vecnormalize.pkl``).

    :raises FileNotFoundError: when ``path`` is not such a folder (the message says what is missing)
    """
    folder = os.fspath(path)
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"{folder} is not a folder")
    candidates = sorted(entry[:-4] for entry in os.listdir(folder)
                        if entry.endswith(".zip") and os.path.isdir(os.path.join(folder, entry[:-4])))
    if not candidates:
        raise FileNotFoundError(f"{folder} is not an RL-Zoo3 run folder: it holds no ENV.zip with an ENV/ folder "
                                "(config.yml, vecnormalize.pkl) beside it")
    if len(candidates) > 1:
        raise FileNotFoundError(f"{folder} holds several models with their folders ({', '.join(candidates)}); give "
                                "the model's .zip instead of the folder")
    env_id = candidates[0]
    stats_dir = os.path.join(folder, env_id)
    stats = os.path.join(stats_dir, "vecnormalize.pkl")
    algo = os.path.basename(os.path.dirname(os.path.abspath(folder)))
    return RunFolder(folder, os.path.join(folder, env_id + ".zip"), stats_dir, env_id,
                     stats if os.path.isfile(stats) else None, algo)
