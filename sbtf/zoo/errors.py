"""The typed errors of :mod:`sbtf.zoo` (all are ``ValueError`` subclasses, as sbtf's other loading errors; the
errors about a folder's files are also :class:`~sbtf.common.file_errors.ModelFileError` subclasses)."""
from __future__ import annotations

from typing import Tuple

from sbtf.common.file_errors import FileLimitError, ModelDataError, UnsafeFileError

__all__ = ["ZooError", "ZooFolderError", "ZooConfigError", "UnsafeConfigError", "ConfigLimitError",
           "ObservationMismatchError", "MissingTimeFeatureError"]


class ZooError(ValueError):
    """Base class of the errors raised when reading an rl-baselines-zoo folder."""


class ZooFolderError(ZooError):
    """The folder lacks a file the agent needs (the model, or the statistics its config asks for)."""


class ZooConfigError(ZooError, ModelDataError):
    """
    A ``config.yml`` (of a zoo folder or an sbtf run folder), or a value in it, that cannot be used: not YAML, not a
    mapping, an invalid setting (a :class:`~sbtf.common.file_errors.ModelFileError`).
    """


class UnsafeConfigError(ZooConfigError, UnsafeFileError):
    """A ``config.yml`` asking for Python objects other than the zoo's ``OrderedDict`` (nothing in it was run)."""


class ConfigLimitError(ZooConfigError, FileLimitError):
    """A ``config.yml`` too big, too deep, expanding too much through its aliases, or a setting sized beyond any
    real agent's (a frame stack of a billion frames)."""


class ObservationMismatchError(ZooError):
    """
    The model was trained on observations of another shape than the env gives.

    :param message: (str) what differs and what to do
    :param model_shape: (tuple) the observation shape the model expects
    :param env_shape: (tuple) the observation shape of the env
    """

    def __init__(self, message: str, model_shape: Tuple[int, ...] = (), env_shape: Tuple[int, ...] = ()):
        super().__init__(message)
        self.model_shape = tuple(model_shape)
        self.env_shape = tuple(env_shape)


class MissingTimeFeatureError(ObservationMismatchError):
    """The model expects one more observation entry than the env gives: the time feature of TimeFeatureWrapper."""
