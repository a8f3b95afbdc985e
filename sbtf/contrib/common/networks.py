"""Stable-baselines3's network pieces for the contrib policies: ``create_mlp`` stacks with PyTorch's default
initialisation, the feature extractors (``FlattenExtractor``, ``NatureCNN``) and the ``net_arch`` forms.

Every network is written once against a backend ``ops`` (``sbtf.common.network_ops``): TensorFlow for training and
export, NumPy for acting when every layer has a NumPy form (dense layers with a known activation; a CNN acts
through one compiled TF call).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import gymnasium as gym
import keras
import numpy as np
import tensorflow as tf

from sbtf.common.network_ops import TF_OPS
from sbtf.common.tf_layers import Dense, NatureCNN, SB2Layer

#: the feature extractors the contrib policies take (``features_extractor_class``), by sb3's class names
FEATURE_EXTRACTORS = ("FlattenExtractor", "NatureCNN", "CombinedExtractor")


def _torch_uniform(fan_in: int):
    """``nn.Linear``'s default initialisation: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (NumPy's global RNG, seeded)."""
    bound = 1.0 / np.sqrt(max(int(fan_in), 1))

    def init(shape, dtype=None, **_kwargs):
        return np.random.uniform(-bound, bound, tuple(int(d) for d in shape)).astype(np.float32)

    return init


class _NumpyInit(keras.initializers.Initializer):
    def __init__(self, fn):
        self.fn = fn

    def __call__(self, shape, dtype=None):
        return tf.constant(self.fn(shape), dtype=tf.float32)


class TorchLinear(Dense):
    """
    ``nn.Linear`` (then ``activation``): kernel (in, units) and bias (units,) both drawn from
    U(-1/sqrt(in), 1/sqrt(in)) as PyTorch does; variables ``<scope>/kernel``, ``<scope>/bias``.
    """

    def build(self, input_shape):
        n_input = int(input_shape[-1])
        init = _NumpyInit(_torch_uniform(n_input))
        self.kernel = self.add_weight(name=self.kernel_name, shape=(n_input, self.units), initializer=init)
        self.bias = self.add_weight(name=self.bias_name, shape=(self.units,), initializer=init)


class Mlp(keras.layers.Layer):
    """
    sb3's ``create_mlp(input_dim, output_dim, net_arch, activation_fn)``: ``fc{i}`` (``net_arch[i]`` units, then
    the activation) and, when ``output_dim > 0``, a linear ``out`` layer.

    :param scope: the scope of the variable names (``quantile_net``, ``critic/qf0``, ...)
    :param net_arch: hidden layer sizes
    :param activation_fn: activation after each hidden layer (a TF function or its name)
    :param output_dim: units of the linear output layer (0: none)
    """

    def __init__(self, scope: str, net_arch: Sequence[int], activation_fn, output_dim: int = 0, **kwargs):
        super().__init__(name=kwargs.pop("name", scope.replace("/", "__") + "__mlp"), **kwargs)
        self.scope = scope
        self.net_arch = [int(n) for n in net_arch]
        self.output_dim = int(output_dim)
        self.hidden = [TorchLinear(f"{scope}/fc{i}", size, activation=activation_fn)
                       for i, size in enumerate(self.net_arch)]
        self.out = TorchLinear(f"{scope}/out", self.output_dim) if self.output_dim > 0 else None

    def build(self, input_shape):
        n_input = int(input_shape[-1])
        for layer in self.named_layers():
            layer.build((None, n_input))
            n_input = layer.units

    def call(self, inputs):
        return self.ops_call(inputs, TF_OPS)

    def ops_call(self, x, ops):
        """The stack in the backend ``ops`` (TF or NumPy)."""
        for layer in self.named_layers():
            x = ops.layer(layer, x)
        return x

    def named_layers(self) -> List[SB2Layer]:
        """The dense layers, input to output."""
        return list(self.hidden) + ([self.out] if self.out is not None else [])

    @property
    def latent_dim(self) -> Optional[int]:
        """The size of the last hidden layer (None without hidden layers)."""
        return self.net_arch[-1] if self.net_arch else None


def is_image_space(space: gym.Space) -> bool:
    """sb3's test: a uint8 Box of rank 3 (the images sb3 divides by 255 when ``normalize_images``)."""
    return isinstance(space, gym.spaces.Box) and len(space.shape) == 3 and space.dtype == np.uint8


def extractor_name(features_extractor_class: Any, default: str) -> str:
    """The name (one of :data:`FEATURE_EXTRACTORS`) of a ``features_extractor_class`` argument."""
    if features_extractor_class is None:
        return default
    if features_extractor_class is NatureCNN:
        return "NatureCNN"
    from sbtf.common import extractors

    for name in FEATURE_EXTRACTORS:
        if features_extractor_class is getattr(extractors, name, None):
            return name
    name = features_extractor_class if isinstance(features_extractor_class, str) else \
        getattr(features_extractor_class, "__name__", repr(features_extractor_class))
    if name not in FEATURE_EXTRACTORS:
        raise ValueError(f"Error: features_extractor_class {features_extractor_class!r} is not supported; choose one "
                         f"of {list(FEATURE_EXTRACTORS)} (by name).")
    return name


class ScopedVariables:
    """The variables of an extractor under a scope, as ``named_variables()`` pairs (what a policy's parameter list
    reads)."""

    def __init__(self, scope: str, named: "Dict[str, Any]"):
        self.scope = scope
        self._named = named

    def named_variables(self) -> list:
        return [(f"{self.scope}/{name}", var) for name, var in self._named.items()]


