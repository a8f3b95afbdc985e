"""``check_env``: checks that a custom environment follows the gymnasium API and suits sbtf's algorithms."""
from __future__ import annotations

import inspect
import warnings
from typing import Any, Dict

import gymnasium
import numpy as np
from gymnasium import spaces

from sbtf.common.envs.gym_compat import OldGymAPIAdapter, is_old_gym_env

__all__ = ["check_env", "OldGymAPIWarning"]

_N_NAN_CHECK_STEPS = 10


class OldGymAPIWarning(UserWarning):
    """``check_env`` was given an env written for the old gym API (sbtf adapts it; the adapted env is checked)."""


def _old_api_message(env: Any) -> str:
    """What check_env says about an old-gym-API env: that sbtf adapts it, and how to port it to gymnasium."""
    name = type(env).__name__
    kind = ("subclasses gymnasium.Env but its reset() takes no seed" if isinstance(env, gymnasium.Env)
            else "is not a gymnasium.Env")
    return ("{} uses the old gym API ({}: reset() -> obs, step() -> (obs, reward, done, info), seed()). sbtf adapts "
            "it automatically (sbtf.common.envs.gym_compat.OldGymAPIAdapter, applied by DummyVecEnv, make_vec_env and "
            "the models), so it can be used as it is; check_env goes on with the adapted env. To port it to gymnasium: "
            "subclass gymnasium.Env with gymnasium.spaces; write reset(self, *, seed=None, options=None) calling "
            "super().reset(seed=seed), drawing randomness from self.np_random instead of a seed() method, and "
            "returning (obs, info); make step() return (obs, reward, terminated, truncated, info), with "
            "truncated=True for a time-limit cut (the old info['TimeLimit.truncated']) and terminated=True for a real "
            "end of the episode.".format(name, kind))


def _is_image_space_shape(shape: tuple) -> bool:
    return len(shape) == 3


def _check_image_input(observation_space: spaces.Box, key: str = "") -> None:
    """Warn about image observations that sbtf's CNN policies would not handle as the user expects."""
    where = " (key '{}')".format(key) if key else ""
    height, width, channels = observation_space.shape
    if channels not in (1, 3, 4) and height in (1, 3, 4):
        height, width = width, channels
        warnings.warn("Your observation{} has shape {}, which looks like a channel-first image: sbtf's CNN policies "
                      "expect channel-last images (height, width, channels); transpose the observation (e.g. with "
                      "np.transpose(obs, (1, 2, 0))).".format(where, observation_space.shape))
    if observation_space.dtype != np.uint8:
        warnings.warn("It seems that your observation{} is an image but its dtype is {} instead of np.uint8: "
                      "CnnPolicy rescales only uint8 images (by 1/255). If it is not an image, use MlpPolicy; if it "
                      "is, use dtype=np.uint8 with bounds [0, 255].".format(where, observation_space.dtype))
    elif np.any(observation_space.low != 0) or np.any(observation_space.high != 255):
        warnings.warn("It seems that your observation{} is an image but its bounds are not [0, 255]: CnnPolicy "
                      "divides images by 255, so set low=0 and high=255.".format(where))
    if height < 36 or width < 36:
        warnings.warn("The observation{} is an image of shape {}; the default CnnPolicy (nature_cnn) needs images "
                      "of at least 36x36: use a custom feature extractor (cnn_extractor in policy_kwargs) or "
                      "larger images.".format(where, observation_space.shape))


