"""Loading an rl-baselines-zoo agent folder as the zoo's ``enjoy.py`` played it.

The layout (``trained_agents/`` of rl-baselines-zoo, or a zoo log folder with ``exp_id``)::

    FOLDER/ALGO/ENV_ID.pkl | ENV_ID.zip          the model (stable-baselines 2 or sbtf)
    FOLDER/ALGO/ENV_ID/config.yml                the hyperparameters it was trained with (optional)
    FOLDER/ALGO/ENV_ID/obs_rms.pkl, ret_rms.pkl  VecNormalize statistics (SB2 < 2.9), or
    FOLDER/ALGO/ENV_ID/vecnormalize.pkl          VecNormalize statistics (SB2 >= 2.9)

:func:`load_zoo_agent` builds the env the zoo played in (retired gym ids mapped to gymnasium's successors, the
config's ``env_wrapper`` with ``TimeFeatureWrapper`` mapped to :class:`sbtf.common.wrappers.TimeFeatureWrapper`,
``env_kwargs``, DeepMind Atari wrapping + 4 stacked frames for ``NoFrameskip`` ids, VecNormalize statistics per the
zoo's rule, ``frame_stack``), loads the model with the algorithm's own ``load`` (SB2 files go through sbtf's safe
legacy readers) and returns them with the zoo's deterministic/stochastic choice.
"""
from __future__ import annotations

import glob
import importlib
import os
import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import gymnasium

import sbtf
from sbtf.bench import Monitor
from sbtf.common.evaluation import evaluate_policy
from sbtf.common.envs.gym_compat import RETIRED_ENV_IDS, resolve_env_id, wrap_env
from sbtf.common.vec_env import DummyVecEnv, VecNormalize
from sbtf.common.file_errors import describe_value
from sbtf.zoo.config import (ZooSettings, check_seed, check_wrapper_kwargs, is_time_feature_wrapper, read_zoo_yaml,
                             zoo_settings)
from sbtf.zoo.errors import MissingTimeFeatureError, ObservationMismatchError, ZooConfigError, ZooError, ZooFolderError

__all__ = ["ZooAgent", "ZooPaths", "load_zoo_agent", "locate_zoo_agent", "zoo_deterministic", "ZOO_ALGOS",
           "ZOO_DETERMINISTIC_ALGOS", "ZOO_TIME_FEATURE_ENVS", "TIME_FEATURE_WRAPPER_PATH"]

#: zoo algorithm name -> sbtf class name (the zoo's names plus sbtf's ppo1 and gail)
ZOO_ALGOS: Dict[str, str] = {
    "a2c": "A2C", "acer": "ACER", "acktr": "ACKTR", "ddpg": "DDPG", "dqn": "DQN", "gail": "GAIL", "her": "HER",
    "ppo1": "PPO1", "ppo2": "PPO2", "sac": "SAC", "td3": "TD3", "trpo": "TRPO",
}
#: algorithms the zoo's enjoy.py plays with deterministic actions (the others sample from the policy)
ZOO_DETERMINISTIC_ALGOS = frozenset({"dqn", "ddpg", "sac", "her", "td3"})
#: env ids for which rl-baselines-zoo's hyperparameter files named ``utils.wrappers.TimeFeatureWrapper`` (for at
#: least one algorithm): a model for them that expects one more observation entry lacks that time feature
ZOO_TIME_FEATURE_ENVS = frozenset({
    "BipedalWalker-v2", "HalfCheetah-v2", "HalfCheetahBulletEnv-v0", "AntBulletEnv-v0", "HopperBulletEnv-v0",
    "Walker2DBulletEnv-v0", "ReacherBulletEnv-v0", "HumanoidBulletEnv-v0", "InvertedPendulumSwingupBulletEnv-v0",
    "MinitaurBulletEnv-v0",
})
#: the import path of sbtf's TimeFeatureWrapper (what a converted config.yml names)
TIME_FEATURE_WRAPPER_PATH = "sbtf.common.wrappers.TimeFeatureWrapper"
_TIME_FEATURE_KWARGS = ("max_steps", "test_mode")
_TRUSTED_WRAPPER_ROOTS = ("sbtf", "gymnasium")
#: frames the zoo stacked for Atari envs (on top of any frame_stack of the config)
ATARI_FRAME_STACK = 4


