"""The environments of ``sbtf train`` / ``enjoy``: env ids, the env settings of the hyperparameters (normalize,
frame_stack, env_wrapper, env_kwargs) and the VecEnvs built from them.

Settings files are data: ``env_wrapper`` resolves only to sbtf's or gymnasium's wrapper classes, or to names the user
allowed with ``--allow-wrapper``. gymnasium and sbtf's env modules are imported when an env is made, so that
``sbtf --help`` stays fast.
"""
from __future__ import annotations

import difflib
import importlib
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import gymnasium

from sbtf.cli.errors import CLIError, exc_text
from sbtf.cli.hyperparams import is_atari_id, parse_value, safe_eval
from sbtf.common.file_errors import describe_value
from sbtf.common.envs.gym_compat import RetiredEnvIdError, resolve_env_id
from sbtf.common.vec_env import VecFrameStack, VecNormalize
from sbtf.zoo.config import (VEC_NORMALIZE_KEYS, check_env_kwargs, check_frame_stack, check_normalize_kwargs,
                             check_wrapper_count, check_wrapper_kwargs)
from sbtf.zoo.errors import ZooConfigError

#: envs that sbtf itself provides, registered with gymnasium by the command: id -> entry point
SBTF_ENVS: Dict[str, str] = {
    "BitFlippingEnv-v0": "sbtf.common.bit_flipping_env:BitFlippingEnv",
    "InvalidActionEnvDiscrete-v0": "sbtf.contrib.common.maskable.envs:InvalidActionEnvDiscrete",
    "InvalidActionEnvMultiDiscrete-v0": "sbtf.contrib.common.maskable.envs:InvalidActionEnvMultiDiscrete",
    "InvalidActionEnvMultiBinary-v0": "sbtf.contrib.common.maskable.envs:InvalidActionEnvMultiBinary",
}


def _register_sbtf_envs() -> None:
    for env_id, entry_point in SBTF_ENVS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point=entry_point)


def _register_atari_envs(env_id: str) -> None:
    """Register ale-py's envs with gymnasium for an unknown Atari id (``NoFrameskip`` or ``ALE/``)."""
    if not (is_atari_id(env_id) or env_id.startswith("ALE/")):
        return
    from sbtf.common.atari_wrappers import ensure_atari_registered  # pylint: disable=import-outside-toplevel

    try:
        ensure_atari_registered(env_id)
    except ImportError as exc:
        raise CLIError("{} is an Atari env: it needs ale-py (pip install 'sbtf[atari]')".format(env_id),
                       exit_code=1) from exc


def import_gym_packages(modules: Sequence[str]) -> None:
    """Import the modules of ``--gym-packages`` (they register their envs with gymnasium), or a CLIError."""
    for module in modules or ():
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise CLIError("--gym-packages: cannot import {!r}: {}".format(module, exc)) from exc


def resolve_env(env_arg: str, algo: str, tuned: Sequence[str] = ()) -> str:
    """
    Check an env id and return the id to make: ``module:EnvId`` imports ``module`` first (as ``gymnasium.make``
    does); ids that gymnasium retired are replaced by their successor
    (:data:`sbtf.common.envs.gym_compat.RETIRED_ENV_IDS`).

    :param env_arg: (str) the id the user gave
    :param algo: (str) the algorithm (for the list of valid choices in the error)
    :param tuned: (list) env ids that have tuned hyperparameters for ``algo``
    :return: (str) a registered env id
    """

    _register_sbtf_envs()
    env_id = env_arg.strip()
    if ":" in env_id:
        module, _, env_id = env_id.partition(":")
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise CLIError("cannot import {!r} (from the env id {!r}): {}".format(module, env_arg, exc)) from exc
    _register_atari_envs(env_id)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            successor = resolve_env_id(env_id)  # also the registered ids gymnasium can no longer make (mujoco-py)
    except RetiredEnvIdError as exc:
        raise CLIError(str(exc).replace("Error: ", "", 1)) from exc
    if successor != env_id and successor in gymnasium.registry:
        print("sbtf: note: env id {} was retired by gymnasium; using its successor {}".format(env_id, successor),
              file=sys.stderr)
        return successor
    if env_id in gymnasium.registry:
        return env_id
    close = difflib.get_close_matches(env_id, list(gymnasium.registry), n=3)
    hint = "; did you mean {}?".format(" or ".join(close)) if close else ""
    choices = ", ".join(tuned) if tuned else "(none)"
    raise CLIError("unknown env id {!r} (not registered in gymnasium{}){}. Envs with tuned {} hyperparameters: {}. "
                   "Envs of other packages: import them with --gym-packages MODULE".format(
                       env_arg, "" if ":" not in env_arg else " after importing its module", hint, algo, choices))


