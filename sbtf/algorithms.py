"""The one list of sbtf's algorithms, and what each of them can do.

Every part of sbtf that needs to know "which algorithms exist" reads this module: ``from sbtf import PPO2``
(:mod:`sbtf`), the command line (``sbtf train --algo ppo2``: names, multi-env, schedules, noise, what HER wraps),
the ``stable_baselines`` compatibility package (names and stable-baselines 2 module paths), the stable-baselines 2
file reader and the exporter (``sbtf_converters``). Adding an algorithm is one entry here (plus its package).

Importing this module imports no algorithm and no TensorFlow: an entry names its class as a ``"module:Class"``
string, imported by :meth:`Algorithm.load` when it is first needed.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

__all__ = ["ON_POLICY", "OFF_POLICY", "FAMILIES", "NOISE_TYPES", "Algorithm", "ALGORITHMS", "SB2_ALGORITHMS",
           "CONTRIB_ALGORITHMS", "SB3_ALGORITHMS", "all_algorithms", "get", "find", "AlgorithmNotAvailableError"]

#: collects rollouts with its current policy, then trains on them (A2C, PPO2, TRPO, ...)
ON_POLICY = "on-policy"
#: stores transitions in a replay buffer and trains on samples of it (DQN, SAC, TD3, DDPG, HER)
OFF_POLICY = "off-policy"
FAMILIES = (ON_POLICY, OFF_POLICY)
#: the exploration noises of the command line's ``noise_type`` hyperparameter
NOISE_TYPES = ("normal", "ornstein-uhlenbeck", "adaptive-param")


class AlgorithmNotAvailableError(ImportError):
    """The algorithm's module (or its class) is missing from this installation of sbtf."""


@dataclass(frozen=True)
class Algorithm:
    """
    One algorithm of sbtf.

    :param name: the class name (``PPO2``): ``from sbtf import PPO2``, the name stable-baselines 2 files store
    :param target: where the class lives, as ``"module:Class"`` (imported by :meth:`load`)
    :param family: :data:`ON_POLICY` or :data:`OFF_POLICY` (which learn loop it uses)
    :param mpi: trains data-parallel under ``mpirun`` (PPO1, TRPO, GAIL, DDPG); the family still says how it learns
    :param multi_env: collects experience from several envs at once (the others take exactly one env)
    :param schedules: its learning rate (and PPO2's clip ranges) may be a function of the progress
    :param lr_schedule_argument: anneals its learning rate with stable-baselines' ``lr_schedule`` string argument
    :param noise_types: the exploration noises it takes (subset of :data:`NOISE_TYPES`; ``adaptive-param`` is
        parameter noise)
    :param wraps: the algorithms it wraps (HER: the model classes it can train with hindsight goals)
    :param extends: the algorithm whose constructor receives its ``**kwargs`` (GAIL extends TRPO)
    :param sb2_module: the stable-baselines 2 module that defined the class, below ``stable_baselines``
        (``ppo1.pposgd_simple``): the path old scripts import and old pickles name; empty for the algorithms
        stable-baselines 2 did not have (sb3-contrib's, in ``sbtf.contrib``)
    :param cli: the command-line name when it is not the lower-cased class name (sb3-contrib's ``ppo_mask``)
    :param top_level: ``from sbtf import <name>`` gives it (False for a contrib class whose name SB2 already uses)
    """

    name: str
    target: str
    family: str
    mpi: bool = False
    multi_env: bool = False
    schedules: bool = False
    lr_schedule_argument: bool = False
    noise_types: Tuple[str, ...] = ()
    wraps: Tuple[str, ...] = ()
    extends: Optional[str] = None
    sb2_module: str = ""
    cli: str = ""
    top_level: bool = True

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"{self.name}: family must be one of {FAMILIES}, got {self.family!r}")
        if ":" not in self.target:
            raise ValueError(f"{self.name}: target must be 'module:Class', got {self.target!r}")
        unknown = set(self.noise_types) - set(NOISE_TYPES)
        if unknown:
            raise ValueError(f"{self.name}: unknown noise types {sorted(unknown)}; known: {NOISE_TYPES}")

    @property
    def cli_name(self) -> str:
        """The name on the command line (``sbtf train --algo ppo2``)."""
        return self.cli or self.name.lower()

    @property
    def module(self) -> str:
        """The module that defines (or exports) the class."""
        return self.target.partition(":")[0]

    @property
    def class_name(self) -> str:
        """The attribute of :attr:`module` that is the class."""
        return self.target.partition(":")[2]

    @property
    def is_sb2(self) -> bool:
        """Whether stable-baselines 2 had the algorithm (the legacy package and the SB2 file reader know only these)."""
        return bool(self.sb2_module)

    @property
    def sb2_package(self) -> str:
        """The stable-baselines 2 package of the algorithm, below ``stable_baselines`` (``ppo1``)."""
        return self.sb2_module.split(".")[0]

    def load(self) -> type:
        """
        The algorithm class (imports its module).

        :raises AlgorithmNotAvailableError: (an ImportError) when this installation has no such module or class;
            an ImportError of another package the module needs (e.g. ``mpi4py``) propagates unchanged
        """
        try:
            module = importlib.import_module(self.module)
        except ModuleNotFoundError as exc:
            if exc.name and (self.module == exc.name or self.module.startswith(exc.name + ".")):
                raise AlgorithmNotAvailableError(f"sbtf.{self.name} is not available in this version of sbtf "
                                                 f"({self.module} is missing)") from exc
            raise
        try:
            return getattr(module, self.class_name)
        except AttributeError as exc:
            raise AlgorithmNotAvailableError(f"sbtf.{self.name} is not available in this version of sbtf "
                                             f"({self.module} has no {self.class_name})") from exc