def zoo_deterministic(algo: str) -> bool:
    """
    The zoo's choice when playing: deterministic actions for DQN, DDPG, SAC, HER and TD3, sampled actions for the
    others (A2C, ACER, ACKTR, PPO2, TRPO), as in its ``enjoy.py`` and its benchmark.

    :param algo: (str) a zoo algorithm name
    :return: (bool)
    """
    return algo.lower() in ZOO_DETERMINISTIC_ALGOS


@dataclass(frozen=True)
class ZooPaths:
    """Where the files of one zoo agent are."""

    #: the model file (``ENV_ID.pkl`` or ``ENV_ID.zip``)
    model_path: str
    #: the folder of config.yml and the statistics (may not exist)
    stats_dir: str
    #: the env id the files are named with (may be a retired id, e.g. ``Pendulum-v0``)
    file_env_id: str

    @property
    def config_path(self) -> Optional[str]:
        """``config.yml`` when the folder has one."""
        path = os.path.join(self.stats_dir, "config.yml")
        return path if os.path.isfile(path) else None


def _latest_exp_id(algo_dir: str, env_id: str) -> int:
    pattern = re.compile(r"^{}_(\d+)$".format(re.escape(env_id)))
    ids = [int(match.group(1)) for match in (pattern.match(os.path.basename(path))
                                             for path in glob.glob(os.path.join(glob.escape(algo_dir), "*")))
           if match is not None]
    return max(ids, default=0)


def _candidate_file_ids(env_id: str) -> List[str]:
    """The env id, then the retired ids whose successor it is (a folder of ``Pendulum-v0`` for ``Pendulum-v1``)."""

    return [env_id] + sorted(old for old, new in RETIRED_ENV_IDS.items() if new == env_id and old != env_id)


def locate_zoo_agent(folder: str, algo: str, env_id: str, exp_id: Optional[int] = None) -> ZooPaths:
    """
    Find the files of an agent in a zoo folder (the zoo's ``find_saved_model``: ``.pkl`` first, then ``.zip``).

    :param folder: (str) the zoo folder (``trained_agents/`` or a zoo log folder)
    :param algo: (str) the algorithm folder name (``ppo2``, ``sac``, ...)
    :param env_id: (str) the env id the files are named with; the id of its gymnasium successor also finds them
    :param exp_id: (int or None) None: ``FOLDER/ALGO/ENV_ID.*`` (the trained_agents layout); N > 0: the zoo log
        folder ``FOLDER/ALGO/ENV_ID_N/``; 0: the latest such folder
    :return: (ZooPaths)
    :raises ZooFolderError: no model file for the agent
    """
    algo_dir = os.path.join(os.fspath(folder), algo)
    tried = []
    for file_id in _candidate_file_ids(env_id):
        log_path = algo_dir
        if exp_id is not None:
            run_id = _latest_exp_id(algo_dir, file_id) if exp_id == 0 else exp_id
            if run_id <= 0:
                tried.append(os.path.join(algo_dir, "{}_<N>".format(file_id)))
                continue
            log_path = os.path.join(algo_dir, "{}_{}".format(file_id, run_id))
        for ext in ("pkl", "zip"):
            model_path = os.path.join(log_path, "{}.{}".format(file_id, ext))
            tried.append(model_path)
            if os.path.isfile(model_path):
                return ZooPaths(model_path=model_path, stats_dir=os.path.join(log_path, file_id),
                                file_env_id=file_id)
    available = []
    if os.path.isdir(algo_dir):
        available = sorted({os.path.splitext(name)[0] for name in os.listdir(algo_dir)
                            if name.endswith((".pkl", ".zip"))})
    hint = "; {} agents there: {}".format(algo, ", ".join(available)) if available else ""
    if not os.path.isdir(folder):
        hint = "; the folder {} does not exist".format(folder)
    raise ZooFolderError("no {} model for {} in {} (looked for {}){}".format(
        algo, env_id, folder, ", ".join(tried), hint))


