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
    Tile N images into one big PxQ image, (P,Q) chosen to be as close as possible to a square.

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
        Reset all the environments and return an array of observations, or a tuple of observation arrays.

        If step_async is still doing work, that work will be cancelled and step_wait() should not be called
        until step_async() is invoked again.

        :return: ([int] or [float]) observation
        """
        pass

    @abstractmethod
    def step_async(self, actions: np.ndarray) -> None:
        """
        Tell all the environments to start taking a step with the given actions.
        Call step_wait() to get the results of the step.

        You should not call this if a step_async run is already pending.
        """
        pass

    @abstractmethod
    def step_wait(self) -> Any:
        """
        Wait for the step taken with step_async().

        :return: ([int] or [float], [float], [bool], dict) observation, reward, done, information
        """
        pass

    @abstractmethod
    def close(self) -> None:
        """
        Clean up the environment's resources.
        """
        pass

    @abstractmethod
    def get_attr(self, attr_name: str, indices: Indices = None) -> List[Any]:
        """
        Return attribute from vectorized environment.

        :param attr_name: (str) The name of the attribute whose value to return
        :param indices: (list,int) Indices of envs to get attribute from
        :return: (list) List of values of 'attr_name' in all environments
        """
        pass

    @abstractmethod
    def set_attr(self, attr_name: str, value: Any, indices: Indices = None) -> None:
        """
        Set attribute inside vectorized environments.

        :param attr_name: (str) The name of attribute to assign new value
        :param value: (obj) Value to assign to `attr_name`
        :param indices: (list,int) Indices of envs to assign value
        :return: (NoneType)
        """
        pass

    @abstractmethod
    def env_method(self, method_name: str, *method_args: Any, indices: Indices = None, **method_kwargs: Any) -> List[Any]:
        """
        Call instance methods of vectorized environments.

        :param method_name: (str) The name of the environment method to invoke.
        :param indices: (list,int) Indices of envs whose method to call
        :param method_args: (tuple) Any positional arguments to provide in the call
        :param method_kwargs: (dict) Any keyword arguments to provide in the call
        :return: (list) List of items returned by the environment's method call
        """
        pass

    @abstractmethod
    def seed(self, seed: Optional[int] = None) -> List[Union[None, int]]:
        """
        Sets the random seeds for all environments, based on a given seed.
        Each individual environment will still get its own seed, by incrementing the given seed.

        The seeds are used by the next ``reset()`` (env ``i`` is reset with ``seed + i``); the action spaces are
        seeded at once. With ``seed=None`` a random base seed is drawn from numpy's global generator.

        :param seed: (Optional[int]) The random seed.
        :return: (List[Union[None, int]]) Returns a list containing the seeds for each individual env.
        """
        pass

    def step(self, actions: np.ndarray) -> Any:
        """
        Step the environments with the given action

        :param actions: ([int] or [float]) the action
        :return: ([int] or [float], [float], [bool], dict) observation, reward, done, information
        """
        self.step_async(actions)
        return self.step_wait()

    def get_images(self) -> Sequence[np.ndarray]:
        """
        Return RGB images from each environment
        """
        raise NotImplementedError

    def render(self, mode: str = 'human') -> Optional[np.ndarray]:
        """
        Gym environment rendering

        :param mode: (str) 'human' shows the tiled images of all envs in a window (needs OpenCV),
            'rgb_array' returns them as one image
        """
        try:
            imgs = self.get_images()
        except NotImplementedError:
            raise NotImplementedError('{} does not implement get_images()'.format(type(self).__name__))

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
        """Check if an attribute reference is being hidden in a recursive call to __getattr__

        :param name: (str) name of attribute to check for
        :param already_found: (bool) whether this attribute has already been found in a wrapper
        :return: (str or None) name of module whose attribute is being shadowed, if any.
        """
        if hasattr(self, name) and already_found:
            return "{0}.{1}".format(type(self).__module__, type(self).__name__)
        else:
            return None

    def _get_indices(self, indices: Indices) -> Iterable[int]:
        """
        Convert a flexibly-typed reference to environment indices to an implied list of indices.

        :param indices: (None,int,Iterable) refers to indices of envs.
        :return: (list) the implied list of indices.
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
    Vectorized environment base class

    :param venv: (VecEnv) the vectorized environment to wrap
    :param observation_space: (gymnasium.spaces.Space) the observation space (can be None to load from venv)
    :param action_space: (gymnasium.spaces.Space) the action space (can be None to load from venv)
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

    def render(self, *args: Any, **kwargs: Any) -> Any:
        return self.venv.render(*args, **kwargs)

    def get_images(self) -> Sequence[np.ndarray]:
        return self.venv.get_images()

    def get_attr(self, attr_name: str, indices: Indices = None) -> List[Any]:
        return self.venv.get_attr(attr_name, indices)

    def set_attr(self, attr_name: str, value: Any, indices: Indices = None) -> None:
        return self.venv.set_attr(attr_name, value, indices)

    def env_method(self, method_name: str, *method_args: Any, indices: Indices = None, **method_kwargs: Any) -> List[Any]:
        return self.venv.env_method(method_name, *method_args, indices=indices, **method_kwargs)

    def __getattr__(self, name: str) -> Any:
        """Find attribute from wrapped venv(s) if this wrapper does not have it.
        Useful for accessing attributes from venvs which are wrapped with multiple wrappers
        which have unique attributes of interest.
        """
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
        """Get all (inherited) instance and class attributes

        :return: (dict<str, object>) all_attributes
        """
        all_attributes = self.__dict__.copy()
        all_attributes.update(self.class_attributes)
        return all_attributes

    def getattr_recursive(self, name: str) -> Any:
        """Recursively check wrappers to find attribute.

        :param name (str) name of attribute to look for
        :return: (object) attribute
        """
        all_attributes = self._get_all_attributes()
        if name in all_attributes:  # attribute is present in this wrapper
            attr = getattr(self, name)
        elif hasattr(self.venv, 'getattr_recursive'):
            # Attribute not present, child is wrapper. Call getattr_recursive rather than getattr
            # to avoid a duplicate call to getattr_depth_check.
            attr = self.venv.getattr_recursive(name)
        else:  # attribute not present, child is an unwrapped VecEnv
            attr = getattr(self.venv, name)

        return attr

    def getattr_depth_check(self, name: str, already_found: bool) -> Optional[str]:
        """See base class.

        :return: (str or None) name of module whose attribute is being shadowed, if any.
        """
        all_attributes = self._get_all_attributes()
        if name in all_attributes and already_found:
            # this venv's attribute is being hidden because of a higher venv.
            shadowed_wrapper_class = "{0}.{1}".format(type(self).__module__, type(self).__name__)
        elif name in all_attributes and not already_found:
            # we have found the first reference to the attribute. Now check for duplicates.
            shadowed_wrapper_class = self.venv.getattr_depth_check(name, True)
        else:
            # this wrapper does not have the attribute. Keep searching.
            shadowed_wrapper_class = self.venv.getattr_depth_check(name, already_found)

        return shadowed_wrapper_class


class CloudpickleWrapper(object):
    """
    Uses cloudpickle to serialize contents (otherwise multiprocessing tries to use pickle)

    :param var: (Any) the variable you wish to wrap for pickling with cloudpickle
    """

    def __init__(self, var: Any):
        self.var = var

    def __getstate__(self) -> bytes:
        return cloudpickle.dumps(self.var)

    def __setstate__(self, obs: bytes) -> None:
        self.var = pickle.loads(obs)