def _check_unsupported_spaces(observation_space: spaces.Space, action_space: spaces.Space) -> None:
    """Warn about spaces that sbtf's algorithms do not support."""
    if isinstance(observation_space, spaces.Dict):
        nested = [key for key, sub in observation_space.spaces.items() if isinstance(sub, (spaces.Dict, spaces.Tuple))]
        if nested:
            warnings.warn("Nested observation spaces are not supported by sbtf (Dict spaces inside Dict space; "
                          "keys {}). You should flatten it to have only one level of keys. For example, "
                          "`dict(space1=dict(space2=Box(), space3=Box()), spaces4=Discrete())` is not supported but "
                          "`dict(space2=Box(), spaces3=Box(), spaces4=Discrete())` is.".format(nested))
        unsupported = [key for key, sub in observation_space.spaces.items() if key not in nested and not isinstance(
            sub, (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary))]
        if unsupported:
            warnings.warn("The Dict observation keys {} hold spaces sbtf does not support (Dict observations take Box, "
                          "Discrete, MultiDiscrete and MultiBinary keys, with policy='MultiInputPolicy').".format(
                              unsupported))
    if isinstance(observation_space, spaces.Tuple):
        warnings.warn("The observation space is a Tuple space, which sbtf's algorithms do not support: flatten it "
                      "(gymnasium.wrappers.FlattenObservation) or use a Box.")
    if isinstance(action_space, (spaces.Dict, spaces.Tuple)):
        warnings.warn("The action space is a {} space, which no sbtf algorithm supports: use Box, Discrete, "
                      "MultiDiscrete or MultiBinary.".format(type(action_space).__name__))
    for name, space in (("observation", observation_space), ("action", action_space)):
        if isinstance(space, spaces.Discrete) and int(space.start) != 0:
            warnings.warn("The {} space is Discrete(n={}, start={}): sbtf's algorithms (like stable-baselines) assume "
                          "values 0..n-1; use start=0 and shift inside the env.".format(name, space.n, space.start))
        if isinstance(space, spaces.MultiDiscrete) and np.ndim(space.nvec) > 1:
            warnings.warn("The {} space is a MultiDiscrete with a {}-d nvec: sbtf's algorithms only support 1-d nvec; "
                          "flatten it.".format(name, np.ndim(space.nvec)))


def _check_box_spaces(observation_space: spaces.Space, action_space: spaces.Space) -> None:
    """Warnings about Box bounds (action normalisation, unbounded actions, degenerate bounds)."""
    if isinstance(action_space, spaces.Box):
        low, high = action_space.low, action_space.high
        if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
            warnings.warn("The Box action space has infinite bounds ({} .. {}): algorithms that squash or clip "
                          "actions (SAC, TD3, DDPG, PPO's clipping) need finite bounds. Use a bounded action space, "
                          "ideally [-1, 1].".format(low, high))
        elif np.any(np.abs(low) != np.abs(high)) or np.any(np.abs(low) > 1) or np.any(np.abs(high) > 1):
            warnings.warn("We recommend you to use a symmetric and normalized Box action space (range=[-1, 1]), got "
                          "low={} high={}. Rescale the action inside the env (e.g. "
                          "gymnasium.wrappers.RescaleAction).".format(low, high))
        if not np.issubdtype(action_space.dtype, np.floating):
            warnings.warn("The Box action space has dtype {}; continuous actions should be floats "
                          "(dtype=np.float32).".format(action_space.dtype))
    box_spaces: Dict[str, spaces.Space] = {"": observation_space}
    if isinstance(observation_space, spaces.Dict):
        box_spaces = dict(observation_space.spaces)
    for key, space in box_spaces.items():
        if not isinstance(space, spaces.Box):
            continue
        if np.any(space.low == space.high):
            warnings.warn("The Box observation space{} has dimensions where low == high: such dimensions carry no "
                          "information.".format(" (key '{}')".format(key) if key else ""))
        if _is_image_space_shape(space.shape):
            _check_image_input(space, key)


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 200 else text[:197] + "..."