@dataclass
class EnvSettings:
    """The hyperparameters that shape the environment."""

    normalize: bool = False
    normalize_kwargs: Dict[str, Any] = field(default_factory=dict)
    frame_stack: int = 0
    env_wrapper: Any = None
    env_kwargs: Dict[str, Any] = field(default_factory=dict)
    #: 'module.Name' wrappers the user allowed (command line / Python) besides sbtf's and gymnasium's own
    allowed_wrappers: Tuple[str, ...] = ()
    #: where the settings were read (for messages)
    source: str = "the hyperparameters"


def env_settings(hyperparams: Dict[str, Any], allowed_wrappers: Sequence[str] = (),
                 source: str = "the hyperparameters") -> EnvSettings:
    """
    Read normalize / frame_stack / env_wrapper / env_kwargs from hyperparameters (shipped, user's or a config.yml).
    These are data: ``env_wrapper`` resolves only to sbtf's or gymnasium's wrappers, or to names in
    ``allowed_wrappers`` (``--allow-wrapper``), see :func:`wrapper_class`; values are checked against their meaning
    (:mod:`sbtf.zoo.config`'s checks: a bounded ``frame_stack``, VecNormalize arguments of the right types,
    ``env_kwargs`` naming no file), a bad one raising :class:`~sbtf.zoo.errors.ZooConfigError` (a
    ``ModelFileError``).

    :param hyperparams: (dict)
    :param allowed_wrappers: (list of str) 'module.Name' wrappers the user trusts
    :param source: (str) where ``hyperparams`` were read, for messages (e.g. the config.yml path)
    :return: (EnvSettings)
    """
    settings = EnvSettings(allowed_wrappers=tuple(_wrapper_path(p) for p in allowed_wrappers), source=source)
    normalize = hyperparams.get("normalize", False)
    if isinstance(normalize, str):
        try:
            normalize = safe_eval(normalize, "normalize")
        except CLIError:
            pass  # reported below, with what would be valid
    if normalize is None or isinstance(normalize, bool):
        settings.normalize = bool(normalize)
    elif isinstance(normalize, dict):
        settings.normalize = True
        settings.normalize_kwargs = check_normalize_kwargs(normalize, source)
    else:
        raise CLIError("normalize must be true, false or a dict of VecNormalize arguments ({}), got {} (in {})".format(
            ", ".join(VEC_NORMALIZE_KEYS), describe_value(normalize), source))
    frame_stack = hyperparams.get("frame_stack", 0)
    if isinstance(frame_stack, str):
        frame_stack = parse_value(frame_stack)
    settings.frame_stack = check_frame_stack(frame_stack, source)
    settings.env_wrapper = hyperparams.get("env_wrapper")
    env_kwargs = hyperparams.get("env_kwargs") or {}
    if isinstance(env_kwargs, str):
        env_kwargs = safe_eval(env_kwargs, "env_kwargs")
    if not isinstance(env_kwargs, dict):
        raise CLIError("env_kwargs in {} must be a dict of keyword arguments for the env, got {}".format(
            source, describe_value(env_kwargs)))
    settings.env_kwargs = check_env_kwargs(env_kwargs, source)
    return settings


def _import_object(path: str, what: str) -> Any:
    module_name, sep, attr = path.replace(":", ".").rpartition(".")
    if not sep or not module_name:
        raise CLIError("{}: {} is not a 'module.Name' path".format(what, describe_value(path)))
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise CLIError("{}: cannot import {}: {}".format(what, describe_value(path), exc)) from exc


#: rl-baselines-zoo wrappers that zoo config.yml files name (sbtf does not provide them yet)
ZOO_WRAPPERS = ("utils.wrappers.", "utils.utils.")
_TRUSTED_WRAPPER_MODULES = ("sbtf", "gymnasium")


def _wrapper_path(path: str) -> str:
    return str(path).strip().replace(":", ".")