# --------------------------------------------------------------------------------------------------- env

def _import_wrapper(path: str, source: str) -> Any:
    module_name, _, attr = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ZooConfigError("env_wrapper in {}: cannot import {}: {}".format(source, path, exc)) from exc


def _resolve_wrapper(path: str, kwargs: Dict[str, Any], allowed_wrappers: Sequence[str],
                     source: str) -> Tuple[str, Callable[[Any], Any]]:
    """
    The sbtf path and the function applying one ``env_wrapper`` entry. Any ``...TimeFeatureWrapper`` is sbtf's;
    ``gym.wrappers.X`` is ``gymnasium.wrappers.X``; other sbtf / gymnasium wrapper classes are used as named; any
    other name only when the caller allowed it (importing a name a file gives is running code from that file).
    """

    dotted = path.replace(":", ".")
    if is_time_feature_wrapper(dotted):
        unknown = sorted(set(kwargs) - set(_TIME_FEATURE_KWARGS))
        if unknown:
            raise ZooConfigError("env_wrapper in {}: TimeFeatureWrapper takes {}, not {}".format(
                source, ", ".join(_TIME_FEATURE_KWARGS), ", ".join(unknown)[:200]))
        max_steps = kwargs.get("max_steps", 1)
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise ZooConfigError("env_wrapper in {}: TimeFeatureWrapper's max_steps must be a positive integer, got "
                                 "{}".format(source, describe_value(max_steps)))
        if not isinstance(kwargs.get("test_mode", False), bool):
            raise ZooConfigError("env_wrapper in {}: TimeFeatureWrapper's test_mode must be true or false, got "
                                 "{}".format(source, describe_value(kwargs["test_mode"])))
        from sbtf.common.wrappers import TimeFeatureWrapper  # pylint: disable=import-outside-toplevel
        return TIME_FEATURE_WRAPPER_PATH, lambda env: TimeFeatureWrapper(env, **kwargs)
    if dotted.startswith("gym.wrappers."):
        dotted = "gymnasium" + dotted[len("gym"):]
    module_name, _, attr = dotted.rpartition(".")
    if not module_name or not attr.isidentifier() or len(dotted) > 200:
        raise ZooConfigError("env_wrapper in {}: {} is not a 'module.Class' path".format(
            source, describe_value(path)))
    kwargs = check_wrapper_kwargs(dotted, kwargs, source)
    if dotted in allowed_wrappers or path in allowed_wrappers:
        cls = _import_wrapper(dotted, source)
    elif module_name.split(".")[0] in _TRUSTED_WRAPPER_ROOTS:
        cls = _import_wrapper(dotted, source)
        if not (isinstance(cls, type) and issubclass(cls, gymnasium.Wrapper)):
            raise ZooConfigError("env_wrapper in {}: {} is not a gymnasium.Wrapper class".format(source, path))
    else:
        raise ZooConfigError(
            "env_wrapper in {} names {}, which is neither a TimeFeatureWrapper nor an sbtf or gymnasium wrapper. A "
            "config file is data: sbtf does not import names from it unless you allow them. If you trust it and "
            "the module is importable (gymnasium API), pass allowed_wrappers=[{!r}].".format(source, path, path))
    return dotted, _applying(cls, kwargs, dotted, source)


def _applying(cls: Any, kwargs: Dict[str, Any], path: str, source: str) -> Callable[[Any], Any]:
    """``env -> cls(env, **kwargs)``, a wrapper that refuses its arguments raising a typed error naming them."""

    def wrap(env: Any) -> Any:
        try:
            return cls(env, **kwargs)
        except (TypeError, ValueError, AssertionError, KeyError, IndexError, OverflowError) as exc:
            raise ZooConfigError("env_wrapper {} in {} cannot wrap the env with the arguments {}: {}".format(
                path, source, describe_value(kwargs), describe_value(str(exc), 300))) from exc

    return wrap


