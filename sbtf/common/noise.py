"""Action and parameter noise of stable-baselines 2.x (DDPG, TD3, SAC, DQN param noise).

Same maths and the same attribute names as stable-baselines (``_mu``, ``_sigma``, ``_theta``,
``_dt``, ``initial_noise``, ``noise_prev``; ``initial_stddev``, ``desired_action_stddev``,
``adoption_coefficient``, ``current_stddev``), so that the state of an old pickled object maps
one to one. Each class is plain data: ``to_dict()`` returns a JSON-able
``{"__noise__": "ClassName", ...}`` and ``Class.from_dict(d)`` / :func:`noise_from_dict`
rebuild the object, current state included, without running code from the file.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Union

import numpy as np

NOISE_KEY = "__noise__"

__all__ = [
    "AdaptiveParamNoiseSpec", "ActionNoise", "NormalActionNoise", "OrnsteinUhlenbeckActionNoise",
    "noise_from_dict", "is_noise_dict",
]


def _array_to_data(value: Any) -> Any:
    """A JSON-able form of a number or an array that keeps shape and dtype."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    array = np.asarray(value)
    return {"array": array.tolist(), "dtype": array.dtype.str, "shape": list(array.shape)}


def _array_from_data(data: Any) -> Any:
    if data is None or isinstance(data, (int, float)):
        return data
    if isinstance(data, dict) and "array" in data:
        dtype = np.dtype(data.get("dtype", "<f8"))
        if dtype.kind not in "biuf":
            raise ValueError("noise arrays must be numeric, got dtype {}".format(dtype))
        array = np.array(data["array"], dtype=dtype)
        if "shape" in data:
            array = array.reshape(data["shape"])
        return array
    if isinstance(data, list):
        return np.array(data, dtype=np.float64)
    raise ValueError("not a stored noise array: {!r}".format(data))


def _check_kind(data: Dict[str, Any], cls: type) -> None:
    if not isinstance(data, dict) or data.get(NOISE_KEY) != cls.__name__:
        raise ValueError("not a {} description: {!r}".format(cls.__name__, data))


class AdaptiveParamNoiseSpec(object):
    """
    Implements adaptive parameter noise

    :param initial_stddev: (float) the initial value for the standard deviation of the noise
    :param desired_action_stddev: (float) the desired value for the standard deviation of the noise
    :param adoption_coefficient: (float) the update coefficient for the standard deviation of the noise
    """

    def __init__(
        self, initial_stddev: float = 0.1, desired_action_stddev: float = 0.1, adoption_coefficient: float = 1.01
    ):
        self.initial_stddev = initial_stddev
        self.desired_action_stddev = desired_action_stddev
        self.adoption_coefficient = adoption_coefficient

        self.current_stddev = initial_stddev

    def adapt(self, distance: float) -> None:
        """
        update the standard deviation for the parameter noise

        :param distance: (float) the noise distance applied to the parameters
        """
        if distance > self.desired_action_stddev:
            # Decrease stddev.
            self.current_stddev /= self.adoption_coefficient
        else:
            # Increase stddev.
            self.current_stddev *= self.adoption_coefficient

    def get_stats(self) -> Dict[str, float]:
        """
        return the standard deviation for the parameter noise

        :return: (dict) the stats of the noise
        """
        return {"param_noise_stddev": self.current_stddev}

    def __repr__(self) -> str:
        fmt = "AdaptiveParamNoiseSpec(initial_stddev={}, desired_action_stddev={}, adoption_coefficient={})"
        return fmt.format(self.initial_stddev, self.desired_action_stddev, self.adoption_coefficient)

    def to_dict(self) -> Dict[str, Any]:
        """
        :return: (dict) JSON-able description, current standard deviation included
        """
        return {
            NOISE_KEY: "AdaptiveParamNoiseSpec",
            "initial_stddev": float(self.initial_stddev),
            "desired_action_stddev": float(self.desired_action_stddev),
            "adoption_coefficient": float(self.adoption_coefficient),
            "current_stddev": float(self.current_stddev),
        }

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "AdaptiveParamNoiseSpec":
        """
        :param data: (dict) a description written by :meth:`to_dict`
        :return: (AdaptiveParamNoiseSpec)
        """
        _check_kind(data, cls)
        spec = cls(
            float(data["initial_stddev"]), float(data["desired_action_stddev"]), float(data["adoption_coefficient"])
        )
        spec.current_stddev = float(data.get("current_stddev", spec.initial_stddev))
        return spec


class ActionNoise(object):
    """
    The action noise base class
    """

    def __call__(self) -> np.ndarray:
        raise NotImplementedError

    def reset(self) -> None:
        """
        call end of episode reset for the noise
        """
        pass

    def to_dict(self) -> Dict[str, Any]:
        """
        :return: (dict) JSON-able description of the noise
        """
        raise TypeError("{} cannot be stored as data".format(type(self).__name__))