def _plain_kwargs(value: Any, depth: int = 0) -> bool:
    if depth > 16:
        return False
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_plain_kwargs(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain_kwargs(v, depth + 1) for k, v in value.items())
    return False


def _resolve_wrapper(path: str, settings: EnvSettings) -> Any:
    """
    The wrapper class a settings file names. sbtf's and gymnasium's wrapper classes (subclasses of
    ``gymnasium.Wrapper``) are resolved; any other name only when the user allowed it (``--allow-wrapper``), because
    importing and calling an arbitrary name from a file is running code from that file.
    """

    path = _wrapper_path(path)
    module_name, sep, attr = path.rpartition(".")
    if not sep or not module_name or not attr.isidentifier() or len(path) > 200:
        raise CLIError("env_wrapper in {}: {} is not a 'module.Name' path".format(settings.source,
                                                                                 describe_value(path)))
    if path in settings.allowed_wrappers:
        return _import_object(path, "env_wrapper")
    if module_name.split(".")[0] in _TRUSTED_WRAPPER_MODULES:
        try:
            obj = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError):
            obj = None
        if isinstance(obj, type) and issubclass(obj, gymnasium.Wrapper):
            return obj
    hint = ""
    if path.startswith(ZOO_WRAPPERS):
        hint = (" It is an rl-baselines-zoo wrapper, which sbtf does not provide yet; with the zoo's utils on your "
                "PYTHONPATH, pass --allow-wrapper {} to use it.".format(path))
    raise CLIError("env_wrapper in {} names {!r}, which is not an sbtf or gymnasium wrapper class. A settings file is "
                   "data: sbtf does not import and call other names from it. If you trust it, pass --allow-wrapper "
                   "{} (in Python: env_settings(..., allowed_wrappers=[{!r}])).{}".format(
                       settings.source, path, path, path, hint))


def wrapper_class(spec: Any, settings: Optional[EnvSettings] = None) -> Optional[Callable[[Any], Any]]:
    """
    The function that applies ``env_wrapper``: a 'module.Class' string, a ``{'module.Class': {kwargs}}`` dict, or a
    list of those (applied in order). Names resolve only to sbtf's and gymnasium's wrappers or to names in
    ``settings.allowed_wrappers``; arguments must be plain YAML data.

    :param spec: the ``env_wrapper`` hyperparameter
    :param settings: (EnvSettings) the allowed names and the source, for messages
    :return: (callable or None)
    """
    if not spec:
        return None
    settings = settings or EnvSettings()
    items = spec if isinstance(spec, list) else [spec]
    check_wrapper_count(len(items), settings.source)
    wrappers: List[Tuple[Any, Dict[str, Any]]] = []
    for item in items:
        if isinstance(item, dict) and len(item) == 1:
            path, kwargs = next(iter(item.items()))
            kwargs = kwargs or {}
        elif isinstance(item, str):
            path, kwargs = item, {}
        else:
            raise CLIError("env_wrapper in {}: expected 'module.Class', {{'module.Class': {{kwargs}}}} or a list of "
                           "those, got {}".format(settings.source, describe_value(item)))
        if not isinstance(kwargs, dict) or not _plain_kwargs(kwargs):
            raise CLIError("env_wrapper in {}: the arguments of {} must be a dict of plain values, got {}".format(
                settings.source, describe_value(path), describe_value(kwargs)))
        cls = _resolve_wrapper(str(path), settings)
        wrappers.append((cls, check_wrapper_kwargs(_wrapper_path(path), kwargs, settings.source)))

    def wrap(env: Any) -> Any:
        for cls, kwargs in wrappers:
            try:
                env = cls(env, **kwargs)
            except (TypeError, ValueError, AssertionError, KeyError, IndexError, OverflowError) as exc:
                raise ZooConfigError("env_wrapper {} in {} cannot wrap the env with the arguments {}: {}".format(
                    cls.__name__, settings.source, describe_value(kwargs), describe_value(str(exc), 300))) from exc
        return env

    return wrap


#: ``--vec-env`` choices: how the envs of a run are stepped
VEC_ENV_KINDS: Tuple[str, ...] = ("dummy", "subproc", "envpool")


def add_vec_env_argument(parser: Any) -> None:
    """The ``--vec-env`` option of ``train`` and ``optimize``."""
    parser.add_argument("--vec-env", default="dummy", choices=VEC_ENV_KINDS,
                        help="how the training envs are stepped: dummy (one process, default), subproc (one process "
                             "per env), envpool (EnvPool's C++ envs in threads; needs the envpool extra)")