def _check_obs(obs: Any, observation_space: spaces.Space, method_name: str, warn: bool, key: str = "") -> None:
    """Check one observation against its space; raise AssertionError saying what is wrong and how to fix it."""
    where = "The observation returned by `{}()`{}".format(method_name, " (key '{}')".format(key) if key else "")
    if isinstance(observation_space, spaces.Dict):
        assert isinstance(obs, dict), "{} must be a dict for a Dict observation space, got {}".format(
            where, type(obs).__name__)
        missing = set(observation_space.spaces) - set(obs)
        extra = set(obs) - set(observation_space.spaces)
        assert not missing and not extra, "{} has keys {} but the observation space has keys {}".format(
            where, sorted(obs), sorted(observation_space.spaces))
        for sub_key, sub_space in observation_space.spaces.items():
            _check_obs(obs[sub_key], sub_space, method_name, warn, key=sub_key)
        return
    if isinstance(observation_space, spaces.Tuple):
        assert isinstance(obs, tuple), "{} must be a tuple for a Tuple observation space, got {}".format(
            where, type(obs).__name__)
        assert len(obs) == len(observation_space.spaces), "{} has {} entries, the Tuple space has {}".format(
            where, len(obs), len(observation_space.spaces))
        for idx, (sub_obs, sub_space) in enumerate(zip(obs, observation_space.spaces)):
            _check_obs(sub_obs, sub_space, method_name, warn, key=str(idx))
        return

    if isinstance(observation_space, spaces.Discrete):
        is_int = isinstance(obs, (int, np.integer)) and not isinstance(obs, bool)
        is_int = is_int or (isinstance(obs, np.ndarray) and obs.shape == () and np.issubdtype(obs.dtype, np.integer))
        assert is_int, "{} must be an int for a Discrete observation space, got {} ({})".format(
            where, _describe(obs), type(obs).__name__)
        assert observation_space.contains(np.int64(obs)), "{} is {}, outside the Discrete space {}".format(
            where, obs, observation_space)
        return

    assert isinstance(obs, np.ndarray), ("{} must be a numpy array, got {} ({}); return np.array(obs, dtype=np.{})"
                                         .format(where, _describe(obs), type(obs).__name__, observation_space.dtype))
    assert obs.shape == observation_space.shape, (
        "{} has shape {} but the observation space has shape {}: fix the observation or the space's shape"
        .format(where, obs.shape, observation_space.shape))
    if obs.dtype != observation_space.dtype:
        if warn:
            warnings.warn("{} has dtype {} but the observation space has dtype {}: cast it with "
                          ".astype(np.{}) (sbtf's VecEnvs cast it, which may lose precision)".format(
                              where, obs.dtype, observation_space.dtype, observation_space.dtype))
        try:
            cast = obs.astype(observation_space.dtype)
        except (TypeError, ValueError) as exc:
            raise AssertionError("{} of dtype {} cannot be cast to the space's dtype {}".format(
                where, obs.dtype, observation_space.dtype)) from exc
    else:
        cast = obs
    if np.issubdtype(cast.dtype, np.floating):
        assert not np.any(np.isnan(cast)), "{} contains NaN: {}".format(where, _describe(cast))
    if not observation_space.contains(cast):
        if isinstance(observation_space, spaces.Box):
            outside = [tuple(int(i) for i in index)
                       for index in np.argwhere((cast < observation_space.low) | (cast > observation_space.high))]
            raise AssertionError(
                "{} is not within the observation space: {} value(s) outside [low, high], first at index {} (value "
                "{}, bounds [{}, {}]). Fix the bounds of the observation space or clip the observation.".format(
                    where, len(outside), tuple(outside[0]), cast[tuple(outside[0])],
                    observation_space.low[tuple(outside[0])], observation_space.high[tuple(outside[0])]))
        raise AssertionError("{} {} is not within the observation space {}".format(
            where, _describe(obs), observation_space))


def _check_reset_signature(env: gymnasium.Env) -> None:
    try:
        params = inspect.signature(env.reset).parameters
    except (TypeError, ValueError):
        return
    has_var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    missing = [name for name in ("seed", "options") if name not in params and not has_var_kw]
    assert not missing, ("`reset()` must accept the keyword arguments seed and options (gymnasium API): "
                         "def reset(self, *, seed=None, options=None): super().reset(seed=seed); ... "
                         "(missing: {})".format(", ".join(missing)))


def _check_returned_values(env: gymnasium.Env, observation_space: spaces.Space, action_space: spaces.Space,
                           warn: bool) -> None:
    """Check the values returned by reset() and step()."""
    result = env.reset(seed=0)
    assert isinstance(result, tuple) and len(result) == 2, (
        "`reset()` must return a tuple (obs, info), got {}. With the gymnasium API: return obs, {{}}".format(
            _describe(result)))
    obs, info = result
    assert isinstance(info, dict), "The info returned by `reset()` must be a dict, got {}".format(type(info).__name__)
    _check_obs(obs, observation_space, "reset", warn)

    action = action_space.sample()
    data = env.step(action)
    assert isinstance(data, tuple) and len(data) == 5, (
        "`step()` must return a tuple of 5 values (obs, reward, terminated, truncated, info) (gymnasium API), got "
        "{} value(s)".format(len(data) if isinstance(data, tuple) else _describe(data)))
    obs, reward, terminated, truncated, info = data
    _check_obs(obs, observation_space, "step", warn)
    assert isinstance(reward, (float, int, np.floating, np.integer)) and not isinstance(reward, bool), (
        "The reward returned by `step()` must be a float, got {} ({})".format(_describe(reward), type(reward).__name__))
    assert isinstance(terminated, (bool, np.bool_)), (
        "The `terminated` value returned by `step()` must be a bool, got {}".format(type(terminated).__name__))
    assert isinstance(truncated, (bool, np.bool_)), (
        "The `truncated` value returned by `step()` must be a bool, got {}".format(type(truncated).__name__))
    assert isinstance(info, dict), "The info returned by `step()` must be a dict, got {}".format(type(info).__name__)


