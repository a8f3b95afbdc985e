"""The VecEnv abstraction (stable-baselines 2 API) and the base class of VecEnv wrappers."""
from __future__ import annotations

import inspect
import pickle
from abc import ABC, abstractmethod
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

import cloudpickle
import numpy as np
from gymnasium import spaces

Indices = Optional[Union[int, Iterable[int]]]


class AlreadySteppingError(Exception):
    """
    Raised when an asynchronous step is running while step_async() is called again.
    """

    def __init__(self):
        msg = "already running an async step"
        Exception.__init__(self, msg)


class NotSteppingError(Exception):
    """
    Raised when an asynchronous step is not running but step_wait() is called.
    """

    def __init__(self):
        msg = "not running an async step"
        Exception.__init__(self, msg)


def tile_images(img_nhwc: Sequence[np.ndarray]) -> np.ndarray:
    """
    Arrange N images in a grid of P rows and Q columns (P = ceil(sqrt(N)), Q = ceil(N / P)), row by row, with black
    cells for the remainder.

    :param img_nhwc: (list or np.ndarray) N images of shape (height, width, channels)
    :return: (np.ndarray) one image of shape (height * P, width * Q, channels)
    """
    img_nhwc = np.asarray(img_nhwc)
    n_images, height, width, n_channels = img_nhwc.shape
    new_height = int(np.ceil(np.sqrt(n_images)))
    new_width = int(np.ceil(float(n_images) / new_height))
    padded = np.concatenate([img_nhwc, np.zeros((new_height * new_width - n_images, height, width, n_channels),
                                                dtype=img_nhwc.dtype)], axis=0)
    out = padded.reshape(new_height, new_width, height, width, n_channels).transpose(0, 2, 1, 3, 4)
    return out.reshape(new_height * height, new_width * width, n_channels)


