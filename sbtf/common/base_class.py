"""Model base classes with the stable-baselines 2.x API.

``BaseRLModel`` owns what every algorithm shares: the environment, seeding, callbacks,
saving/loading (sbtf format, see ``save_util``; stable-baselines 2.x files and exports through the
plugins registered in ``sbtf.common.fileio.formats``), parameters by SB2 name, ``predict`` rules, ``pretrain``
(behaviour cloning) and TensorBoard logging.
"""
from __future__ import annotations

import contextlib
import functools
import glob
import inspect
import os
import warnings
from abc import ABC, abstractmethod
from collections import deque
from typing import TYPE_CHECKING, Any, Dict, Iterator, Optional, Tuple

import gymnasium as gym
import numpy as np
import tensorflow as tf

from sbtf.common.algo.model_files import ModelFilesMixin
from sbtf.common.algo.pretrain import PretrainMixin
from sbtf.common.compile.fast_call import gradient_step_plan
from sbtf.common.policies import ActorCriticPolicy, BasePolicy, get_policy_from_name
from sbtf.common.nn.sde import squashed_neglogp_np

if TYPE_CHECKING:
    from sbtf.common.callbacks import BaseCallback


class SetVerbosity:
    """Context manager kept for SB2 compatibility: sets TF's log level from ``verbose`` (2 = TF debug)."""

    def __init__(self, verbose: int = 0):
        self.verbose = verbose

    def __enter__(self):
        self._old_tf_level = os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0")
        if self.verbose >= 2:
            os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"

    def __exit__(self, exc_type, exc_val, exc_tb):
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = self._old_tf_level


class TensorboardLogger:
    """What ``TensorboardWriter`` yields: a ``tf.summary`` writer with ``add_scalar``/``add_histogram``."""

    def __init__(self, log_dir: str):
        self.log_dir = log_dir
        self.writer = tf.summary.create_file_writer(log_dir)

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        with self.writer.as_default():
            tf.summary.scalar(tag, float(value), step=int(step))

    def add_scalars(self, values: dict, step: int) -> None:
        with self.writer.as_default():
            for tag, value in values.items():
                tf.summary.scalar(tag, float(value), step=int(step))

    def add_histogram(self, tag: str, values, step: int) -> None:
        with self.writer.as_default():
            tf.summary.histogram(tag, values, step=int(step))

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class TensorboardWriter:
    """
    SB2's ``TensorboardWriter(graph, tensorboard_log_path, tb_log_name, new_tb_log=True)`` context manager.

    Writes to ``<tensorboard_log_path>/<tb_log_name>_<N>`` (a new N for a new run, the last one when
    continuing); yields a ``TensorboardLogger`` or None when no path is set. ``graph`` is ignored.
    """

    def __init__(self, graph, tensorboard_log_path: Optional[str], tb_log_name: str, new_tb_log: bool = True):
        self.tensorboard_log_path = tensorboard_log_path
        self.tb_log_name = tb_log_name
        self.new_tb_log = new_tb_log
        self.writer: Optional[TensorboardLogger] = None

    def _get_latest_run_id(self) -> int:
        max_run_id = 0
        for path in glob.glob(f"{self.tensorboard_log_path}/{glob.escape(self.tb_log_name)}_[0-9]*"):
            suffix = path.split("_")[-1]
            if suffix.isdigit():
                max_run_id = max(max_run_id, int(suffix))
        return max_run_id

    def __enter__(self) -> Optional[TensorboardLogger]:
        if self.tensorboard_log_path is not None:
            latest = self._get_latest_run_id()
            if self.new_tb_log:
                latest += 1
            self.writer = TensorboardLogger(os.path.join(self.tensorboard_log_path, f"{self.tb_log_name}_{latest}"))
        return self.writer

    def __exit__(self, exc_type, exc_val, exc_tb):
        if self.writer is not None:
            self.writer.flush()
            self.writer.close()


def time_feature_hint(expected_shape: tuple, given_shape: tuple) -> str:
    """
    A sentence for observation-shape errors when a vector observation has one entry fewer than the model expects:
    the model was most likely trained with a time feature (rl-baselines-zoo's ``TimeFeatureWrapper``). Empty
    otherwise.

    :param expected_shape: (tuple) the model's observation shape
    :param given_shape: (tuple) the shape of one observation that was given (or the env's observation shape)
    :return: (str) the hint, starting with a space, or ""
    """
    expected_shape, given_shape = tuple(expected_shape), tuple(given_shape)
    if len(expected_shape) != 1 or len(given_shape) != 1 or given_shape[0] != expected_shape[0] - 1:
        return ""
    return (f" The model expects one more observation entry ({expected_shape[0]}) than it was given "
            f"({given_shape[0]}): a time feature is probably missing. Models trained with a TimeFeatureWrapper "
            "(rl-baselines-zoo's utils.wrappers.TimeFeatureWrapper, e.g. its BipedalWalker agents) need it when they "
            "act: wrap the env with sbtf.common.wrappers.TimeFeatureWrapper (or load a zoo folder with "
            "sbtf.zoo.load_zoo_agent, which applies it).")


