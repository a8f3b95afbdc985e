"""How ``stable_baselines.*`` module paths resolve to sbtf.

An import hook (a ``sys.meta_path`` finder installed by ``stable_baselines/__init__.py``) answers every
``stable_baselines.<path>`` import with the sbtf module that implements it -- the *same module object*, so
``stable_baselines.common.policies.MlpPolicy is sbtf.common.policies.MlpPolicy``. The target is looked up when
the module is first imported, so algorithms that land in sbtf later are picked up without changing this package;
until then their import raises ``ModuleNotFoundError: ... not available in this version of sbtf``.

A few paths need more than an alias:
* ``stable_baselines.common`` and ``stable_baselines.ddpg`` are facades: the sbtf package's names plus the names
  stable-baselines re-exported there (``explained_variance``, ``BaseRLModel`` ...; the noise classes);
* ``stable_baselines.a2c.utils`` (the A2C/ACER/ACKTR ``Scheduler`` and schedule functions) maps to
  :mod:`stable_baselines._compat.a2c_utils` unless sbtf grows an ``a2c.utils`` module;
* ``stable_baselines.ddpg.noise`` and ``stable_baselines.deepq.replay_buffer`` fall back to
  ``sbtf.common.noise`` / ``sbtf.common.buffers``;
* ``stable_baselines.common.tf_util`` maps to ``sbtf.common.tf_util`` (its TF2 flat-parameter helpers); without
  it the error says that TF1 sessions / placeholders have no TensorFlow 2 equivalent;
* SB2's bundled envs and ``Monitor`` (``common.bit_flipping_env``, ``common.identity_env``, ``bench``,
  ``bench.monitor``) map to :mod:`stable_baselines._compat.old_gym_api`'s subclasses of sbtf's classes, which speak
  the old gym API (``reset() -> obs``, 4-tuple ``step``) to old code, while ``sbtf.common...`` keeps gymnasium's;
* SB2's example scripts (``ddpg.main``, ``<algo>.run_atari``, ``deepq.experiments.*``,
  ``ppo1.experiments.train_cartpole``) map to ``sbtf.scripts.<same path>`` (runnable sbtf versions with SB2's
  flags), and the modules SB2 ran as self-tests (``python -m stable_baselines.common.mpi_adam``) run
  ``sbtf.scripts.<same path>``; SB2 modules sbtf deliberately lacks say what to use instead (:data:`NOT_PROVIDED`).

The hook marks a path as a package only when its module is one (so ``python -m stable_baselines.X`` runs ``X``),
and its loader has ``get_code`` (what ``runpy`` executes for ``python -m``).
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any, Dict, List, Optional, Sequence

from sbtf import algorithms

PREFIX = "stable_baselines"

#: public stable-baselines 2.10 modules besides the algorithms' packages and class modules
_SHARED_MODULES = [
    "common", "common.base_class", "common.policies", "common.distributions", "common.input", "common.tf_layers",
    "common.tf_util", "common.vec_env", "common.vec_env.base_vec_env", "common.vec_env.dummy_vec_env",
    "common.vec_env.subproc_vec_env", "common.vec_env.vec_normalize", "common.vec_env.vec_frame_stack",
    "common.vec_env.vec_video_recorder", "common.vec_env.vec_check_nan", "common.vec_env.util", "common.callbacks",
    "common.noise", "common.schedules", "common.evaluation", "common.cmd_util", "common.env_checker",
    "common.atari_wrappers", "common.misc_util", "common.math_util", "common.running_mean_std", "common.runners",
    "common.save_util", "common.identity_env", "common.bit_flipping_env", "common.buffers", "common.dataset",
    "common.console_util", "common.mpi_adam", "common.mpi_running_mean_std", "common.mpi_moments", "common.cg",
    "bench", "bench.monitor", "results_plotter", "logger",
]
#: the other public modules of the algorithms' packages (policies, buffers, helpers)
_ALGORITHM_EXTRA_MODULES = [
    "a2c.utils", "acer.buffer", "acktr.kfac", "ddpg.policies", "ddpg.noise", "deepq.policies", "deepq.build_graph",
    "deepq.replay_buffer", "gail.adversary", "gail.dataset", "gail.dataset.dataset", "gail.dataset.record_expert",
    "her.replay_buffer", "her.utils", "sac.policies", "td3.policies", "trpo_mpi.utils", "acktr.kfac_utils",
    "common.segment_tree",
]
#: stable-baselines 2.10's example and experiment scripts, served by ``sbtf.scripts.<same path>``
SCRIPT_MODULES = [
    "a2c.run_atari", "acer.run_atari", "acktr.run_atari", "ppo1.run_atari", "ppo2.run_atari", "trpo_mpi.run_atari",
    "ddpg.main", "ppo1.experiments", "ppo1.experiments.train_cartpole", "deepq.experiments",
    "deepq.experiments.train_cartpole", "deepq.experiments.enjoy_cartpole", "deepq.experiments.train_mountaincar",
    "deepq.experiments.enjoy_mountaincar", "deepq.experiments.run_atari",
]
#: packages holding a script: served as facades, so that ``from stable_baselines.a2c import run_atari`` finds the
#: script through this hook (the sbtf package's own name, ``sbtf.a2c``, has no ``run_atari`` child)
_SCRIPT_PARENTS = frozenset(path.rsplit(".", 1)[0] for path in SCRIPT_MODULES)
#: the package of sbtf's versions of SB2's scripts (and of the ``__main__`` self-tests of SB2 modules)
SCRIPTS_PACKAGE = "sbtf.scripts"
_USE_SBTF_TRAIN = ("use `sbtf train --algo ALGO --env ENV_ID` (gymnasium's MuJoCo / robotics envs, the zoo's "
                   "hyperparameters) or sbtf.common.cmd_util.make_mujoco_env / make_robotics_env with the algorithm")
#: stable-baselines 2.10 modules that sbtf does not provide, and what to use instead
NOT_PROVIDED: Dict[str, str] = {
    "deepq.experiments.custom_cartpole": "it builds DQN's TensorFlow 1 graph by hand (deepq.build_train, "
                                         "placeholders, sessions); train sbtf.deepq.DQN instead, as "
                                         "stable_baselines.deepq.experiments.train_cartpole does",
    "acktr.run_mujoco": "a mujoco-py script for gym's retired MuJoCo envs; " + _USE_SBTF_TRAIN,
    "ppo1.run_mujoco": "a mujoco-py script for gym's retired MuJoCo envs; " + _USE_SBTF_TRAIN,
    "ppo2.run_mujoco": "a mujoco-py script for gym's retired MuJoCo envs; " + _USE_SBTF_TRAIN,
    "trpo_mpi.run_mujoco": "a mujoco-py script for gym's retired MuJoCo envs; " + _USE_SBTF_TRAIN,
    "ppo1.run_robotics": "a mujoco-py script for gym's retired robotics envs; " + _USE_SBTF_TRAIN,
    "common.tile_images": "a helper of SB2's VecEnv.render; sbtf's VecEnvs tile their images themselves "
                          "(VecEnv.render(mode='rgb_array'))",
}
#: public stable-baselines 2.10 module paths (all of them resolve through the hook): the shared modules, each
#: algorithm's package and the module that defined its class (from sbtf's algorithm registry), and the extras
PUBLIC_MODULES: List[str] = _SHARED_MODULES + [
    path for algo in algorithms.SB2_ALGORITHMS.values() for path in (algo.sb2_package, algo.sb2_module)
] + _ALGORITHM_EXTRA_MODULES + SCRIPT_MODULES

#: paths whose sbtf module differs from ``sbtf.<same path>``: candidates, first importable wins
OVERRIDES: Dict[str, Sequence[str]] = {
    "a2c.utils": ("sbtf.a2c.utils", "stable_baselines._compat.a2c_utils"),
    "ddpg.noise": ("sbtf.ddpg.noise", "sbtf.common.noise"),
    "deepq.replay_buffer": ("sbtf.deepq.replay_buffer", "sbtf.common.buffers"),
    # SB2's bundled envs and Monitor, with the old gym API
    "common.bit_flipping_env": ("stable_baselines._compat.bit_flipping_env",),
    "common.identity_env": ("stable_baselines._compat.identity_env",),
    "bench": ("stable_baselines._compat.bench",),
    "bench.monitor": ("stable_baselines._compat.bench",),
}

#: facades: sbtf package + names stable-baselines re-exported from elsewhere (name -> sbtf module)
FACADES: Dict[str, Dict[str, str]] = {
    "common": {
        **{n: "sbtf.common.console_util" for n in ("fmt_row", "fmt_item", "colorize")},
        "Dataset": "sbtf.common.dataset",
        **{n: "sbtf.common.math_util" for n in ("discount", "discount_with_boundaries", "explained_variance",
                                                "explained_variance_2d", "flatten_arrays", "unflatten_vector")},
        **{n: "sbtf.common.misc_util" for n in ("zipsame", "set_global_seeds", "boolean_flag")},
        **{n: "sbtf.common.base_class" for n in ("BaseRLModel", "ActorCriticRLModel", "OffPolicyRLModel",
                                                 "SetVerbosity", "TensorboardWriter")},
        "make_vec_env": "sbtf.common.cmd_util",
    },
    "ddpg": {n: "sbtf.common.noise" for n in ("NormalActionNoise", "OrnsteinUhlenbeckActionNoise",
                                              "AdaptiveParamNoiseSpec", "ActionNoise")},
    "bench": {},  # a package in SB2 (bench.monitor): the old-API Monitor module behind a package namespace
}

_NO_TF2 = {"common.tf_util": "TF1 sessions, placeholders and graph helpers; sbtf runs eagerly / with tf.function"}


def public_module_paths() -> List[str]:
    return [PREFIX] + [f"{PREFIX}.{p}" for p in PUBLIC_MODULES]


def candidates_for(fullname: str) -> Sequence[str]:
    """The modules that may serve ``stable_baselines.<path>``, in order: the overrides, else ``sbtf.<path>`` then
    ``sbtf.scripts.<path>`` (SB2's scripts)."""
    rest = fullname[len(PREFIX) + 1:]
    if rest in OVERRIDES:
        return OVERRIDES[rest]
    return (f"sbtf.{rest}", f"{SCRIPTS_PACKAGE}.{rest}")


def _import_optional(name: str) -> Optional[types.ModuleType]:
    """Import ``name``; None when it (or a parent package) does not exist. Other import errors propagate."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing == name or name.startswith(missing + "."):
            return None
        raise


def target_for(fullname: str) -> Optional[types.ModuleType]:
    """The module ``fullname`` resolves to (imported), or None when sbtf does not have it."""
    for candidate in candidates_for(fullname):
        module = _import_optional(candidate)
        if module is not None:
            return module
    return None


class _Facade(types.ModuleType):
    """A stable-baselines package namespace: the sbtf package's names, then re-exported extras."""

    def __init__(self, name: str, target: Optional[types.ModuleType], extras: Dict[str, str]):
        super().__init__(name)
        self.__path__ = []  # a package: children resolve through the hook
        self._sbtf_target = target
        self._sbtf_extras = extras
        self.__doc__ = f"stable-baselines path {name}, served by sbtf ({getattr(target, '__name__', 'extras only')})"

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        target = self.__dict__.get("_sbtf_target")
        if target is not None and hasattr(target, attr):
            return getattr(target, attr)
        module_name = self.__dict__.get("_sbtf_extras", {}).get(attr)
        if module_name is not None:
            module = _import_optional(module_name)
            if module is not None and hasattr(module, attr):
                return getattr(module, attr)
        if target is None:
            missing = self.__name__.replace(PREFIX, "sbtf", 1)
            raise ModuleNotFoundError(f"{self.__name__}.{attr}: {missing} is not available in this version of sbtf "
                                      "yet.", name=missing)
        raise AttributeError(f"module {self.__name__!r} ({target.__name__} in sbtf) has no attribute {attr!r}")

    def __dir__(self) -> List[str]:
        names = set(self.__dict__) | set(self._sbtf_extras)
        if self._sbtf_target is not None:
            names |= set(dir(self._sbtf_target))
        return sorted(names)


def resolve(fullname: str) -> types.ModuleType:
    """The module object for ``stable_baselines.<path>`` (raises ModuleNotFoundError naming what is missing)."""
    rest = fullname[len(PREFIX) + 1:]
    target = target_for(fullname)
    if target is None and rest in _NO_TF2:
        raise ModuleNotFoundError(f"{fullname} has no TensorFlow 2 equivalent in sbtf ({_NO_TF2[rest]}).",
                                  name=fullname)
    if target is None and rest in NOT_PROVIDED:
        raise ModuleNotFoundError(f"{fullname} is not provided by sbtf: {NOT_PROVIDED[rest]}.", name=fullname)
    if rest in FACADES or (rest in _SCRIPT_PARENTS and target is not None
                           and target.__name__ != f"{SCRIPTS_PACKAGE}.{rest}"):
        return _Facade(fullname, target, FACADES.get(rest, {}))
    if target is None:
        wanted = " or ".join(candidates_for(fullname))
        known = rest in PUBLIC_MODULES
        raise ModuleNotFoundError(
            f"{fullname} maps to {wanted}, which is not available in this version of sbtf"
            f"{' yet' if known else ' (not a stable-baselines 2.10 module either)'}.", name=fullname)
    return target


def script_code(fullname: str, module: Optional[types.ModuleType] = None) -> Optional[types.CodeType]:
    """
    The code ``python -m stable_baselines.<path>`` runs: ``sbtf.scripts.<path>`` when sbtf has a script for that
    path (SB2's ``__main__`` self-tests of ``common.mpi_adam`` / ``common.mpi_running_mean_std``), else the code of
    the module the path resolves to. None when that module has no code (a facade, a built-in module).

    :param fullname: (str) ``stable_baselines.<path>``
    :param module: (module) what the path resolves to (default: ``sys.modules[fullname]``)
    """
    rest = fullname[len(PREFIX) + 1:]
    names = [f"{SCRIPTS_PACKAGE}.{rest}"]
    if module is None:
        module = sys.modules.get(fullname)
    target_name = getattr(module, "__name__", None)
    if target_name and target_name != fullname:
        names.append(target_name)
    for name in names:
        try:
            spec = importlib.util.find_spec(name)
        except ModuleNotFoundError:
            continue
        if spec is None or spec.loader is None or spec.submodule_search_locations is not None:
            continue
        get_code = getattr(spec.loader, "get_code", None)
        if get_code is not None:
            return get_code(name)
    return None


class _AliasLoader(importlib.abc.InspectLoader):
    """Serves a resolved module (or raises the error of an unresolved path) and its code for ``python -m``."""

    def __init__(self, module: Optional[types.ModuleType], error: Optional[ModuleNotFoundError] = None):
        self._module = module
        self._error = error

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # a placeholder module; exec_module swaps in the real one

    def exec_module(self, module: types.ModuleType) -> None:
        if self._error is not None:
            raise self._error
        if isinstance(self._module, _Facade):  # the facade is this path's own module: it gets the path's spec
            self._module.__spec__ = module.__spec__
            self._module.__loader__ = self
        # The import system returns sys.modules[name] after exec_module, so the sbtf module object itself is used.
        sys.modules[module.__name__] = self._module

    def is_package(self, fullname: str) -> bool:
        return self._module is not None and hasattr(self._module, "__path__")

    def get_source(self, fullname: str) -> Optional[str]:
        return None

    def get_code(self, fullname: str) -> Optional[types.CodeType]:
        if self._error is not None:
            raise ImportError(str(self._error), name=fullname)
        return script_code(fullname, self._module)


class StableBaselinesFinder(importlib.abc.MetaPathFinder):
    """``sys.meta_path`` hook for ``stable_baselines.*`` (except this package's own ``_compat``)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None):
        if not fullname.startswith(PREFIX + ".") or fullname.startswith(PREFIX + "._compat"):
            return None
        try:
            module = resolve(fullname)
        except ModuleNotFoundError as exc:
            # a spec all the same: the import then fails with the message saying what is missing and why
            return importlib.machinery.ModuleSpec(fullname, _AliasLoader(None, exc), is_package=False)
        loader = _AliasLoader(module)
        spec = importlib.machinery.ModuleSpec(fullname, loader, is_package=loader.is_package(fullname),
                                              origin=getattr(module, "__file__", None))
        spec.has_location = spec.origin is not None
        return spec


_FINDER = StableBaselinesFinder()


def install() -> None:
    """Put the hook first on ``sys.meta_path`` (idempotent)."""
    if not any(isinstance(f, StableBaselinesFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _FINDER)


def uninstall() -> None:
    """Remove the hook (the modules already imported stay in ``sys.modules``)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, StableBaselinesFinder)]