class NormalActionNoise(ActionNoise):
    """
    A Gaussian action noise

    :param mean: (float or np.ndarray) the mean value of the noise
    :param sigma: (float or np.ndarray) the scale of the noise (std here)
    """

    def __init__(self, mean: Union[float, np.ndarray], sigma: Union[float, np.ndarray]):
        self._mu = mean
        self._sigma = sigma

    def __call__(self) -> np.ndarray:
        return np.random.normal(self._mu, self._sigma)

    def __repr__(self) -> str:
        return "NormalActionNoise(mu={}, sigma={})".format(self._mu, self._sigma)

    def to_dict(self) -> Dict[str, Any]:
        return {NOISE_KEY: "NormalActionNoise", "mean": _array_to_data(self._mu), "sigma": _array_to_data(self._sigma)}

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "NormalActionNoise":
        """
        :param data: (dict) a description written by :meth:`to_dict`
        :return: (NormalActionNoise)
        """
        _check_kind(data, cls)
        return cls(_array_from_data(data["mean"]), _array_from_data(data["sigma"]))


class OrnsteinUhlenbeckActionNoise(ActionNoise):
    """
    A Ornstein Uhlenbeck action noise, this is designed to approximate brownian motion with friction.

    Based on http://math.stackexchange.com/questions/1287634/implementing-ornstein-uhlenbeck-in-matlab

    :param mean: (np.ndarray) the mean of the noise
    :param sigma: (np.ndarray) the scale of the noise
    :param theta: (float) the rate of mean reversion
    :param dt: (float) the timestep for the noise
    :param initial_noise: ([float]) the initial value for the noise output, (if None: 0)
    """

    def __init__(
        self,
        mean: np.ndarray,
        sigma: np.ndarray,
        theta: float = 0.15,
        dt: float = 1e-2,
        initial_noise: Optional[np.ndarray] = None,
    ):
        self._theta = theta
        self._mu = mean
        self._sigma = sigma
        self._dt = dt
        self.initial_noise = initial_noise
        self.noise_prev: Optional[np.ndarray] = None
        self.reset()

    def __call__(self) -> np.ndarray:
        noise = (
            self.noise_prev
            + self._theta * (self._mu - self.noise_prev) * self._dt
            + self._sigma * np.sqrt(self._dt) * np.random.normal(size=np.shape(self._mu))
        )
        self.noise_prev = noise
        return noise

    def reset(self) -> None:
        """
        reset the Ornstein Uhlenbeck noise, to the initial position
        """
        self.noise_prev = self.initial_noise if self.initial_noise is not None else np.zeros_like(self._mu)

    def __repr__(self) -> str:
        return "OrnsteinUhlenbeckActionNoise(mu={}, sigma={})".format(self._mu, self._sigma)

    def to_dict(self) -> Dict[str, Any]:
        return {
            NOISE_KEY: "OrnsteinUhlenbeckActionNoise",
            "mean": _array_to_data(self._mu),
            "sigma": _array_to_data(self._sigma),
            "theta": float(self._theta),
            "dt": float(self._dt),
            "initial_noise": _array_to_data(self.initial_noise),
            "noise_prev": _array_to_data(self.noise_prev),
        }

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "OrnsteinUhlenbeckActionNoise":
        """
        :param data: (dict) a description written by :meth:`to_dict`
        :return: (OrnsteinUhlenbeckActionNoise) with the stored ``noise_prev`` state
        """
        _check_kind(data, cls)
        noise = cls(
            _array_from_data(data["mean"]),
            _array_from_data(data["sigma"]),
            theta=float(data.get("theta", 0.15)),
            dt=float(data.get("dt", 1e-2)),
            initial_noise=_array_from_data(data.get("initial_noise")),
        )
        if data.get("noise_prev") is not None:
            noise.noise_prev = _array_from_data(data["noise_prev"])
        return noise


_NOISE_CLASSES = {
    cls.__name__: cls for cls in (AdaptiveParamNoiseSpec, NormalActionNoise, OrnsteinUhlenbeckActionNoise)
}


def is_noise_dict(data: Any) -> bool:
    """
    :param data: (Any) a value read from a saved file
    :return: (bool) whether it is a description written by a noise object's ``to_dict``
    """
    return isinstance(data, dict) and isinstance(data.get(NOISE_KEY), str)


def noise_from_dict(data: Dict[str, Any]) -> Any:
    """
    Rebuild a noise object from its ``to_dict()`` form (only the classes of this module).

    :param data: (dict) ``{"__noise__": "ClassName", ...}``
    :return: the noise object
    """
    if not is_noise_dict(data):
        raise ValueError("not a noise description (a dict with a '{}' key): {!r}".format(NOISE_KEY, data))
    cls = _NOISE_CLASSES.get(data[NOISE_KEY])
    if cls is None:
        raise ValueError("unknown noise class {!r}".format(data[NOISE_KEY]))
    return cls.from_dict(data)