def _is_vectorized_observation(observation: np.ndarray, observation_space: gym.Space) -> bool:
    """
    Whether ``observation`` is a batch (True) or a single observation (False); raises a ValueError
    naming the expected shapes otherwise (SB2 rules).
    """
    if isinstance(observation_space, gym.spaces.Box):
        if observation.shape == observation_space.shape:
            return False
        if observation.shape[1:] == observation_space.shape:
            return True
        raise ValueError(f"Error: Unexpected observation shape {observation.shape} for Box environment, please use "
                         f"{observation_space.shape} or (n_env, {', '.join(map(str, observation_space.shape))}) "
                         "for the observation shape."
                         + time_feature_hint(observation_space.shape, observation.shape[-1:]))
    if isinstance(observation_space, gym.spaces.Discrete):
        if observation.shape == ():
            return False
        if len(observation.shape) == 1:
            return True
        raise ValueError(f"Error: Unexpected observation shape {observation.shape} for Discrete environment, please "
                         "use () or (n_env,) for the observation shape.")
    if isinstance(observation_space, gym.spaces.MultiDiscrete):
        n = len(observation_space.nvec)
        if observation.shape == (n,):
            return False
        if len(observation.shape) == 2 and observation.shape[1] == n:
            return True
        raise ValueError(f"Error: Unexpected observation shape {observation.shape} for MultiDiscrete environment, "
                         f"please use ({n},) or (n_env, {n}) for the observation shape.")
    if isinstance(observation_space, gym.spaces.MultiBinary):
        n = observation_space.n
        if observation.shape == (n,):
            return False
        if len(observation.shape) == 2 and observation.shape[1] == n:
            return True
        raise ValueError(f"Error: Unexpected observation shape {observation.shape} for MultiBinary environment, "
                         f"please use ({n},) or (n_env, {n}) for the observation shape.")
    raise ValueError(f"Error: Cannot determine if the observation is vectorized with the space type "
                     f"{observation_space}.")


def resolve_episode_start(mask, episode_start):
    """
    SB3's ``episode_start`` is SB2's ``mask``: the done flags of the previous step, which reset a recurrent state
    before the next observation is processed. Returns the one that was given.

    :param mask: (np.ndarray or None) SB2's name
    :param episode_start: (np.ndarray or None) stable-baselines3's name
    :return: (np.ndarray or None) the flags
    """
    if episode_start is None:
        return mask
    if mask is not None and not np.array_equal(np.asarray(mask, dtype=bool), np.asarray(episode_start, dtype=bool)):
        raise ValueError("Error: mask (stable-baselines 2) and episode_start (stable-baselines3) are the same flags "
                         "under two names, and different values were given; pass one of them.")
    return episode_start


def _accepting_episode_start(method):
    """
    ``method`` (a model's ``predict`` or ``action_probability`` with SB2's ``mask`` parameter) extended with a
    keyword-only ``episode_start`` (SB3's name of ``mask``), unless it already has one.
    """
    signature = inspect.signature(method)
    if "episode_start" in signature.parameters or "mask" not in signature.parameters:
        return method

    @functools.wraps(method)
    def with_episode_start(self, *args, episode_start=None, **kwargs):
        if episode_start is None:
            return method(self, *args, **kwargs)
        bound = signature.bind(self, *args, **kwargs)
        bound.arguments["mask"] = resolve_episode_start(bound.arguments.get("mask"), episode_start)
        return method(*bound.args, **bound.kwargs)

    parameters = list(signature.parameters.values())
    position = next((i for i, p in enumerate(parameters) if p.kind is inspect.Parameter.VAR_KEYWORD), len(parameters))
    parameters.insert(position, inspect.Parameter("episode_start", inspect.Parameter.KEYWORD_ONLY, default=None))
    with_episode_start.__signature__ = signature.replace(parameters=parameters)
    return with_episode_start


@contextlib.contextmanager
def _logging_to(logger_: Any) -> Iterator[None]:
    """
    Within the block, ``sbtf.logger``'s functions write to ``logger_`` (a model's ``set_logger``); None: no change.
    """
    from sbtf import logger as sbtf_logger

    if logger_ is None:
        yield
        return
    previous = sbtf_logger.Logger.CURRENT
    sbtf_logger.Logger.CURRENT = logger_
    try:
        yield
    finally:
        sbtf_logger.Logger.CURRENT = previous


def _unsupported_space_error(algo: str, space: gym.Space, kind: str, supported: str) -> NotImplementedError:
    return NotImplementedError(f"Error: {algo} does not support {kind} space {space!r} "
                               f"({type(space).__name__}); supported {kind} spaces: {supported}.")


