"""A VecEnv that steps its environments one after the other in the current process."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import gymnasium
import numpy as np

from sbtf.common.envs.gym_compat import OldGymAPIAdapter, wrap_env
from sbtf.common.vec_env.base_vec_env import Indices, VecEnv
from sbtf.common.vec_env.util import copy_obs_dict, dict_to_obs, is_wrapped, obs_space_info


def _get_env_attr(env: gymnasium.Env, name: str) -> Any:
    """Look an attribute up through the env's wrappers (gymnasium wrappers no longer forward ``__getattr__``)."""
    if hasattr(env, "get_wrapper_attr"):
        return env.get_wrapper_attr(name)
    return getattr(env, name)


def _set_env_attr(env: gymnasium.Env, name: str, value: Any) -> None:
    """Set an attribute where it is defined in the wrapper stack (on the outer env when it is nowhere)."""
    if hasattr(env, "set_wrapper_attr"):
        env.set_wrapper_attr(name, value)
    else:
        setattr(env, name, value)


def _innermost_env(env: gymnasium.Env) -> Any:
    """The env object at the bottom of the wrapper stack (the old-gym env inside an adapter)."""
    inner = env.unwrapped
    return inner.env if isinstance(inner, OldGymAPIAdapter) else inner


def _render_frame(env: gymnasium.Env, mode: Optional[str] = None) -> Any:
    """Render one env (gymnasium envs render in the mode they were made with; old-gym adapters take a mode)."""
    if isinstance(env.unwrapped, OldGymAPIAdapter):
        return env.unwrapped.render(mode=mode)
    if mode is not None and getattr(env, "render_mode", None) != mode:
        raise ValueError("Cannot render in mode {!r} an env made with render_mode={!r}: gymnasium envs render in "
                         "the mode they were made with; make the envs with render_mode={!r} (e.g. "
                         "gymnasium.make(env_id, render_mode={!r}))".format(mode, getattr(env, "render_mode", None),
                                                                          mode, mode))
    return env.render()