def _stacked_space_shape(shape: Tuple[int, ...], n_stack: int) -> Tuple[int, ...]:
    """The observation shape after VecFrameStack(n_stack) (frames stacked on the last axis)."""
    if n_stack <= 0 or not shape:
        return shape
    return tuple(shape[:-1]) + (shape[-1] * n_stack,)


def _observation_shapes(space: Any) -> Dict[str, Tuple[int, ...]]:
    """``{'': shape}`` for a Box-like space, ``{key: shape}`` for a Dict space."""
    sub_spaces = getattr(space, "spaces", None)
    if isinstance(sub_spaces, dict):
        return {str(key): tuple(getattr(sub, "shape", None) or ()) for key, sub in sub_spaces.items()}
    return {"": tuple(getattr(space, "shape", None) or ())}


def _check_observation_shapes(model: Any, env_space: Any, n_stack: int, paths: ZooPaths, env_id: str,
                              settings: ZooSettings, time_feature: bool) -> None:
    """Raise a typed error when the model expects observations of another shape than the env (as built) gives."""
    model_space = getattr(model, "observation_space", None)
    if model_space is None:
        return
    model_shapes = _observation_shapes(model_space)
    env_shapes = {key: _stacked_space_shape(shape, n_stack) for key, shape in _observation_shapes(env_space).items()}
    if model_shapes == env_shapes:
        return
    key = "observation" if "observation" in model_shapes else ""
    model_shape, env_shape = model_shapes.get(key, ()), env_shapes.get(key, ())
    where = "" if not key else " (Dict entry '{}')".format(key)
    base = "{} expects observations of shape {}{} but {} gives {}".format(
        paths.model_path, model_shape or model_shapes, where, env_id, env_shape or env_shapes)
    config_hint = paths.config_path or os.path.join(paths.stats_dir, "config.yml")
    one_dim = len(model_shape) == 1 and len(env_shape) == 1 and n_stack <= 0
    if one_dim and model_shape[0] == env_shape[0] + 1 and not time_feature:
        known = ""
        if paths.file_env_id in ZOO_TIME_FEATURE_ENVS or env_id in ZOO_TIME_FEATURE_ENVS:
            known = " (rl-baselines-zoo trained {} agents with utils.wrappers.TimeFeatureWrapper{})".format(
                paths.file_env_id, "" if paths.config_path else ", and this folder has no config.yml saying so")
        raise MissingTimeFeatureError(
            "{}: a time feature is missing: the model was trained with TimeFeatureWrapper, which appends the "
            "remaining time of the episode as the last observation entry{}. Add it with "
            "load_zoo_agent(..., time_feature=True), or write 'env_wrapper: {}' in {}.".format(
                base, known, TIME_FEATURE_WRAPPER_PATH, config_hint), model_shape, env_shape)
    if one_dim and env_shape[0] == model_shape[0] + 1 and time_feature:
        source = "the config names TimeFeatureWrapper" if settings.time_feature else "time_feature=True was given"
        raise ObservationMismatchError(
            "{}: {} but the model was trained without a time feature; pass time_feature=False to "
            "load_zoo_agent.".format(base, source), model_shape, env_shape)
    raise ObservationMismatchError(
        "{}: was the model trained on another env (or env version), or with other env wrappers / frame stacking "
        "than {} describes?".format(base, config_hint), model_shape, env_shape)


def _make_base_env(env_id: str, n_envs: int, seed: Optional[int], wrappers: List[Callable[[Any], Any]],
                   env_kwargs: Dict[str, Any], render_mode: Optional[str]) -> Any:
    """n_envs monitored envs in a DummyVecEnv: ``gymnasium.make`` (old-gym envs adapted), the wrappers, Monitor."""

    kwargs = dict(env_kwargs)
    if render_mode is not None:
        kwargs["render_mode"] = render_mode

    def make_one() -> Any:
        env = wrap_env(env_id, **kwargs)
        for wrap in wrappers:
            env = wrap(env)
        # as in the zoo: the Monitor sees the rewards of the wrapped env
        return Monitor(env, filename=None)

    venv = DummyVecEnv([make_one for _ in range(n_envs)])
    if seed is not None:
        venv.seed(seed)
    return venv