_ON_POLICY_MULTI_ENV = dict(family=ON_POLICY, multi_env=True)

#: stable-baselines 2's algorithms, by class name (alphabetical); sb3-contrib's are in CONTRIB_ALGORITHMS
ALGORITHMS: Dict[str, Algorithm] = {algo.name: algo for algo in (
    Algorithm("A2C", "sbtf.a2c:A2C", lr_schedule_argument=True, sb2_module="a2c.a2c", **_ON_POLICY_MULTI_ENV),
    Algorithm("ACER", "sbtf.acer:ACER", lr_schedule_argument=True, sb2_module="acer.acer_simple",
              **_ON_POLICY_MULTI_ENV),
    Algorithm("ACKTR", "sbtf.acktr:ACKTR", lr_schedule_argument=True, sb2_module="acktr.acktr",
              **_ON_POLICY_MULTI_ENV),
    Algorithm("DDPG", "sbtf.ddpg:DDPG", OFF_POLICY, mpi=True, noise_types=NOISE_TYPES, sb2_module="ddpg.ddpg"),
    Algorithm("DQN", "sbtf.deepq:DQN", OFF_POLICY, sb2_module="deepq.dqn"),
    Algorithm("GAIL", "sbtf.gail:GAIL", ON_POLICY, mpi=True, extends="TRPO", sb2_module="gail.model"),
    Algorithm("HER", "sbtf.her:HER", OFF_POLICY, wraps=("DQN", "SAC", "DDPG", "TD3"), sb2_module="her.her"),
    Algorithm("PPO1", "sbtf.ppo1:PPO1", ON_POLICY, mpi=True, sb2_module="ppo1.pposgd_simple"),
    Algorithm("PPO2", "sbtf.ppo2:PPO2", schedules=True, sb2_module="ppo2.ppo2", **_ON_POLICY_MULTI_ENV),
    Algorithm("SAC", "sbtf.sac:SAC", OFF_POLICY, schedules=True, noise_types=NOISE_TYPES[:2], sb2_module="sac.sac"),
    Algorithm("TD3", "sbtf.td3:TD3", OFF_POLICY, schedules=True, noise_types=NOISE_TYPES[:2], sb2_module="td3.td3"),
    Algorithm("TRPO", "sbtf.trpo_mpi:TRPO", ON_POLICY, mpi=True, sb2_module="trpo_mpi.trpo_mpi"),
)}


#: the algorithms stable-baselines 2 had, by class name (``stable_baselines.<name>``, SB2 files)
SB2_ALGORITHMS: Dict[str, Algorithm] = {name: algo for name, algo in ALGORITHMS.items() if algo.is_sb2}