class VecEnv(ABC):
    """
    An abstract asynchronous, vectorized environment.

    ``reset() -> obs`` and ``step(actions) -> (obs, rewards, dones, infos)`` with float32 rewards and bool dones of
    shape ``(num_envs,)``. A finished env is reset automatically: the last observation of its episode is in
    ``infos[i]["terminal_observation"]`` and a time-limit cut sets ``infos[i]["TimeLimit.truncated"] = True``.

    :param num_envs: (int) the number of environments
    :param observation_space: (gymnasium.spaces.Space) the observation space
    :param action_space: (gymnasium.spaces.Space) the action space
    """
    metadata = {
        'render.modes': ['human', 'rgb_array']
    }

    def __init__(self, num_envs: int, observation_space: spaces.Space, action_space: spaces.Space):
        self.num_envs = num_envs
        self.observation_space = observation_space
        self.action_space = action_space

    @abstractmethod
    def reset(self) -> Any:
        """
        Reset every env and return the batch of first observations (an array, or a dict / tuple of arrays for Dict /
        Tuple spaces). A pending ``step_async`` is abandoned: call ``step_async`` again before ``step_wait``.

        :return: (np.ndarray, dict or tuple) the observations, batch axis first
        """
        pass

    @abstractmethod
    def step_async(self, actions: np.ndarray) -> None:
        """
        Start stepping every env with its action (``actions[i]`` for env ``i``); ``step_wait()`` collects the results.
        Only one step may be pending at a time.

        :param actions: (np.ndarray) one action per env
        """
        pass

    @abstractmethod
    def step_wait(self) -> Any:
        """
        Collect the results of the step started by ``step_async()``.

        :return: (np.ndarray, np.ndarray, np.ndarray, [dict]) observations, float32 rewards, bool dones, infos
        """
        pass

    @abstractmethod
    def close(self) -> None:
        """
        Release what the envs hold (windows, worker processes, files).
        """
        pass

    @property
    def render_mode(self) -> Optional[str]:
        """The envs' ``render_mode`` (SB3's ``VecEnv.render_mode``): the first env's, None when it has none."""
        try:
            modes = self.get_attr("render_mode", indices=[0])
        except AttributeError:
            return None
        return modes[0] if modes else None

    @abstractmethod
    def get_attr(self, attr_name: str, indices: Indices = None) -> List[Any]:
        """
        Read an attribute of the envs (looked up through their gymnasium wrappers).

        :param attr_name: (str) the attribute's name
        :param indices: (list,int) which envs (all by default)
        :return: (list) the value in each selected env
        """
        pass

    @abstractmethod
    def set_attr(self, attr_name: str, value: Any, indices: Indices = None) -> None:
        """
        Set an attribute of the envs (on the wrapper that defines it, else on the outermost one).

        :param attr_name: (str) the attribute's name
        :param value: (obj) the new value
        :param indices: (list,int) which envs (all by default)
        """
        pass

    @abstractmethod
    def env_method(self, method_name: str, *method_args: Any, indices: Indices = None,
                   **method_kwargs: Any) -> List[Any]:
        """
        Call a method of the envs.

        :param method_name: (str) the method's name
        :param indices: (list,int) which envs (all by default)
        :param method_args: (tuple) positional arguments of the call
        :param method_kwargs: (dict) keyword arguments of the call
        :return: (list) what each selected env's method returned
        """
        pass

    def env_is_wrapped(self, wrapper_class: type, indices: Indices = None) -> List[bool]:
        """
        Whether each env has a ``wrapper_class`` gymnasium wrapper (stable-baselines3's ``env_is_wrapped``).

        :param wrapper_class: (type) the wrapper class (e.g. ``Monitor``)
        :param indices: (list,int) which envs (all by default)
        :return: ([bool]) one answer per selected env
        """
        raise NotImplementedError(f"{type(self).__name__} cannot tell how its envs are wrapped")

    @abstractmethod
    def seed(self, seed: Optional[int] = None) -> List[Union[None, int]]:
        """
        Seed the envs: env ``i`` gets ``seed + i``. The seeds are used by the next ``reset()`` (gymnasium envs are
        seeded through ``reset(seed=...)``); the action spaces are seeded at once. With ``seed=None`` a random base
        seed is drawn from numpy's global generator, so that the envs still get distinct seeds.

        :param seed: (Optional[int]) the base seed
        :return: (List[Union[None, int]]) the seed of each env
        """
        pass

    def step(self, actions: np.ndarray) -> Any:
        """
        Step every env with its action: ``step_async`` then ``step_wait``.

        :param actions: (np.ndarray) one action per env
        :return: (np.ndarray, np.ndarray, np.ndarray, [dict]) observations, float32 rewards, bool dones, infos
        """
        self.step_async(actions)
        return self.step_wait()

    def get_images(self) -> Sequence[np.ndarray]:
        """
        The current RGB frame of each env (the envs must be made with ``render_mode='rgb_array'``).
        """
        raise NotImplementedError

    def render(self, mode: str = 'human') -> Optional[np.ndarray]:
        """
        Render all envs as one image (their frames tiled in a grid).

        :param mode: (str) 'human' shows the image in a window (needs OpenCV), 'rgb_array' returns it
        """
        try:
            imgs = self.get_images()
        except NotImplementedError as exc:
            raise NotImplementedError('{} does not implement get_images()'.format(type(self).__name__)) from exc

        # Create a big image by tiling images from subprocesses
        bigimg = tile_images(imgs)
        if mode == 'human':
            try:
                import cv2  # pytype:disable=import-error
            except ImportError as exc:
                raise ImportError("render(mode='human') on a VecEnv needs OpenCV (pip install "
                                  "opencv-python); use mode='rgb_array' to get the image instead") from exc
            cv2.imshow('vecenv', bigimg[:, :, ::-1])
            cv2.waitKey(1)
        elif mode == 'rgb_array':
            return bigimg
        else:
            raise NotImplementedError("Render mode {!r} is not supported by VecEnvs (use 'human' or "
                                      "'rgb_array')".format(mode))
        return None

    @property
    def unwrapped(self) -> "VecEnv":
        if isinstance(self, VecEnvWrapper):
            return self.venv.unwrapped
        else:
            return self

    def getattr_depth_check(self, name: str, already_found: bool) -> Optional[str]:
        """Tell whether a wrapper lookup of ``name`` would hide this VecEnv's own attribute of that name.

        :param name: (str) the attribute's name
        :param already_found: (bool) whether a wrapper above already has the attribute
        :return: (str or None) "module.Class" of the VecEnv whose attribute is hidden, if any
        """
        if hasattr(self, name) and already_found:
            return "{0}.{1}".format(type(self).__module__, type(self).__name__)
        else:
            return None

    def _get_indices(self, indices: Indices) -> Iterable[int]:
        """
        Normalise an ``indices`` argument (None = all envs, an int, or an iterable of ints) to an iterable of ints.

        :param indices: (None,int,Iterable) the envs meant
        :return: (Iterable[int]) their indices
        """
        if indices is None:
            indices = range(self.num_envs)
        elif isinstance(indices, (int, np.integer)):
            indices = [int(indices)]
        return indices

    def _draw_seed(self, seed: Optional[int]) -> int:
        """Return ``seed``, or a random base seed when it is None (so that every env still gets its own seed)."""
        if seed is None:
            return int(np.random.randint(0, np.iinfo(np.uint32).max - self.num_envs, dtype=np.int64))
        return int(seed)