def _normalized(venv: Any, settings: ZooSettings, paths: ZooPaths) -> Tuple[Any, Optional[str]]:
    """Wrap ``venv`` in VecNormalize with the folder's statistics, frozen (the zoo's test mode)."""

    saved = os.path.join(paths.stats_dir, "vecnormalize.pkl")
    if os.path.isfile(saved):
        venv = VecNormalize.load(saved, venv)
        venv.training = False
        venv.norm_reward = False
        return venv, saved
    legacy = [os.path.join(paths.stats_dir, name) for name in ("obs_rms.pkl", "ret_rms.pkl")]
    missing = [path for path in legacy if not os.path.isfile(path)]
    if missing:
        raise ZooFolderError("{} turns normalisation on ({}) but {} is missing (and there is no {}): the agent cannot "
                             "see the observations it was trained on".format(
                                 paths.model_path, settings.normalize_source, " and ".join(missing), saved))
    kwargs = dict(settings.normalize_kwargs)
    kwargs.update(training=False, norm_reward=False)
    venv = VecNormalize(venv, **kwargs)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*load_running_average.*", category=DeprecationWarning)
        venv.load_running_average(paths.stats_dir)
    return venv, paths.stats_dir


@dataclass
class ZooAgent:
    """A zoo agent ready to play: the model, the env it was trained for, and how the zoo played it."""

    #: the loaded model (an sbtf algorithm instance; no env attached: attach one with ``set_env`` to train)
    model: Any
    #: the VecEnv the agent plays in (wrappers, VecNormalize statistics frozen, frame stacking)
    env: Any
    #: the zoo's choice of deterministic (True) or sampled (False) actions for this algorithm
    deterministic: bool
    #: the hyperparameters of config.yml ({} when the folder has none)
    config: Dict[str, Any]
    #: the zoo algorithm name
    algo: str = ""
    #: the gymnasium env id played (a retired id is replaced by its successor)
    env_id: str = ""
    #: where the files are
    paths: Optional[ZooPaths] = None
    #: the env decisions (normalisation, wrappers, frame stacking, env kwargs)
    settings: ZooSettings = field(default_factory=ZooSettings)
    #: the env wrappers applied, as (import path, kwargs)
    env_wrappers: List[Tuple[str, Dict[str, Any]]] = field(default_factory=list)
    #: the statistics used (vecnormalize.pkl, or the folder of obs_rms.pkl / ret_rms.pkl), None without
    stats_path: Optional[str] = None
    #: whether the env is a DeepMind-wrapped Atari env
    atari: bool = False
    #: what the loader decided that the user may want to know
    notes: List[str] = field(default_factory=list)

    def evaluate(self, n_episodes: int = 10, deterministic: Optional[bool] = None) -> Tuple[List[float], List[int]]:
        """
        Play ``n_episodes`` episodes and return their returns and lengths (the Monitor's figures: raw rewards, and
        whole games for Atari).

        :param n_episodes: (int) how many episodes
        :param deterministic: (bool or None) None: the zoo's choice (:attr:`deterministic`)
        :return: (list of float, list of int)
        """

        returns, lengths = evaluate_policy(
            self.model, self.env, n_eval_episodes=n_episodes,
            deterministic=self.deterministic if deterministic is None else bool(deterministic),
            return_episode_rewards=True)
        return [float(value) for value in returns], [int(value) for value in lengths]

    def close(self) -> None:
        """Close the env."""
        self.env.close()


def _algo_class(algo: str) -> Any:
    return getattr(sbtf, ZOO_ALGOS[algo])