class BaseRLModel(ModelFilesMixin, PretrainMixin, ABC):
    """
    The base RL model (SB2 signature).

    :param policy: (BasePolicy or str) policy class or registered name
    :param env: (gymnasium.Env, old gym env, VecEnv or str) the environment (None when loading)
    :param verbose: (int) 0 none, 1 training information, 2 debug
    :param requires_vec_env: (bool) wrap a single env in a DummyVecEnv
    :param policy_base: (BasePolicy) the base policy class used to look names up
    :param policy_kwargs: (dict) extra arguments for the policy
    :param seed: (int) seed for python, numpy, TF and the env
    :param n_cpu_tf_sess: (int) threads for TensorFlow ops (set once per process, before TF starts)
    """

    #: hyperparameters written by save() (in addition to the common ones), name -> declared type
    #: (``sbtf.common.fileio.model_schema``); a file is read against it
    _save_schema: dict = {}

    #: constructor arguments that model files deliberately do not store, each with the reason (merged along the
    #: class hierarchy by :meth:`_unsaved_arguments`); every other constructor argument must be in the data schema
    #: (``tests/test_save_schema_roundtrip.py`` checks every registered algorithm, so a new argument cannot be lost on
    #: ``load`` silently)
    _not_saved_arguments: Dict[str, str] = {
        "env": "the environment is given again to load(path, env=...) or set_env()",
        "_init_setup_model": "load() builds the networks itself",
        "tensorboard_log": "a folder of the machine that trained (stable-baselines 2 did not store it); pass "
                           "tensorboard_log= to load()",
        "full_tensorboard_log": "a logging option of the training run (stable-baselines 2 did not store it)",
        "device": "TensorFlow places the variables (no device to restore)",
    }

    @classmethod
    def _unsaved_arguments(cls) -> Dict[str, str]:
        """The constructor arguments the class's files do not store, with the reasons (``_not_saved_arguments``)."""
        merged: Dict[str, str] = {}
        for klass in reversed(cls.__mro__):
            merged.update(klass.__dict__.get("_not_saved_arguments", {}))
        return merged

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        from sbtf.common.registry import register_class

        register_class(cls, "algorithm")  # HER files name the wrapped model's class
        # every predict / action_probability also takes SB3's ``episode_start=`` (an alias of SB2's ``mask``)
        for name in ("predict", "action_probability"):
            if name in cls.__dict__:
                setattr(cls, name, _accepting_episode_start(cls.__dict__[name]))
    #: observation / action space types the algorithm accepts
    _supported_action_spaces: tuple = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete,
                                       gym.spaces.MultiBinary)

    #: stable-baselines3's model API: ``model.policy`` is the policy object (stable-baselines 2's: the policy class).
    #: Set by the stable-baselines3 / sb3-contrib bases; the class is always ``model.policy_class``.
    _policy_is_object: bool = False

    @property
    def policy(self):
        """The policy: its class for stable-baselines 2's algorithms (as SB2's ``model.policy``), the policy object
        for stable-baselines3's and sb3-contrib's (as SB3's ``model.policy``; the class is ``policy_class``)."""
        if self._policy_is_object:
            return self.__dict__.get("policy_tf")
        return self.__dict__.get("policy_class")

    @policy.setter
    def policy(self, value) -> None:
        if value is None or isinstance(value, (type, str)):
            self.policy_class = value
        else:
            self.policy_tf = value

    @property
    def ep_info_buffer(self) -> Optional[deque]:
        """stable-baselines3's name of ``ep_info_buf`` (the same deque): the Monitor infos ``{"r", "l", "t"}`` of the
        last episodes (``stats_window_size`` of them; None before the first ``learn()``)."""
        return self.ep_info_buf

    @ep_info_buffer.setter
    def ep_info_buffer(self, value: Optional[deque]) -> None:
        self.ep_info_buf = value

    @property
    def ep_success_buffer(self) -> Optional[deque]:
        """stable-baselines3's ``ep_success_buffer``: the ``info["is_success"]`` of the last episodes that reported
        one, at their end (as long as ``ep_info_buffer``; None before the first ``learn()``)."""
        infos = self.ep_info_buf
        if infos is None:
            return None
        successes = self.__dict__.get("_ep_success_buf")
        if successes is None or successes.maxlen != infos.maxlen:
            successes = self._ep_success_buf = deque(successes or (), maxlen=infos.maxlen)
        return successes

    @ep_success_buffer.setter
    def ep_success_buffer(self, value: Optional[deque]) -> None:
        self._ep_success_buf = value

    def _record_episode_end(self, info: Any) -> None:
        """At the end of an env's episode: keep its ``info["is_success"]`` in ``ep_success_buffer``."""
        success = info.get("is_success") if isinstance(info, dict) else None
        if success is not None and self.ep_success_buffer is not None:
            self.ep_success_buffer.append(success)

    def __init__(self, policy, env, verbose: int = 0, *, requires_vec_env: bool = True, policy_base=None,
                 policy_kwargs: Optional[dict] = None, seed: Optional[int] = None,
                 n_cpu_tf_sess: Optional[int] = None):
        if isinstance(policy, str) and policy_base is not None:
            self.policy_class = get_policy_from_name(policy_base, policy)
        else:
            self.policy_class = policy
        self.env = None
        self.verbose = verbose
        self._requires_vec_env = requires_vec_env
        self.policy_kwargs = {} if policy_kwargs is None else dict(policy_kwargs)
        if "use_sde" in self.policy_kwargs:  # gSDE is an algorithm argument (sbtf.common.nn.sde)
            import inspect

            from sbtf.common.nn.sde import sde_kwarg_error
            raise sde_kwarg_error(type(self).__name__,
                                  has_sde="use_sde" in inspect.signature(type(self).__init__).parameters)
        self.observation_space: Optional[gym.Space] = None
        self.action_space: Optional[gym.Space] = None
        self.n_envs: Optional[int] = None
        self._vectorize_action = False
        self.num_timesteps = 0
        self.graph = None
        self.sess = None
        self.params = None
        self.seed = seed
        self.n_cpu_tf_sess = n_cpu_tf_sess
        self.episode_reward = None
        self.ep_info_buf: Optional[deque] = None
        self.policy_tf: Optional[BasePolicy] = None
        self._apply_n_cpu(n_cpu_tf_sess)
        if env is not None:
            self._attach_env(env)

    # ------------------------------------------------------------------ environment
    def _make_vec_env(self, env):
        """Turn an env id / gymnasium env / old gym env / VecEnv into a VecEnv."""
        from sbtf.common.vec_env import DummyVecEnv, VecEnv
        from sbtf.common.envs.gym_compat import wrap_env

        if isinstance(env, VecEnv):
            return env
        if isinstance(env, str):
            if self.verbose >= 1:
                print(f"Creating environment from the given name {env!r}, wrapped in a DummyVecEnv.")
            env_id = env
            from sbtf.common.cmd_util import render_mode_kwargs  # frames for env.render(mode='rgb_array'), as in SB2
            make_kwargs = render_mode_kwargs(env_id)
            return DummyVecEnv([lambda: wrap_env(env_id, **make_kwargs)])
        single = wrap_env(env)
        if self.verbose >= 1:
            print("Wrapping the env in a DummyVecEnv.")
        return DummyVecEnv([lambda: single])

    def _attach_env(self, env) -> None:
        env = self._make_vec_env(env)
        observation_space = _model_observation_space(env.observation_space)
        self._check_spaces(observation_space, env.action_space)
        self.env = self._internal_env(env)
        self.observation_space = observation_space
        self.action_space = env.action_space
        self.n_envs = env.num_envs

    @staticmethod
    def _internal_env(env):
        """The VecEnv the algorithm steps: channel-first images (stable-baselines3's layout, see
        ``sbtf.common.vec_env.vec_transpose.channels_last_space``) behind ``VecChannelsLast`` (sbtf's policies are
        channel-last), a Dict-observation env behind ``VecPackDictObs`` (flat float32 rows, see
        ``sbtf.common.envs.dict_obs``), any other env as it is. ``get_env()`` returns the user's env."""
        from sbtf.common.vec_env.vec_transpose import VecChannelsLast, channels_last_space

        if channels_last_space(env.observation_space) is not None:
            env = VecChannelsLast(env)
        if isinstance(env.observation_space, gym.spaces.Dict):
            from sbtf.common.vec_env.vec_pack_dict_obs import VecPackDictObs

            return VecPackDictObs(env)
        return env

    def _check_spaces(self, observation_space: gym.Space, action_space: gym.Space) -> None:
        if not isinstance(action_space, self._supported_action_spaces):
            names = ", ".join(s.__name__ for s in self._supported_action_spaces)
            raise _unsupported_space_error(type(self).__name__, action_space, "action", names)

    def _check_policy_class(self, policy_base: type, example: Optional[str] = None, needs_spaces: bool = False) -> None:
        """
        Refuse a policy that is not a subclass of ``policy_base`` (and, with ``needs_spaces``, a model that has no
        spaces to build its networks from).

        :param policy_base: (type) the algorithm's policy base class
        :param example: (str) a registered policy name the error suggests (None: no suggestion)
        :param needs_spaces: (bool) also require the observation and action spaces
        """
        name = type(self).__name__
        if not (isinstance(self.policy_class, type) and issubclass(self.policy_class, policy_base)):
            hint = f" (e.g. {example!r})" if example else ""
            raise ValueError(f"Error: the input policy for the {name} model must be a subclass of "
                             f"{policy_base.__module__}.{policy_base.__name__}{hint}, got {self.policy_class!r}.")
        if needs_spaces and (self.observation_space is None or self.action_space is None):
            raise ValueError(f"Error: {name} needs an environment (or the spaces of a saved model) to build its "
                             "networks.")

    def _apply_n_cpu(self, n_cpu: Optional[int]) -> None:
        if n_cpu is None:
            return
        try:
            tf.config.threading.set_intra_op_parallelism_threads(int(n_cpu))
            tf.config.threading.set_inter_op_parallelism_threads(int(n_cpu))
        except RuntimeError:
            if self.verbose >= 1:
                warnings.warn("n_cpu_tf_sess could not be applied: TensorFlow was already initialised in this "
                              "process (set it on the first model you create).")

    def get_env(self):
        """Returns the current environment (can be None if not defined)."""
        from sbtf.common.vec_env.vec_pack_dict_obs import VecPackDictObs
        from sbtf.common.vec_env.vec_transpose import VecChannelsLast

        env = self.env
        while isinstance(env, (VecPackDictObs, VecChannelsLast)):  # the model's own wrappers (_internal_env)
            env = env.venv
        return env

    def get_vec_normalize_env(self):
        """The ``VecNormalize`` wrapper of the training env, if any."""
        from sbtf.common.vec_env import unwrap_vec_normalize
        return unwrap_vec_normalize(self.env) if self.env is not None else None

    def set_env(self, env, force_reset: bool = True) -> None:
        """
        Checks the validity of the environment, and if it is coherent, set it as the current environment.

        :param env: (gymnasium.Env, VecEnv or str) the new environment
        :param force_reset: (bool) stable-baselines3's argument: the next ``learn()`` starts with a reset of the env
            (sbtf's ``learn()`` always resets the env it starts with)
        """
        if env is None and self.env is None:  # learn() says what to do if it is called without an env
            return
        if env is None:
            raise ValueError("Error: trying to replace the current environment with None")
        env = self._make_vec_env(env)
        observation_space = _model_observation_space(env.observation_space)
        obs_differs = (self.observation_space is not None
                       and not _spaces_equal(observation_space, self.observation_space))
        act_differs = self.action_space is not None and not _spaces_equal(env.action_space, self.action_space)
        if obs_differs or act_differs:
            from sbtf.common.space_checks import env_space_mismatch_message

            raise ValueError(env_space_mismatch_message(
                env.observation_space, self.observation_space, env.action_space, self.action_space, obs_differs,
                act_differs, time_feature_hint(getattr(self.observation_space, "shape", None) or (),
                                               getattr(env.observation_space, "shape", None) or ())))
        if self._requires_same_n_envs() and self.n_envs is not None and env.num_envs != self.n_envs:
            raise ValueError(f"Error: the environment passed must have the same number of environments as the model "
                             f"was trained on ({self.n_envs}, got {env.num_envs}); this is required by recurrent "
                             "policies.")
        self.env = self._internal_env(env)
        self.observation_space = observation_space
        self.action_space = env.action_space
        self.n_envs = env.num_envs
        self.episode_reward = None
        self.ep_info_buf = None
        self._ep_success_buf = None
        self._on_env_changed()

    def _requires_same_n_envs(self) -> bool:
        return bool(self.policy_class is not None and isinstance(self.policy_class, type)
                    and getattr(self.policy_class, "recurrent", False))

    def _on_env_changed(self) -> None:
        """Hook for algorithms that keep per-env state (runners, batch sizes)."""

    # ------------------------------------------------------------------ seeding
    def set_random_seed(self, seed: Optional[int]) -> None:
        """
        Seed python, numpy and TF random generators, the env and its action space.

        :param seed: (int) the seed; None does nothing
        """
        if seed is None:
            return
        from sbtf.common.misc_util import set_global_seeds

        set_global_seeds(seed)
        if self.env is not None:
            self.env.seed(seed)
            self.env.action_space.seed(seed)
        if self.action_space is not None:
            self.action_space.seed(seed)
        if self.policy_tf is not None:
            self._reseed_policy(seed)

    #: attributes holding the model's own TF random generators (``_new_generator``), reset by ``set_random_seed``
    _generator_attrs: Tuple[str, ...] = ()

    @staticmethod
    def _new_generator() -> tf.random.Generator:
        """A TF random generator seeded from NumPy's global generator (name its attribute in ``_generator_attrs``)."""
        return tf.random.Generator.from_seed(int(np.random.randint(0, 2 ** 31 - 1)))

    def _reseed_policy(self, seed: int) -> None:
        for policy in self._policies():
            policy.np_random = np.random.default_rng(seed)
            if hasattr(policy, "_tf_gen"):
                policy._tf_gen.reset_from_seed(seed)
        for attr in self._generator_attrs:
            generator = getattr(self, attr, None)
            if generator is not None:
                generator.reset_from_seed(seed)

    def _policies(self) -> list:
        return [self.policy_tf] if self.policy_tf is not None else []

    # ------------------------------------------------------------------ abstract API
    @abstractmethod
    def setup_model(self):
        """Create all the functions and tensorflow graphs necessary to train the model."""

    @abstractmethod
    def learn(self, total_timesteps, callback=None, log_interval=100, tb_log_name="run", reset_num_timesteps=True):
        """Return a trained model."""

    @abstractmethod
    def predict(self, observation, state=None, mask=None, deterministic=False, *, episode_start=None):
        """Get the model's action from an observation: (action, next state). ``episode_start`` (stable-baselines3's
        name) is an alias of ``mask``; every subclass's ``predict`` takes it."""

    @abstractmethod
    def action_probability(self, observation, state=None, mask=None, actions=None, logp=False, *,
                           episode_start=None):
        """The action probability for an observation (see SB2 docs); ``episode_start`` is an alias of ``mask``."""

    # ------------------------------------------------------------------ learning helpers
    @contextlib.contextmanager
    def _learning(self, callback, total_timesteps: int, tb_log_name: str, reset_num_timesteps: bool,
                  progress_bar: bool) -> Iterator[Tuple["BaseCallback", Optional[TensorboardLogger]]]:
        """
        The frame of ``learn()``: reset the step count (when asked), bind the callback, apply the verbosity and open
        the TensorBoard writer for the body, after checking that there is an environment.

        :return: (BaseCallback, TensorboardLogger) the callback and the writer (None without ``tensorboard_log``)
        """
        from sbtf.common.arg_checks import check_total_timesteps

        check_total_timesteps(total_timesteps)
        new_tb_log = self._init_num_timesteps(reset_num_timesteps)
        with _logging_to(self.__dict__.get("_custom_logger")):
            callback = self._init_callback(callback, progress_bar, total_timesteps)
            with SetVerbosity(self.verbose), TensorboardWriter(self.graph, self.tensorboard_log, tb_log_name,
                                                               new_tb_log) as writer, \
                    gradient_step_plan(self._planned_gradient_steps(int(total_timesteps))):
                self._setup_learn()
                yield callback, writer

    def _planned_gradient_steps(self, total_timesteps: int) -> Optional[int]:
        """
        How many gradient steps (minibatch updates) ``learn(total_timesteps)`` will run, or None when unknown. Train
        steps XLA-compile only for plans of ``sbtf.common.compile.fast_call.XLA_MIN_GRADIENT_STEPS`` or more:
        compilation costs seconds and pays back only over many steps (docs/benchmarks.md, "When sbtf uses XLA").
        """
        return None

    def _setup_learn(self) -> None:
        if self.env is None:
            raise ValueError("Error: this model has no environment to train on (it was loaded or made without one): "
                             "pass env= to load(), or call model.set_env(env) before learn().")
        if self.episode_reward is None:
            self.episode_reward = np.zeros((self.n_envs,))
        if self.ep_info_buf is None:
            self.ep_info_buf = deque(maxlen=100)

    def _init_num_timesteps(self, reset_num_timesteps: bool = True) -> bool:
        if reset_num_timesteps:
            self.num_timesteps = 0
        return self.num_timesteps == 0

    def _init_callback(self, callback, progress_bar: bool = False, total_timesteps: Optional[int] = None):
        """Turn None / a function / a list / a BaseCallback into one BaseCallback bound to this model."""
        from sbtf.common.callbacks import BaseCallback, CallbackList, ConvertCallback

        if isinstance(callback, list):
            callback = CallbackList(callback)
        if not isinstance(callback, BaseCallback):
            callback = ConvertCallback(callback)
        if progress_bar:
            from sbtf.common.callbacks import ProgressBarCallback
            callback = CallbackList([callback, ProgressBarCallback()])
        self._total_timesteps = total_timesteps
        callback.init_callback(self)
        return callback

    def _update_info_buffer(self, infos: list, dones: Optional[np.ndarray] = None) -> None:
        for info in infos:
            maybe_ep_info = info.get("episode")
            if maybe_ep_info is not None:
                self.ep_info_buf.append(maybe_ep_info)

    # ------------------------------------------------------------------ predict helpers
    @staticmethod
    def _is_vectorized_observation(observation, observation_space) -> bool:
        return _is_vectorized_observation(np.asarray(observation), observation_space)

    def _check_obs(self, observation) -> tuple[np.ndarray, bool]:
        if self.observation_space is None:
            raise ValueError("Error: the model has no observation space; it was not built.")
        from sbtf.common.vec_env.vec_transpose import observation_to_channels_last

        observation = observation_to_channels_last(observation, self.observation_space)  # SB3's channel-first images
        if isinstance(self.observation_space, gym.spaces.Dict):
            from sbtf.common.envs.dict_obs import layout_of

            layout = layout_of(self.observation_space)
            if not isinstance(observation, dict):
                raise ValueError(f"Error: the model takes Dict observations with keys {layout.keys}; got "
                                 f"{type(observation).__name__}.")
            return layout.pack(observation), layout.is_batched(observation)
        observation = np.asarray(observation)
        vectorized = _is_vectorized_observation(observation, self.observation_space)
        return observation.reshape((-1,) + self.observation_space.shape), vectorized