class VecEnvWrapper(VecEnv):
    """
    Base class of the wrappers of a VecEnv. Attributes the wrapper does not have are looked up in the wrapped VecEnv
    (through any number of wrappers; an attribute defined by two wrappers below the one asked is an error).

    :param venv: (VecEnv) the vectorized environment to wrap
    :param observation_space: (gymnasium.spaces.Space) the observation space (None: the one of venv)
    :param action_space: (gymnasium.spaces.Space) the action space (None: the one of venv)
    """

    def __init__(self, venv: VecEnv, observation_space: Optional[spaces.Space] = None,
                 action_space: Optional[spaces.Space] = None):
        self.venv = venv
        VecEnv.__init__(self, num_envs=venv.num_envs, observation_space=observation_space or venv.observation_space,
                        action_space=action_space or venv.action_space)
        self.class_attributes = dict(inspect.getmembers(self.__class__))

    def step_async(self, actions: np.ndarray) -> None:
        self.venv.step_async(actions)

    @abstractmethod
    def reset(self) -> Any:
        pass

    @abstractmethod
    def step_wait(self) -> Any:
        pass

    def seed(self, seed: Optional[int] = None) -> List[Union[None, int]]:
        return self.venv.seed(seed)

    def close(self) -> None:
        return self.venv.close()

    def render(self, mode: str = 'human') -> Any:
        return self.venv.render(mode=mode)

    def get_images(self) -> Sequence[np.ndarray]:
        return self.venv.get_images()

    def get_attr(self, attr_name: str, indices: Indices = None) -> List[Any]:
        return self.venv.get_attr(attr_name, indices)

    def set_attr(self, attr_name: str, value: Any, indices: Indices = None) -> None:
        return self.venv.set_attr(attr_name, value, indices)

    def env_method(self, method_name: str, *method_args: Any, indices: Indices = None,
                   **method_kwargs: Any) -> List[Any]:
        return self.venv.env_method(method_name, *method_args, indices=indices, **method_kwargs)

    def env_is_wrapped(self, wrapper_class: type, indices: Indices = None) -> List[bool]:
        return self.venv.env_is_wrapped(wrapper_class, indices)

    def __getattr__(self, name: str) -> Any:
        """Look up an attribute this wrapper does not have in the wrapped VecEnv(s)."""
        if name.startswith("__") or name in ("venv", "class_attributes"):
            # Not found by normal lookup: the object is not (or no longer) set up, e.g. during unpickling.
            raise AttributeError("{!r} object has no attribute {!r}".format(type(self).__name__, name))
        blocked_class = self.getattr_depth_check(name, already_found=False)
        if blocked_class is not None:
            own_class = "{0}.{1}".format(type(self).__module__, type(self).__name__)
            format_str = ("Error: Recursive attribute lookup for {0} from {1} is "
                          "ambiguous and hides attribute from {2}")
            raise AttributeError(format_str.format(name, own_class, blocked_class))

        return self.getattr_recursive(name)

    def _get_all_attributes(self) -> Dict[str, Any]:
        """The instance and class attributes of this wrapper.

        :return: (dict<str, object>)
        """
        all_attributes = self.__dict__.copy()
        all_attributes.update(self.class_attributes)
        return all_attributes

    def getattr_recursive(self, name: str) -> Any:
        """Find ``name`` in this wrapper or, going inwards, in the first wrapped VecEnv that has it.

        :param name: (str) the attribute's name
        :return: (object) the attribute
        """
        if name in self._get_all_attributes():
            return getattr(self, name)
        if hasattr(self.venv, 'getattr_recursive'):
            # a wrapper: go on with the recursion (plain getattr would redo the depth check)
            return self.venv.getattr_recursive(name)
        return getattr(self.venv, name)

    def getattr_depth_check(self, name: str, already_found: bool) -> Optional[str]:
        """See base class.

        :return: (str or None) "module.Class" of the VecEnv whose attribute is hidden, if any
        """
        has_it = name in self._get_all_attributes()
        if has_it and already_found:
            return "{0}.{1}".format(type(self).__module__, type(self).__name__)
        # first wrapper with the attribute: look for a second one further in; else keep searching
        return self.venv.getattr_depth_check(name, already_found or has_it)


class CloudpickleWrapper(object):
    """
    Pickles its content with cloudpickle (lambdas, closures, classes defined in scripts), for multiprocessing.

    :param var: (Any) the object to carry
    """

    def __init__(self, var: Any):
        self.var = var

    def __getstate__(self) -> bytes:
        return cloudpickle.dumps(self.var)

    def __setstate__(self, obs: bytes) -> None:
        self.var = pickle.loads(obs)