def check_vec_env(kind: str, env_id: str, algo: str = "") -> None:
    """
    Refuse a ``--vec-env`` that cannot be used, in one line, before anything is built: envpool not installed, an env
    id that EnvPool does not have, HER (which wraps one Python env itself) with anything but ``dummy``.

    :param kind: (str) one of :data:`VEC_ENV_KINDS`
    :param env_id: (str) the env id
    :param algo: (str) the algorithm's command-line name
    """
    if kind not in VEC_ENV_KINDS:
        raise CLIError("--vec-env must be one of {}, got {!r}".format(", ".join(VEC_ENV_KINDS), kind))
    if algo == "her" and kind != "dummy":
        raise CLIError("her wraps one goal env itself: --vec-env {} is not available for it (use dummy)".format(kind))
    if kind != "envpool":
        return
    try:
        # a probe: the import only checks that EnvPool is installed; the name is not used (del: for pyflakes too)
        import envpool  # noqa: F401  # pylint: disable=import-outside-toplevel,unused-import
        del envpool
    except ImportError as exc:
        raise CLIError("--vec-env envpool needs EnvPool, which is not installed: pip install 'sbtf[envpool]' "
                       "(or use --vec-env subproc)", exit_code=1) from exc
    from sbtf.common.vec_env.envpool_vec_env import envpool_task_id  # pylint: disable=import-outside-toplevel

    try:
        envpool_task_id(env_id)
    except ValueError as exc:
        raise CLIError("--vec-env envpool: {} (use --vec-env dummy or subproc for this env)".format(
            exc_text(exc)), exit_code=1) from exc


def _make_envpool_env(env_id: str, n_envs: int, seed: Optional[int], settings: EnvSettings,
                      monitor_dir: Optional[str], render_mode: Optional[str]) -> Any:
    """EnvPool's envs of an id; ``env_kwargs`` are EnvPool options, Atari stacks its own ``frame_stack`` frames."""
    from sbtf.common.vec_env.envpool_vec_env import EnvPoolVecEnv  # pylint: disable=import-outside-toplevel

    if settings.env_wrapper:
        raise CLIError("--vec-env envpool cannot apply env_wrapper {} (EnvPool's envs run in C++): remove it from {} "
                       "or use --vec-env dummy/subproc".format(describe_value(settings.env_wrapper), settings.source))
    if render_mode is not None:
        raise CLIError("--vec-env envpool does not render: --gif, --video and --render need --vec-env dummy")
    from sbtf.common.vec_env.envpool_vec_env import envpool_task_id  # pylint: disable=import-outside-toplevel

    env_kwargs = dict(settings.env_kwargs)
    try:
        if envpool_task_id(env_id)[1]:  # Atari: EnvPool stacks the frames (wrap_vec_env adds no VecFrameStack)
            env_kwargs.setdefault("stack_num", max(int(settings.frame_stack), 1))
        return EnvPoolVecEnv(env_id, n_envs=n_envs, seed=seed, env_kwargs=env_kwargs, monitor_dir=monitor_dir)
    except (ImportError, ValueError, TypeError, RuntimeError) as exc:
        raise CLIError("cannot make {} with EnvPool: {}".format(env_id, exc_text(exc)), exit_code=1) from exc