class DummyVecEnv(VecEnv):
    """
    Steps its environments one after the other in the current process. The fastest choice for cheap envs
    (``CartPole-v1`` and the like), where a process or thread per env would cost more than the env itself.

    :param env_fns: ([callable]) A list of functions that will create the environments (each call should return a
        new instance; gymnasium envs and old-gym-API envs are accepted, see ``sbtf.common.envs.gym_compat.wrap_env``)
    """

    def __init__(self, env_fns: List[Callable[[], Any]]):
        self.envs = [wrap_env(fn()) for fn in env_fns]
        if len(set(id(_innermost_env(env)) for env in self.envs)) != len(self.envs):
            raise ValueError("DummyVecEnv: the env functions returned the same environment instance more than once. "
                             "Each function must create a new env, e.g. [lambda: gymnasium.make('CartPole-v1')] * 4 "
                             "instead of [lambda: env] * 4.")
        env = self.envs[0]
        VecEnv.__init__(self, len(env_fns), env.observation_space, env.action_space)
        obs_space = env.observation_space
        self.keys, shapes, dtypes = obs_space_info(obs_space)

        self.buf_obs = OrderedDict([
            (k, np.zeros((self.num_envs,) + tuple(shapes[k]), dtype=dtypes[k]))
            for k in self.keys])
        self.buf_dones = np.zeros((self.num_envs,), dtype=bool)
        self.buf_rews = np.zeros((self.num_envs,), dtype=np.float32)
        self.buf_infos: List[Dict[str, Any]] = [{} for _ in range(self.num_envs)]
        self.reset_infos: List[Dict[str, Any]] = [{} for _ in range(self.num_envs)]
        self.actions: Any = None
        self.metadata = env.metadata
        self._seeds: List[Optional[int]] = [None] * self.num_envs
        # Fast path: a single (non Dict/Tuple) observation array is written straight into its buffer.
        self._single_buf: Optional[np.ndarray] = self.buf_obs[None] if self.keys == [None] else None
        # Discrete actions are handed to the envs as Python ints (much cheaper to compare than numpy scalars).
        self._int_actions = isinstance(self.action_space, gymnasium.spaces.Discrete)

    def step_async(self, actions: np.ndarray) -> None:
        self.actions = actions

    def step_wait(self):
        actions = self.actions
        if self._int_actions and isinstance(actions, np.ndarray):
            actions = actions.reshape(-1).tolist()
        buf_rews = self.buf_rews
        buf_dones = self.buf_dones
        buf_infos = self.buf_infos
        single = self._single_buf
        for env_idx, env in enumerate(self.envs):
            obs, reward, terminated, truncated, info = env.step(actions[env_idx])
            done = terminated or truncated
            if done:
                info["TimeLimit.truncated"] = bool(truncated and not terminated)
                info["terminal_observation"] = obs
                obs, self.reset_infos[env_idx] = env.reset()
            buf_rews[env_idx] = reward
            buf_dones[env_idx] = done
            buf_infos[env_idx] = info
            if single is not None:
                single[env_idx] = obs
            else:
                self._save_obs(env_idx, obs)
        return self._obs_from_buf(), buf_rews.copy(), buf_dones.copy(), list(buf_infos)

    def seed(self, seed: Optional[int] = None) -> List[Union[None, int]]:
        seed = self._draw_seed(seed)
        self._seeds = [seed + idx for idx in range(self.num_envs)]
        self.action_space.seed(seed)
        for idx, env in enumerate(self.envs):
            env.action_space.seed(seed + idx)
        return list(self._seeds)

    def reset(self):
        for env_idx, env in enumerate(self.envs):
            obs, self.reset_infos[env_idx] = env.reset(seed=self._seeds[env_idx])
            self._save_obs(env_idx, obs)
        self._seeds = [None] * self.num_envs
        return self._obs_from_buf()

    def close(self) -> None:
        for env in self.envs:
            env.close()

    def get_images(self) -> Sequence[np.ndarray]:
        images = [_render_frame(env, "rgb_array") for env in self.envs]
        for idx, image in enumerate(images):
            if not isinstance(image, np.ndarray):
                raise ValueError("env {} returned {} from render(), not an RGB array: make the envs with "
                                 "render_mode='rgb_array' (e.g. gymnasium.make(env_id, render_mode='rgb_array'))"
                                 .format(idx, type(image).__name__))
        return images

    def render(self, mode: str = 'human') -> Optional[np.ndarray]:
        """
        Render the envs: with 'rgb_array', one image (the frames tiled; the frame itself for a single env); with
        'human', envs made with ``render_mode='human'`` draw their own window, others are tiled in an OpenCV window.

        :param mode: (str) 'human' or 'rgb_array'
        """
        render_modes = [getattr(env, "render_mode", None) for env in self.envs]
        if mode == "human" and all(render_mode == "human" for render_mode in render_modes):
            for env in self.envs:
                env.render()
            return None
        if self.num_envs == 1 and mode == "rgb_array":
            return self.get_images()[0]
        return super().render(mode=mode)

    def _save_obs(self, env_idx: int, obs: Any) -> None:
        for key in self.keys:
            if key is None:
                self.buf_obs[key][env_idx] = obs
            else:
                self.buf_obs[key][env_idx] = obs[key]

    def _obs_from_buf(self):
        if self._single_buf is not None:
            return self._single_buf.copy()
        return dict_to_obs(self.observation_space, copy_obs_dict(self.buf_obs))

    def get_attr(self, attr_name: str, indices: Indices = None) -> List[Any]:
        """Return attribute from vectorized environment (see base class)."""
        target_envs = self._get_target_envs(indices)
        return [_get_env_attr(env_i, attr_name) for env_i in target_envs]

    def set_attr(self, attr_name: str, value: Any, indices: Indices = None) -> None:
        """Set attribute inside vectorized environments (see base class)."""
        target_envs = self._get_target_envs(indices)
        for env_i in target_envs:
            _set_env_attr(env_i, attr_name, value)

    def env_method(self, method_name: str, *method_args: Any, indices: Indices = None,
                   **method_kwargs: Any) -> List[Any]:
        """Call instance methods of vectorized environments."""
        target_envs = self._get_target_envs(indices)
        return [_get_env_attr(env_i, method_name)(*method_args, **method_kwargs) for env_i in target_envs]

    def env_is_wrapped(self, wrapper_class: type, indices: Indices = None) -> List[bool]:
        """Whether each env has a ``wrapper_class`` wrapper (stable-baselines3's ``env_is_wrapped``)."""
        return [is_wrapped(env_i, wrapper_class) for env_i in self._get_target_envs(indices)]

    def _get_target_envs(self, indices: Indices) -> List[gymnasium.Env]:
        indices = self._get_indices(indices)
        return [self.envs[i] for i in indices]