def load_zoo_agent(folder: str, algo: str, env_id: str, *, exp_id: Optional[int] = None, n_envs: int = 1,
                   seed: Optional[int] = 0, deterministic: Optional[bool] = None, time_feature: Optional[bool] = None,
                   env_kwargs: Optional[Dict[str, Any]] = None, allowed_wrappers: Sequence[str] = (),
                   render_mode: Optional[str] = None, custom_objects: Optional[Dict[str, Any]] = None,
                   verbose: int = 0) -> ZooAgent:
    """
    Load an rl-baselines-zoo agent and build the env it plays in, as the zoo's ``enjoy.py`` did.

    * files: ``FOLDER/ALGO/ENV_ID.pkl`` (or ``.zip``) and ``FOLDER/ALGO/ENV_ID/`` (see :func:`locate_zoo_agent`);
    * ``config.yml`` is read safely (:func:`sbtf.zoo.config.read_zoo_yaml`); it decides ``normalize``; without a
      config, the presence of ``obs_rms.pkl`` (or ``vecnormalize.pkl``) does; a stale ``obs_rms.pkl`` next to a
      config without ``normalize`` is ignored (said at ``verbose >= 1`` and in :attr:`ZooAgent.notes`);
    * env ids that gymnasium retired are replaced by their successor (``Pendulum-v0`` -> ``Pendulum-v1``);
    * ``env_wrapper``: any ``...TimeFeatureWrapper`` is :class:`sbtf.common.wrappers.TimeFeatureWrapper`;
      sbtf's / gymnasium's wrappers are used as named; others only when listed in ``allowed_wrappers``;
    * ``NoFrameskip`` ids get DeepMind Atari wrapping and 4 stacked frames (no env_wrapper / env_kwargs, as in
      the zoo); ``frame_stack`` of the config stacks on top;
    * a model whose observations do not match the env raises :class:`~sbtf.zoo.errors.ObservationMismatchError`
      (:class:`~sbtf.zoo.errors.MissingTimeFeatureError` when a time feature is missing, saying how to add it).

    :param folder: (str) the zoo folder (e.g. ``rl-baselines-zoo/trained_agents``)
    :param algo: (str) the algorithm (``a2c``, ``acer``, ``acktr``, ``ddpg``, ``dqn``, ``her``, ``ppo2``, ``sac``,
        ``td3``, ``trpo``; also ``ppo1``, ``gail``)
    :param env_id: (str) the env id (as the zoo named it, or its gymnasium successor)
    :param exp_id: (int or None) a zoo log folder's run: N for ``ALGO/ENV_ID_N/``, 0 for the latest; None for the
        trained_agents layout
    :param n_envs: (int) number of envs (the zoo played with 1)
    :param seed: (int or None) env i is seeded with seed + i at the first reset (the zoo's default: 0)
    :param deterministic: (bool or None) override the zoo's choice (:func:`zoo_deterministic`)
    :param time_feature: (bool or None) None: as config.yml says; True: append a time feature even if the config
        does not name TimeFeatureWrapper (folders without a config.yml); False: leave it out
    :param env_kwargs: (dict) keyword arguments for ``gymnasium.make``, over the config's ``env_kwargs``
    :param allowed_wrappers: (list of str) ``module.Class`` env wrappers of the config you trust (imported)
    :param render_mode: (str) gymnasium render mode of the env ('rgb_array', 'human')
    :param custom_objects: (dict) passed to the algorithm's ``load``
    :param verbose: (int) 1: print what was decided (normalisation, wrappers, ignored statistics)
    :return: (ZooAgent)
    :raises ZooError: (a ValueError) ZooFolderError, ZooConfigError / UnsafeConfigError, ObservationMismatchError
    """
    algo = str(algo).strip().lower()
    if algo not in ZOO_ALGOS:
        raise ZooError("unknown algorithm {!r}; valid: {}".format(algo, ", ".join(sorted(ZOO_ALGOS))))
    if isinstance(n_envs, bool) or not isinstance(n_envs, int) or n_envs < 1:
        raise ValueError("n_envs must be a positive integer, got {!r}".format(n_envs))
    if seed is not None:
        seed = check_seed(seed, "the seed argument")

    paths = locate_zoo_agent(folder, algo, env_id, exp_id=exp_id)
    config_path = paths.config_path
    config = read_zoo_yaml(config_path) if config_path else None
    settings = zoo_settings(config, paths.stats_dir, source=config_path or "config.yml")
    notes = list(settings.notes)
    gym_id = resolve_env_id(env_id)
    if gym_id != paths.file_env_id:
        notes.append("env id {} is played as {} (gymnasium's successor)".format(paths.file_env_id, gym_id))
    atari = "NoFrameskip" in gym_id

    env_wrapper_specs = list(settings.env_wrappers)
    if time_feature is True and not settings.time_feature:
        env_wrapper_specs.append((TIME_FEATURE_WRAPPER_PATH, {}))
        notes.append("a TimeFeatureWrapper is added (time_feature=True)")
    elif time_feature is False and settings.time_feature:
        env_wrapper_specs = [(path, kwargs) for path, kwargs in env_wrapper_specs
                             if not is_time_feature_wrapper(path)]
        notes.append("the config's TimeFeatureWrapper is left out (time_feature=False)")
    resolved = [_resolve_wrapper(path, kwargs, tuple(allowed_wrappers), config_path or "the arguments")
                for path, kwargs in env_wrapper_specs]
    applied_wrappers = [(sbtf_path, dict(kwargs)) for (sbtf_path, _), (_, kwargs) in zip(resolved, env_wrapper_specs)]
    merged_env_kwargs = {**settings.env_kwargs, **(env_kwargs or {})}
    if atari and (applied_wrappers or merged_env_kwargs):
        notes.append("Atari env: env_wrapper and env_kwargs are not used (the zoo applied the DeepMind wrappers "
                     "only)")
        applied_wrappers = []
    has_time_feature = any(is_time_feature_wrapper(path) for path, _ in applied_wrappers)

    model = _algo_class(algo).load(paths.model_path, custom_objects=custom_objects)

    if atari:
        from sbtf.common.cmd_util import make_atari_env  # pylint: disable=import-outside-toplevel
        venv = make_atari_env(gym_id, num_env=n_envs, seed=0 if seed is None else seed)
    else:
        venv = _make_base_env(gym_id, n_envs, seed, [wrap for _, wrap in resolved], merged_env_kwargs, render_mode)
    stats_path = None
    try:
        # frames the model sees stacked: the zoo's 4 for Atari, times the config's frame_stack on top
        total_stack = ATARI_FRAME_STACK * max(settings.frame_stack, 1) if atari else settings.frame_stack
        _check_observation_shapes(model, venv.observation_space, total_stack, paths, gym_id, settings,
                                  has_time_feature)
        if atari:
            from sbtf.common.vec_env import VecFrameStack  # pylint: disable=import-outside-toplevel
            venv = VecFrameStack(venv, ATARI_FRAME_STACK)
        if settings.normalize:
            venv, stats_path = _normalized(venv, settings, paths)
            notes.append("observations normalised with {} ({})".format(stats_path, settings.normalize_source))
        if settings.frame_stack > 0:
            from sbtf.common.vec_env import VecFrameStack  # pylint: disable=import-outside-toplevel
            venv = VecFrameStack(venv, settings.frame_stack)
    except BaseException:
        venv.close()
        raise

    choice = zoo_deterministic(algo) if deterministic is None else bool(deterministic)
    if verbose >= 1:
        for note in notes:
            print("sbtf.zoo: {}".format(note))
        wrappers_text = ", ".join(path for path, _ in applied_wrappers) or "none"
        print("sbtf.zoo: playing {} on {} ({} actions; env wrappers: {}{})".format(
            paths.model_path, gym_id, "deterministic" if choice else "stochastic", wrappers_text,
            "; Atari wrappers" if atari else ""))
    return ZooAgent(model=model, env=venv, deterministic=choice, config=dict(config or {}), algo=algo,
                    env_id=gym_id, paths=paths, settings=settings, env_wrappers=applied_wrappers,
                    stats_path=stats_path, atari=atari, notes=notes)