def _model_observation_space(space: gym.Space) -> gym.Space:
    """The observation space a model and its policy use for an env's ``space``: channel-last when the env's images
    are channel-first (stable-baselines3's layout, ``VecTransposeImage``'s output), else ``space`` itself."""
    from sbtf.common.vec_env.vec_transpose import channels_last_space

    return channels_last_space(space) or space


def _spaces_equal(a: gym.Space, b: gym.Space) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, gym.spaces.Box):
        # old gym saved unbounded Box limits as +-float32 max, gymnasium uses +-inf: treat them as equal
        big = float(np.finfo(np.float32).max)

        def bound(x):
            return np.clip(np.asarray(x, dtype=np.float64), -big, big)

        return a.shape == b.shape and np.allclose(bound(a.low), bound(b.low)) and \
            np.allclose(bound(a.high), bound(b.high))
    return a == b


class ActorCriticRLModel(BaseRLModel):
    """
    The base class for actor-critic models (A2C, ACER, ACKTR, PPO1, PPO2, TRPO, GAIL).

    :param policy: (ActorCriticPolicy or str) policy class or name
    :param env: the environment (see ``BaseRLModel``)
    :param _init_setup_model: (bool) build the networks now
    """

    def __init__(self, policy, env, _init_setup_model, verbose=0, policy_base=ActorCriticPolicy,
                 requires_vec_env=False, policy_kwargs=None, seed=None, n_cpu_tf_sess=None):
        super().__init__(policy, env, verbose=verbose, requires_vec_env=requires_vec_env, policy_base=policy_base,
                         policy_kwargs=policy_kwargs, seed=seed, n_cpu_tf_sess=n_cpu_tf_sess)
        self.sess = None
        self.initial_state = None
        self.step = None
        self.proba_step = None
        self.params = None
        self._runner = None

    def _check_spaces(self, observation_space: gym.Space, action_space: gym.Space) -> None:
        from sbtf.common.input import check_obs_space

        check_obs_space(observation_space, type(self).__name__, allow_dict=True)  # Dict: MultiInputPolicy
        super()._check_spaces(observation_space, action_space)

    def _make_policy(self, n_env: int, n_steps: int, n_batch: Optional[int]) -> ActorCriticPolicy:
        self._check_policy_class(ActorCriticPolicy)
        return self.policy_class(None, self.observation_space, self.action_space, n_env, n_steps, n_batch, reuse=False,
                           **self.policy_kwargs)

    def _bind_policy(self, policy: ActorCriticPolicy) -> None:
        """Expose the policy under the attribute names SB2 code used."""
        self.policy_tf = policy
        self.step_model = policy
        self.train_model = policy
        self.act_model = policy
        self.step = policy.step
        self.proba_step = policy.proba_step
        self.value = policy.value
        self.initial_state = policy.initial_state
        self.params = self.get_parameter_list()

    def _pretrain_output(self, obs):
        flat, _, _, _ = self.policy_tf.forward(obs)
        if isinstance(self.action_space, gym.spaces.Box):
            mode = self.policy_tf.proba_distribution_from_flat(flat).mode()
            if getattr(self.policy_tf, "squash_output", False):  # tanh(mean) rescaled to the bounds, like predict
                low = tf.constant(self.action_space.low, tf.float32)
                high = tf.constant(self.action_space.high, tf.float32)
                return low + 0.5 * (mode + 1.0) * (high - low)
            return mode
        return flat

    def _default_state_and_mask(self, n_obs: int, state, mask):
        if not getattr(self.policy_tf, "recurrent", False):
            return None, None
        if state is None:
            state = np.zeros((n_obs, self.policy_tf.state_size), dtype=np.float32)
        if mask is None:
            mask = np.zeros((n_obs,), dtype=np.float32)
        state = np.asarray(state, dtype=np.float32)
        if state.shape[0] != n_obs:
            raise ValueError(f"Error: the recurrent state has batch {state.shape[0]} but {n_obs} observations were "
                             "given; pass one observation per environment (n_envs) with its state.")
        return state, np.asarray(mask, dtype=np.float32).reshape(-1)

    def predict(self, observation, state=None, mask=None, deterministic=False, *, episode_start=None):
        """
        Get the model's action(s) from an observation.

        :param observation: (np.ndarray) the input observation (single or batch)
        :param state: (np.ndarray) the last states (recurrent policies; default zeros)
        :param mask: (np.ndarray) the last done flags (recurrent policies)
        :param deterministic: (bool) whether to return the distribution's mode
        :param episode_start: (np.ndarray) stable-baselines3's name of ``mask`` (keyword only)
        :return: (np.ndarray, np.ndarray) the action(s) and the next state (recurrent policies, else None)
        """
        mask = resolve_episode_start(mask, episode_start)
        observation, vectorized_env = self._check_obs(observation)
        state, mask = self._default_state_and_mask(observation.shape[0], state, mask)
        actions, _, states, _ = self.policy_tf.step(observation, state, mask, deterministic=deterministic)
        clipped_actions = actions
        if isinstance(self.action_space, gym.spaces.Box):
            if getattr(self.policy_tf, "squash_output", False):  # SB3: tanh outputs rescaled to the bounds
                clipped_actions = self.policy_tf.unscale_action(actions).astype(np.float32)
            else:
                clipped_actions = np.clip(actions, self.action_space.low, self.action_space.high)
        if not vectorized_env:
            clipped_actions = clipped_actions[0]
        return clipped_actions, states

    def action_probability(self, observation, state=None, mask=None, actions=None, logp=False, *,
                           episode_start=None):
        """
        If ``actions`` is None, the action distribution's parameters for the observation(s) (what ``proba_step``
        returns: softmax / [softmax per component] / sigmoid / [mean, std]); otherwise the probability (density for
        Box) of the given action(s), shaped (batch, 1) (log with ``logp=True``). The outputs come from
        ``self.proba_step`` (the policy's, unless replaced), as in SB2. A Box action batch of one is broadcast
        against the observations.

        :param episode_start: (np.ndarray) stable-baselines3's name of ``mask`` (keyword only)
        """
        mask = resolve_episode_start(mask, episode_start)
        observation, vectorized_env = self._check_obs(observation)
        state, mask = self._default_state_and_mask(observation.shape[0], state, mask)
        actions_proba = self.proba_step(observation, state, mask)
        space = self.action_space
        if actions is None:
            ret = actions_proba
            if not vectorized_env:
                ret = [p[0] for p in ret] if isinstance(ret, (list, tuple)) else ret[0]
            return ret
        actions = np.array([actions])
        prob = logprob = None
        if isinstance(space, gym.spaces.Discrete):
            actions = actions.reshape((-1,))
            self._check_action_batch(observation, actions)
            prob = actions_proba[np.arange(actions.shape[0]), actions]
        elif isinstance(space, gym.spaces.MultiDiscrete):
            actions = actions.reshape((-1, len(space.nvec)))
            self._check_action_batch(observation, actions)
            prob = np.prod([proba[np.arange(actions.shape[0]), actions[:, i]]
                            for i, proba in enumerate(actions_proba)], axis=0)
        elif isinstance(space, gym.spaces.MultiBinary):
            actions = actions.reshape((-1, space.n))
            self._check_action_batch(observation, actions)
            prob = np.prod(actions_proba * actions + (1 - actions_proba) * (1 - actions), axis=1)
        else:
            actions = actions.reshape((-1,) + space.shape)
            mean, std = (np.asarray(p, dtype=np.float64) for p in actions_proba)
            if actions.shape[0] not in (1, observation.shape[0]):
                raise ValueError(f"Error: batch sizes differ for actions ({actions.shape[0]}) and observations "
                                 f"({observation.shape[0]}); give one action per observation, or one action for "
                                 "all of them.")
            if getattr(self.policy_tf, "squash_output", False):
                # actions in the Box bounds: scaled to [-1, 1], then SB3's log_prob of the tanh-squashed Gaussian
                scaled = self.policy_tf.scale_action(actions.astype(np.float32))
                flat = np.concatenate([mean, np.log(std)], axis=-1)
                logprob = -squashed_neglogp_np(flat, scaled).astype(np.float64)
            else:
                n_elts = int(np.prod(mean.shape[1:]))
                log_normalizer = n_elts / 2 * np.log(2 * np.pi) + np.sum(np.log(std), axis=1)
                logprob = -np.sum(np.square(actions - mean) / (2 * np.square(std)), axis=1) - log_normalizer
        if logp:
            ret = logprob if logprob is not None else np.log(prob)
        else:
            ret = prob if prob is not None else np.exp(logprob)
        ret = ret.reshape((-1, 1))
        if not vectorized_env:
            ret = ret[0]
        return ret

    @staticmethod
    def _check_action_batch(observation, actions) -> None:
        if observation.shape[0] != actions.shape[0]:
            raise ValueError(f"Error: batch sizes differ for actions ({actions.shape[0]}) and observations "
                             f"({observation.shape[0]}).")


