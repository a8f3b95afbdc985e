"""
Feature extractors: Keras layers that turn pre-processed observations into a feature vector (SB3's
``torch_layers`` feature extractors, rewritten as Keras layers).

A policy runs ``features = extractor(preprocessed_obs)`` before its ``net_arch`` layers and heads. The observation an
extractor receives is already pre-processed for its space: Box images of an image space (see :func:`is_image_space`)
divided by 255 when the policy normalises images, Discrete / MultiDiscrete one-hot encoded, everything float32, and
for a Dict space a ``{key: tensor}`` dict of those (see ``sbtf.common.envs.dict_obs``).

Any ``keras.layers.Layer`` with a ``features_dim`` attribute can be a policy's extractor;
:class:`BaseFeaturesExtractor` is the small base class SB3 offers (it also registers its subclasses in
``sbtf.common.registry`` so that saved models can name them). The built-in extractors:

* :class:`FlattenExtractor`: flattens the observation (the default of MLP policies);
* :class:`NatureCNN`: the DQN Nature CNN (conv 32x8/4, 64x4/2, 64x3/1, ReLU, flatten, linear + ReLU), on NHWC images;
* :class:`CombinedExtractor`: for Dict observations, a NatureCNN per image key and a flatten for the other keys,
  concatenated (the default of ``MultiInputPolicy``).

Layers without a NumPy form (convolutions, a user's Keras layers) make the policy act through one compiled TF call
(``sbtf.common.compile.acting``); ``FlattenExtractor`` and a ``CombinedExtractor`` without image keys act in NumPy.

Variable names: a policy stores an extractor's variables under ``model/features_extractor/...``. An extractor that
has ``named_variables() -> [(relative name, variable)]`` (the built-in ones: ``c1/w``, ``img/c1/w`` ...) names them
itself; any other Keras layer's variables are named by their position and short name
(``model/features_extractor/0_kernel:0``, ``1_bias:0``, ...), which stays the same from one process to the next
(Keras' own layer names get a per-process counter such as ``dense_3``).
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, List, Optional, Tuple

import gymnasium as gym
import keras
import numpy as np
import tensorflow as tf

from sbtf.common.tf_layers import Conv, Linear

__all__ = ["BaseFeaturesExtractor", "FlattenExtractor", "NatureCNN", "CombinedExtractor", "is_image_space",
           "features_dim_of", "extractor_named_variables", "flattened_obs_dim"]


def is_image_space(observation_space: gym.Space, check_channels: bool = False, normalized_image: bool = False) -> bool:
    """
    Whether a space holds images (SB3's ``is_image_space`` for sbtf's channels-last NHWC images): a 3-D Box of
    dtype uint8 with bounds [0, 255]; with ``normalized_image=True`` any 3-D Box (no dtype or bounds check).

    :param observation_space: (gymnasium.Space) the space
    :param check_channels: (bool) also require 1 (grayscale), 3 (RGB) or 4 (RGBD) channels on the last axis
    :param normalized_image: (bool) the images are already normalised: skip the dtype and bounds checks
    """
    if not (isinstance(observation_space, gym.spaces.Box) and len(observation_space.shape) == 3):
        return False
    if not normalized_image:
        if observation_space.dtype != np.uint8:
            return False
        if np.any(observation_space.low != 0) or np.any(observation_space.high != 255):
            return False
    if not check_channels:
        return True
    return int(observation_space.shape[-1]) in (1, 3, 4)


def flattened_obs_dim(space: gym.Space) -> int:
    """Size of a pre-processed, flattened observation of ``space`` (one-hot sizes for Discrete / MultiDiscrete)."""
    if isinstance(space, gym.spaces.Discrete):
        return int(space.n)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return int(np.sum(space.nvec))
    if isinstance(space, gym.spaces.Dict):
        return sum(flattened_obs_dim(sub) for sub in space.spaces.values())
    return int(np.prod(space.shape))


class BaseFeaturesExtractor(keras.layers.Layer):
    """
    Base class of feature extractors (SB3's ``BaseFeaturesExtractor`` as a Keras layer).

    Subclasses register themselves in ``sbtf.common.registry`` (kind ``"extractor"``), so that a model saved with
    them names the class and finds it again when the module that defines it is imported before ``load``.

    :param observation_space: (gymnasium.Space) the observation space
    :param features_dim: (int) number of features the layer outputs
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        from sbtf.common.registry import register_class

        register_class(cls, "extractor")

    def __init__(self, observation_space: gym.Space, features_dim: int = 0, **kwargs):
        super().__init__(**kwargs)
        if int(features_dim) < 0:
            raise ValueError(f"Error: features_dim must be >= 0, got {features_dim}")
        self.observation_space = observation_space
        self._features_dim = int(features_dim)

    @property
    def features_dim(self) -> int:
        """Number of features the layer outputs."""
        return self._features_dim


class FlattenExtractor(BaseFeaturesExtractor):
    """
    Flattens the (pre-processed) observation: the features of MLP policies.

    :param observation_space: (gymnasium.Space) the observation space
    """

    def __init__(self, observation_space: gym.Space, **kwargs):
        super().__init__(observation_space, flattened_obs_dim(observation_space), **kwargs)

    def call(self, inputs):
        return tf.reshape(inputs, (-1, int(np.prod(inputs.shape[1:]))))

    def ops_call(self, x, ops):
        """The same maths in any backend (``sbtf.common.nn.network_ops``)."""
        return ops.flatten(x)

    def named_variables(self) -> list:
        return []


class NatureCNN(BaseFeaturesExtractor):
    """
    CNN from the DQN Nature paper (Mnih et al., 2015), as SB3's ``NatureCNN``, on channels-last (NHWC) images:
    conv 32 8x8 stride 4, conv 64 4x4 stride 2, conv 64 3x3 stride 1 (ReLU after each), flatten, linear + ReLU to
    ``features_dim``. Orthogonal initialisation with gain sqrt(2) (what SB3's ``ortho_init`` applies).

    :param observation_space: (gymnasium.spaces.Box) an image space (see :func:`is_image_space`)
    :param features_dim: (int) number of features (units of the last layer)
    :param normalized_image: (bool) the images are already normalised: only require a 3-D Box
    """

    def __init__(self, observation_space: gym.Space, features_dim: int = 512, normalized_image: bool = False,
                 **kwargs):
        if not isinstance(observation_space, gym.spaces.Box):
            raise TypeError(f"Error: NatureCNN must be used with a gymnasium.spaces.Box observation space, not "
                            f"{observation_space!r}")
        if not is_image_space(observation_space, check_channels=False, normalized_image=normalized_image):
            raise ValueError(
                f"Error: NatureCNN takes images (a 3-D uint8 Box with bounds [0, 255], channels last), not "
                f"{observation_space!r} (are you using CnnPolicy instead of MlpPolicy or MultiInputPolicy?). If the "
                "images are already normalised (e.g. by VecNormalize) pass normalized_image=True in "
                "features_extractor_kwargs and normalize_images=False in policy_kwargs.")
        super().__init__(observation_space, features_dim, **kwargs)
        self.normalized_image = bool(normalized_image)
        self.c1 = Conv("c1", 32, 8, 4, init_scale=np.sqrt(2))
        self.c2 = Conv("c2", 64, 4, 2, init_scale=np.sqrt(2))
        self.c3 = Conv("c3", 64, 3, 1, init_scale=np.sqrt(2))
        self.fc1 = Linear("fc1", features_dim, init_scale=np.sqrt(2))

    def call(self, inputs):
        x = tf.nn.relu(self.c1(inputs))
        x = tf.nn.relu(self.c2(x))
        x = tf.nn.relu(self.c3(x))
        x = tf.reshape(x, (-1, int(np.prod(x.shape[1:]))))
        return tf.nn.relu(self.fc1(x))

    def named_variables(self) -> List[Tuple[str, Any]]:
        """(relative name, variable) pairs: ``c1/w``, ``c1/b``, ... ``fc1/b``."""
        return [pair for layer in (self.c1, self.c2, self.c3, self.fc1) for pair in layer.named_variables()]


class CombinedExtractor(BaseFeaturesExtractor):
    """
    Features of a Dict observation (SB3's ``CombinedExtractor``): a :class:`NatureCNN` of ``cnn_output_dim``
    features for each image key (see :func:`is_image_space`), the flattened values for every other key (Discrete /
    MultiDiscrete keys arrive one-hot encoded), concatenated in the Dict space's key order.

    :param observation_space: (gymnasium.spaces.Dict) the observation space
    :param cnn_output_dim: (int) features of each image key's CNN
    :param normalized_image: (bool) the images are already normalised: any 3-D Box key is an image
    """

    def __init__(self, observation_space: gym.spaces.Dict, cnn_output_dim: int = 256, normalized_image: bool = False,
                 **kwargs):
        if not isinstance(observation_space, gym.spaces.Dict):
            raise TypeError(f"Error: CombinedExtractor takes a gymnasium.spaces.Dict observation space, not "
                            f"{observation_space!r}")
        super().__init__(observation_space, features_dim=1, **kwargs)
        self.cnn_output_dim = int(cnn_output_dim)
        self.normalized_image = bool(normalized_image)
        self.image_keys: List[str] = []
        self.cnns: List[NatureCNN] = []  # one per image key, in image_keys order (a list: Keras tracks it)
        total = 0
        for key, subspace in observation_space.spaces.items():
            if is_image_space(subspace, normalized_image=normalized_image):
                self.image_keys.append(key)
                self.cnns.append(NatureCNN(subspace, features_dim=cnn_output_dim, normalized_image=normalized_image,
                                           name=f"cnn_{len(self.cnns)}"))
                total += self.cnn_output_dim
            else:
                total += flattened_obs_dim(subspace)
        self.keys = list(observation_space.spaces.keys())
        self._features_dim = total

    def _cnn(self, key: str) -> Optional[NatureCNN]:
        return self.cnns[self.image_keys.index(key)] if key in self.image_keys else None

    def call(self, inputs):
        parts = []
        for key in self.keys:
            cnn = self._cnn(key)
            x = inputs[key]
            parts.append(cnn(x) if cnn is not None else tf.reshape(tf.cast(x, tf.float32),
                                                                   (-1, int(np.prod(x.shape[1:])))))
        return tf.concat(parts, axis=-1)

    def ops_call(self, x, ops):
        """The same maths in any backend; a CNN key has no NumPy form, so such an extractor acts through TF."""
        parts = []
        for key in self.keys:
            cnn = self._cnn(key)
            parts.append(ops.layer(cnn, x[key]) if cnn is not None else ops.flatten(ops.as_float(x[key])))
        return ops.concat(parts)

    def named_variables(self) -> List[Tuple[str, Any]]:
        """(relative name, variable) pairs: ``<key>/c1/w`` ... for each image key."""
        return [(f"{key}/{name}", var) for key, cnn in zip(self.image_keys, self.cnns)
                for name, var in cnn.named_variables()]


def features_dim_of(layer: keras.layers.Layer) -> int:
    """The ``features_dim`` of an extractor layer (TypeError naming the class when it has none)."""
    dim = getattr(layer, "features_dim", None)
    if dim is None or isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or int(dim) <= 0:
        raise TypeError(f"Error: the feature extractor {type(layer).__name__} must have a positive integer "
                        f"'features_dim' attribute (the size of its output), got {dim!r}.")
    return int(dim)


def extractor_named_variables(layer: keras.layers.Layer) -> "OrderedDict[str, Any]":
    """
    ``{relative name: variable}`` of an extractor: its own ``named_variables()`` when it has one, else its variables
    by position and short name (``0_kernel``, ``1_bias``, ...; see the module docstring).
    """
    named = getattr(layer, "named_variables", None)
    out: OrderedDict[str, Any] = OrderedDict()
    if callable(named):
        pairs = list(named())
    else:
        pairs = [(f"{i}_{var.name.split('/')[-1].split(':')[0]}", var) for i, var in enumerate(layer.weights)]
    for name, var in pairs:
        if name in out:
            raise ValueError(f"Error: the feature extractor {type(layer).__name__} names two variables {name!r}")
        out[name] = var
    covered = {id(v) for v in out.values()}
    missing = [v for v in layer.weights if id(v) not in covered]
    if missing:
        raise ValueError(f"Error: the feature extractor {type(layer).__name__}'s named_variables() leaves out "
                         f"{[v.path for v in missing][:5]}; they would not be saved.")
    return out