def make_env(env_id: str, n_envs: int, seed: Optional[int], settings: EnvSettings, monitor_dir: Optional[str] = None,
             render_mode: Optional[str] = None, vec_env: str = "dummy") -> Any:
    """
    The monitored VecEnv of an env id (without VecNormalize / VecFrameStack), with a one-line error when the
    env cannot be made.

    :param env_id: (str) a registered env id
    :param n_envs: (int) number of envs
    :param seed: (int) env i is seeded with seed + i
    :param settings: (EnvSettings) env_wrapper and env_kwargs
    :param monitor_dir: (str) folder of the Monitor files (None: no files)
    :param render_mode: (str) gymnasium render mode
    :param vec_env: (str) ``dummy`` (DummyVecEnv), ``subproc`` (SubprocVecEnv) or ``envpool`` (EnvPoolVecEnv)
    :return: (VecEnv)
    """
    from sbtf.common.cmd_util import make_vec_env  # pylint: disable=import-outside-toplevel
    from sbtf.common.vec_env import SubprocVecEnv  # pylint: disable=import-outside-toplevel

    if vec_env == "envpool":
        return _make_envpool_env(env_id, n_envs, seed, settings, monitor_dir, render_mode)
    if is_atari_id(env_id):
        return make_atari_vec_env(env_id, n_envs, seed, settings, monitor_dir, render_mode,
                                  subproc=vec_env == "subproc")
    env_kwargs = dict(settings.env_kwargs)
    if render_mode is not None:
        env_kwargs["render_mode"] = render_mode
    wrap = wrapper_class(settings.env_wrapper, settings)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*render_mode.*")
            return make_vec_env(env_id, n_envs=n_envs, seed=seed, monitor_dir=monitor_dir, wrapper_class=wrap,
                                env_kwargs=env_kwargs, vec_env_cls=SubprocVecEnv if vec_env == "subproc" else None)
    except gymnasium.error.DependencyNotInstalled as exc:
        raise CLIError("cannot make {}: {}".format(env_id, exc), exit_code=1) from exc
    except ModuleNotFoundError as exc:
        if env_id in SBTF_ENVS and (exc.name or "").startswith("sbtf"):
            raise CLIError("env {} needs {}, which this version of sbtf does not have".format(
                env_id, SBTF_ENVS[env_id].split(":")[0])) from exc
        raise CLIError("cannot make {}: {}".format(env_id, exc), exit_code=1) from exc
    except TypeError as exc:
        if env_kwargs:
            raise CLIError("cannot make {} with env_kwargs {}: {}".format(env_id, describe_value(env_kwargs),
                                                                        exc_text(exc))) from exc
        raise


def make_atari_vec_env(env_id: str, n_envs: int, seed: Optional[int], settings: EnvSettings,
                       monitor_dir: Optional[str] = None, render_mode: Optional[str] = None,
                       subproc: bool = False) -> Any:
    """The zoo's Atari env: ``make_atari_env`` (no-op reset, frame skip, Monitor, DeepMind wrappers), without frame
    stacking (:func:`wrap_vec_env` adds ``frame_stack``); a CLIError when it cannot be made."""
    from sbtf.common.cmd_util import make_atari_env  # pylint: disable=import-outside-toplevel

    if settings.env_wrapper or settings.env_kwargs:
        raise CLIError("{} is an Atari env: it gets the DeepMind wrappers of make_atari_env, and env_wrapper / "
                       "env_kwargs in {} are not used for it; remove them".format(env_id, settings.source))
    if render_mode is not None:
        raise CLIError("--gif, --video and --render are not available for Atari agents (the DeepMind-wrapped env is "
                       "made without a render mode)")
    try:
        return make_atari_env(env_id, num_env=n_envs, seed=0 if seed is None else seed, monitor_dir=monitor_dir,
                              use_subprocess=subproc)
    except (ImportError, gymnasium.error.Error) as exc:
        raise CLIError("cannot make {}: {}".format(env_id, exc_text(exc)), exit_code=1) from exc


def wrap_vec_env(venv: Any, settings: EnvSettings, gamma: Optional[float] = None, training: bool = True) -> Any:
    """
    Add VecNormalize (when normalize is on) and VecFrameStack (when frame_stack > 0), as at training time.

    :param venv: (VecEnv)
    :param settings: (EnvSettings)
    :param gamma: (float) the algorithm's discount, used for reward normalisation unless normalize gives one
    :param training: (bool) False: an evaluation env (statistics frozen, rewards not normalised)
    :return: (VecEnv)
    """

    if settings.normalize:
        kwargs = dict(settings.normalize_kwargs)
        if gamma is not None and "gamma" not in kwargs:
            kwargs["gamma"] = float(gamma)
        if not training:
            kwargs.update(training=False, norm_reward=False)
        venv = VecNormalize(venv, **kwargs)
    if settings.frame_stack > 0 and not _stacks_own_frames(venv):
        venv = VecFrameStack(venv, settings.frame_stack)
    return venv


def _stacks_own_frames(venv: Any) -> bool:
    """Whether ``venv`` stacks frames itself (EnvPool's Atari envs: ``stack_num``)."""
    from sbtf.common.vec_env.envpool_vec_env import EnvPoolVecEnv  # pylint: disable=import-outside-toplevel

    return isinstance(venv, EnvPoolVecEnv) and venv.is_atari