class FeaturesExtractor(keras.layers.Layer):
    """
    sb3's ``FlattenExtractor`` (pre-processed observations, flattened), ``NatureCNN`` (sbtf's nature CNN: three
    ReLU convolutions and a 512-unit ReLU layer, ``<scope>/c1..c3, fc1``) or, for Dict observations,
    ``CombinedExtractor`` (``sbtf.common.extractors``: a nature CNN per image key, the other keys flattened,
    concatenated; the observations arrive packed as ``sbtf.common.dict_obs`` rows), on observations pre-processed as
    sb3 does: one-hot for discrete spaces, ``/ 255`` for uint8 images when ``normalize_images``.

    :param scope: the scope of the CNN's variable names
    :param observation_space: the observation space
    :param kind: ``"FlattenExtractor"``, ``"NatureCNN"`` or ``"CombinedExtractor"``
    :param normalize_images: divide uint8 images by 255
    :param features_extractor_kwargs: NatureCNN: ``features_dim`` (512 only); CombinedExtractor:
        ``cnn_output_dim``, ``normalized_image``
    """

    def __init__(self, scope: str, observation_space: gym.Space, kind: str, normalize_images: bool = True,
                 features_extractor_kwargs: Optional[Dict[str, Any]] = None, **kwargs):
        super().__init__(name=kwargs.pop("name", scope.replace("/", "__") + "__features"), **kwargs)
        extra = dict(features_extractor_kwargs or {})
        self.kind = kind
        self.scope = scope
        self.observation_space = observation_space
        self.scale = bool(normalize_images) and is_image_space(observation_space)
        self.cnn = None
        self.combined = None
        is_dict = isinstance(observation_space, gym.spaces.Dict)
        if is_dict != (kind == "CombinedExtractor"):
            raise ValueError(f"Error: {kind} does not take {type(observation_space).__name__} observations; use "
                             "MultiInputPolicy (CombinedExtractor) for Dict observations and MlpPolicy / CnnPolicy "
                             "for the others.")
        if kind == "NatureCNN":
            if not is_image_space(observation_space):
                raise ValueError(f"Error: NatureCNN (CnnPolicy) needs uint8 image observations (H, W, C), got "
                                 f"{observation_space!r}; use MlpPolicy for vector observations.")
            if extra.pop("features_dim", 512) != 512:
                raise ValueError("Error: sbtf's NatureCNN has features_dim=512 only.")
            self.cnn = NatureCNN(name=scope.replace("/", "__") + "__cnn")
            for layer in self.cnn.sb2_layers():
                layer.scope = f"{scope}/{layer.scope}"
        elif kind == "CombinedExtractor":
            from sbtf.common.dict_obs import layout_of
            from sbtf.common.extractors import CombinedExtractor

            self.layout = layout_of(observation_space)
            self.combined = CombinedExtractor(observation_space, name=scope.replace("/", "__") + "__combined",
                                              **extra)
            extra = {}
            self.scaled_keys = frozenset(self.combined.image_keys) if normalize_images else frozenset()
        if extra:
            raise ValueError(f"Error: unknown features_extractor_kwargs {sorted(extra)} for {kind}.")

    def build(self, input_shape):
        """The sublayers build themselves on the first call (their shapes follow from the data)."""
        self.built = True

    def ops_call(self, obs, ops):
        if self.combined is not None:
            from sbtf.common.dict_obs import preprocess_dict

            return self.combined.ops_call(preprocess_dict(ops, obs, self.layout, self.scaled_keys), ops)
        x = ops.preprocess(obs, self.observation_space, self.scale)
        if self.cnn is not None:
            return ops.layer(self.cnn, x)
        return ops.flatten(x)

    def call(self, obs):
        return self.ops_call(obs, TF_OPS)

    def named_layers(self) -> list:
        if self.combined is not None:
            from sbtf.common.extractors import extractor_named_variables

            return [ScopedVariables(self.scope, extractor_named_variables(self.combined))]
        return self.cnn.sb2_layers() if self.cnn is not None else []


def actor_critic_arch(net_arch: Union[List[int], Dict[str, List[int]]]) -> Tuple[List[int], List[int]]:
    """sb3's ``get_actor_critic_arch``: a list is used by both networks; a dict gives ``pi`` and ``qf``."""
    if isinstance(net_arch, dict):
        unknown = sorted(set(net_arch) - {"pi", "qf"})
        if unknown or "pi" not in net_arch or "qf" not in net_arch:
            raise ValueError(f"Error: a net_arch dict needs the keys 'pi' and 'qf' only, got {sorted(net_arch)}.")
        return [int(n) for n in net_arch["pi"]], [int(n) for n in net_arch["qf"]]
    if not isinstance(net_arch, (list, tuple)) or not all(isinstance(n, (int, np.integer)) for n in net_arch):
        raise ValueError(f"Error: net_arch must be a list of layer sizes or dict(pi=[...], qf=[...]), got "
                         f"{net_arch!r}.")
    return [int(n) for n in net_arch], [int(n) for n in net_arch]


__all__ = ["FEATURE_EXTRACTORS", "TorchLinear", "Mlp", "FeaturesExtractor", "ScopedVariables", "is_image_space",
           "extractor_name", "actor_critic_arch"]