#: the sb3-contrib algorithms (``sbtf.contrib``), by command-line name: not stable-baselines 2 classes (no SB2
#: module; the legacy package and the SB2 reader do not list them). Top-level ``sbtf.<name>`` where SB2 has no such
#: class; sb3-contrib's TRPO is ``sbtf.contrib.TRPO`` / ``--algo trpo_contrib`` (``sbtf.TRPO`` stays SB2's).
CONTRIB_ALGORITHMS: Dict[str, Algorithm] = {algo.cli_name: algo for algo in (
    Algorithm("ARS", "sbtf.contrib.ars:ARS", ON_POLICY, multi_env=True, schedules=True),
    Algorithm("QRDQN", "sbtf.contrib.qrdqn:QRDQN", OFF_POLICY, multi_env=True, schedules=True),
    Algorithm("RecurrentPPO", "sbtf.contrib.ppo_recurrent:RecurrentPPO", ON_POLICY, multi_env=True, schedules=True,
              cli="ppo_lstm"),
    Algorithm("TQC", "sbtf.contrib.tqc:TQC", OFF_POLICY, multi_env=True, schedules=True,
              noise_types=NOISE_TYPES[:2]),
    Algorithm("MaskablePPO", "sbtf.contrib.ppo_mask:MaskablePPO", ON_POLICY, multi_env=True, schedules=True,
              cli="ppo_mask"),
    Algorithm("TRPO", "sbtf.contrib.trpo:TRPO", ON_POLICY, multi_env=True, schedules=True, cli="trpo_contrib",
              top_level=False),
)}


#: stable-baselines3's own algorithms (``sbtf.sb3``), by command-line name. Not stable-baselines 2 classes. ``PPO``
#: is also ``sbtf.PPO`` and ``--algo ppo``; the classes whose names SB2 already uses are ``sbtf.sb3.<Name>`` only,
#: ``--algo <name>_sb3`` on the command line (``a2c_sb3``, ``dqn_sb3``, ``sac_sb3``, ``td3_sb3``, ``ddpg_sb3``).
SB3_ALGORITHMS: Dict[str, Algorithm] = {algo.cli_name: algo for algo in (
    Algorithm("PPO", "sbtf.sb3.ppo:PPO", ON_POLICY, multi_env=True, schedules=True, cli="ppo"),
    Algorithm("A2C", "sbtf.sb3.a2c:A2C", ON_POLICY, multi_env=True, schedules=True, cli="a2c_sb3", top_level=False),
    Algorithm("DQN", "sbtf.sb3.dqn:DQN", OFF_POLICY, multi_env=True, schedules=True, cli="dqn_sb3", top_level=False),
    Algorithm("SAC", "sbtf.sb3.sac:SAC", OFF_POLICY, multi_env=True, schedules=True, noise_types=NOISE_TYPES[:2],
              cli="sac_sb3", top_level=False),
    Algorithm("TD3", "sbtf.sb3.td3:TD3", OFF_POLICY, multi_env=True, schedules=True, noise_types=NOISE_TYPES[:2],
              cli="td3_sb3", top_level=False),
    Algorithm("DDPG", "sbtf.sb3.ddpg:DDPG", OFF_POLICY, multi_env=True, schedules=True, noise_types=NOISE_TYPES[:2],
              cli="ddpg_sb3", top_level=False),
)}


def all_algorithms() -> Tuple[Algorithm, ...]:
    """Every algorithm: stable-baselines 2's (:data:`ALGORITHMS`), the contrib ones (:data:`CONTRIB_ALGORITHMS`),
    then stable-baselines3's (:data:`SB3_ALGORITHMS`)."""
    return tuple(ALGORITHMS.values()) + tuple(CONTRIB_ALGORITHMS.values()) + tuple(SB3_ALGORITHMS.values())


def find(name: str) -> Optional[Algorithm]:
    """
    The algorithm named ``name`` (class name ``PPO2`` or command-line name ``ppo2``, ``ppo_mask``), or None. A class
    name that SB2 and sb3-contrib share (``TRPO``) is SB2's; the contrib one is found by its command-line name.
    """
    if not isinstance(name, str):
        return None
    found = ALGORITHMS.get(name)
    key = name.strip().lower()
    if found is None:
        found = next((algo for algo in ALGORITHMS.values() if algo.cli_name == key), None)
    if found is None:
        found = CONTRIB_ALGORITHMS.get(key)
    if found is None:
        found = next((algo for algo in CONTRIB_ALGORITHMS.values() if algo.top_level and algo.name == name), None)
    if found is None:
        found = SB3_ALGORITHMS.get(key)
    if found is None:
        found = next((algo for algo in SB3_ALGORITHMS.values() if algo.top_level and algo.name == name), None)
    return found


def get(name: str) -> Algorithm:
    """
    The algorithm named ``name`` (class name or command-line name).

    :raises KeyError: naming the valid choices
    """
    found = find(name)
    if found is None:
        raise KeyError(f"unknown algorithm {name!r}; sbtf has {', '.join(ALGORITHMS)} and "
                       f"{', '.join(a.cli_name for a in CONTRIB_ALGORITHMS.values())} (contrib)"
                       + (f" and {', '.join(a.cli_name for a in SB3_ALGORITHMS.values())} (stable-baselines3)"
                          if SB3_ALGORITHMS else ""))
    return found