class OffPolicyRLModel(BaseRLModel):
    """
    The base class for off-policy models (DQN, SAC, TD3, DDPG).

    :param replay_buffer: (ReplayBuffer) the replay buffer (None: created by the algorithm)
    """

    def __init__(self, policy, env, replay_buffer=None, _init_setup_model=False, verbose=0, *, requires_vec_env=False,
                 policy_base=None, policy_kwargs=None, seed=None, n_cpu_tf_sess=None):
        super().__init__(policy, env, verbose=verbose, requires_vec_env=requires_vec_env, policy_base=policy_base,
                         policy_kwargs=policy_kwargs, seed=seed, n_cpu_tf_sess=n_cpu_tf_sess)
        self.replay_buffer = replay_buffer

    def save_replay_buffer(self, path) -> None:
        """Save the replay buffer (atomically) so that training can resume with its experience."""
        if self.replay_buffer is None:
            raise ValueError("Error: this model has no replay buffer yet (call learn() first).")
        self.replay_buffer.save(path)

    def load_replay_buffer(self, path, truncate_last_traj: bool = True) -> None:
        """
        Load a replay buffer saved by ``save_replay_buffer`` (no pickle: a damaged or hostile file raises a
        ``ModelFileError``, a ValueError). A ``HerReplayBuffer`` gets the model's env (for ``compute_reward``).

        :param path: (str or PathLike) the file
        :param truncate_last_traj: (bool) HerReplayBuffer: close the episodes the buffer was saved in the middle of,
            as time-limit cuts (stable-baselines3's option). sbtf's ``learn()`` starts with a reset of the env, so
            they are closed when learning starts in any case.
        """
        from sbtf.common.buffers import load_buffer
        buffer = load_buffer(path)
        # packed Dict observations saved as float32 rows (older files) are stored key by key again
        use = getattr(buffer, "use_observation_space", None)
        if use is not None and getattr(self, "observation_space", None) is not None:
            use(self.observation_space)
        attach = getattr(buffer, "attach_env", None)  # HerReplayBuffer (SB3: set_env)
        if attach is not None and getattr(self, "env", None) is not None:
            attach(self.env)
        if truncate_last_traj and hasattr(buffer, "truncate_last_trajectory"):
            buffer.truncate_last_trajectory()
        self.replay_buffer = buffer



__all__ = ["BaseRLModel", "ActorCriticRLModel", "OffPolicyRLModel", "SetVerbosity", "TensorboardWriter",
           "TensorboardLogger", "resolve_episode_start", "time_feature_hint"]