def _check_nan(env: gymnasium.Env, action_space: spaces.Space) -> None:
    """Step a few random actions and raise ValueError if observations or rewards contain NaN or inf."""
    env.reset(seed=1)
    for step in range(_N_NAN_CHECK_STEPS):
        obs, reward, terminated, truncated, _ = env.step(action_space.sample())
        values = list(obs.values()) if isinstance(obs, dict) else list(obs) if isinstance(obs, tuple) else [obs]
        for value in values + [reward]:
            array = np.asarray(value)
            if array.dtype.kind in "fc" and not np.all(np.isfinite(array)):
                raise ValueError("The environment returned NaN or inf after {} random step(s) (observation {}, reward "
                                 "{}): check the env's maths (divisions, logs, sqrt) and its bounds.".format(
                                     step + 1, _describe(obs), reward))
        if terminated or truncated:
            env.reset()


def _check_reset_determinism(env: gymnasium.Env) -> None:
    obs_a, _ = env.reset(seed=123)
    obs_b, _ = env.reset(seed=123)

    def _equal(a: Any, b: Any) -> bool:
        if isinstance(a, dict):
            return all(_equal(a[k], b[k]) for k in a)
        if isinstance(a, tuple):
            return all(_equal(x, y) for x, y in zip(a, b))
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))

    if not _equal(obs_a, obs_b):
        warnings.warn("`reset(seed=123)` called twice gave different observations: the env is not reproducible. "
                      "Call super().reset(seed=seed) in reset() and draw randomness from self.np_random.")


def _check_render(env: gymnasium.Env, warn: bool) -> None:
    render_mode = getattr(env, "render_mode", None)
    if render_mode is None:
        if warn:
            warnings.warn("The env has no render_mode (make it with render_mode='rgb_array' or 'human' to render); "
                          "the render check is skipped.")
        return
    env.render()


def check_env(env: Any, warn: bool = True, skip_render_check: bool = True) -> None:
    """
    Check that an environment follows the gymnasium API and suits sbtf's algorithms (a custom env especially).

    Errors (AssertionError, ValueError) say what is wrong and how to fix it; with ``warn=True``, warnings point at
    things that work but may hurt learning (non-normalised actions, image spaces with the wrong dtype, ...).

    Environments written for the old gym API (``reset() -> obs``, 4-tuple ``step``, ``seed()``), including
    ``gymnasium.Env`` subclasses whose ``reset`` takes no ``seed``, get an :class:`OldGymAPIWarning` saying that sbtf
    adapts them and how to port them; then the adapted env (``OldGymAPIAdapter``, which sbtf applies automatically)
    is checked.

    :param env: (gymnasium.Env) The environment that will be checked
    :param warn: (bool) Whether to output additional warnings mainly related to the interaction with sbtf
    :param skip_render_check: (bool) Whether to skip the checks for the render method. True by default (useful for
        the CI)
    """
    if not isinstance(env, gymnasium.Env) and not is_old_gym_env(env):
        raise AssertionError(
            "Your environment must inherit from gymnasium.Env (or follow the old gym API with reset, step, "
            "observation_space and action_space), got {}. See https://gymnasium.farama.org/api/env/".format(
                type(env).__name__))
    if is_old_gym_env(env):
        warnings.warn(_old_api_message(env), OldGymAPIWarning, stacklevel=2)
        try:
            env = OldGymAPIAdapter(env)
        except TypeError as exc:
            raise AssertionError("The spaces of the old-gym env cannot be used: {}".format(exc)) from exc

    for name in ("observation_space", "action_space"):
        assert hasattr(env, name), "You must specify {} in the env's __init__ (self.{} = ...)".format(name, name)
        assert isinstance(getattr(env, name), spaces.Space), (
            "The {} must be a gymnasium.spaces.Space, got {} (use gymnasium.spaces.Box, Discrete, ...)".format(
                name, type(getattr(env, name)).__name__))
    observation_space = env.observation_space
    action_space = env.action_space

    if warn:
        _check_unsupported_spaces(observation_space, action_space)
        _check_box_spaces(observation_space, action_space)

    _check_reset_signature(env)
    _check_returned_values(env, observation_space, action_space, warn)
    _check_nan(env, action_space)
    if warn:
        _check_reset_determinism(env)

    if not skip_render_check:
        _check_render(env, warn)
