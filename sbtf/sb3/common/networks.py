"""Stable-baselines3's network pieces (SB3's ``common/torch_layers.py``) for the SB3 and sb3-contrib policies:
``create_mlp`` stacks with PyTorch's default
initialisation, the feature extractors (any Keras layer with a ``features_dim``, ``sbtf.common.extractors``' built-in
ones by default) and the ``net_arch`` forms.

Every network is written once against a backend ``ops`` (``sbtf.common.nn.network_ops``): TensorFlow for training and
export, NumPy for acting when every layer has a NumPy form (dense layers with a known activation; a CNN acts
through one compiled TF call).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import gymnasium as gym
import keras
import numpy as np
import tensorflow as tf

from sbtf.common import extractors
from sbtf.common.envs.dict_obs import layout_of
from sbtf.common.extractors import CombinedExtractor, FlattenExtractor
from sbtf.common.extractors import NatureCNN as SB3NatureCNN
from sbtf.common.extractors import extractor_named_variables, features_dim_of
from sbtf.common.extractors import is_image_space as sb3_is_image_space
from sbtf.common.input import obs_input_dtype, obs_input_shape
from sbtf.common.nn.network_ops import TF_OPS
from sbtf.common.registry import class_key, lookup_class, register_class
from sbtf.common.tf_layers import Dense, NatureCNN, SB2Layer

#: the built-in feature extractors a contrib policy also takes by name (``features_extractor_class="NatureCNN"``)
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
    """sb3's test of the images it divides by 255 when ``normalize_images`` (``sbtf.common.extractors``'s rule: a
    uint8 Box of rank 3 with bounds [0, 255])."""

    return sb3_is_image_space(space)


def resolve_extractor_class(features_extractor_class: Any, default: str) -> type:
    """
    The extractor class of a ``features_extractor_class`` argument: the built-in ``default`` for None, a built-in
    class for its name (``"FlattenExtractor"``, ``"NatureCNN"``, ``"CombinedExtractor"``; the names the contrib
    policies took before they took classes), else the class itself, which must be a Keras layer class with a
    ``features_dim`` (checked when it is built, see ``sbtf.common.extractors``).
    """

    if features_extractor_class is None:
        features_extractor_class = default
    if features_extractor_class is NatureCNN:  # sbtf's SB2 nature CNN: the same layers as SB3's
        return extractors.NatureCNN
    if isinstance(features_extractor_class, str):
        if features_extractor_class not in FEATURE_EXTRACTORS:
            raise ValueError(f"Error: features_extractor_class {features_extractor_class!r} is not a built-in "
                             f"extractor ({list(FEATURE_EXTRACTORS)}); pass a Keras layer class for your own.")
        return getattr(extractors, features_extractor_class)
    if not (isinstance(features_extractor_class, type) and issubclass(features_extractor_class, keras.layers.Layer)):
        raise TypeError(f"Error: features_extractor_class must be a keras.layers.Layer subclass with a features_dim "
                        f"attribute (or a built-in name {list(FEATURE_EXTRACTORS)}), got {features_extractor_class!r}")
    return features_extractor_class


def new_extractor_layer(extractor_class: type, observation_space: gym.Space,
                        features_extractor_kwargs: Optional[Dict[str, Any]]) -> keras.layers.Layer:
    """
    ``extractor_class(observation_space, **features_extractor_kwargs)``, the class registered (as the core policies
    do, ``sbtf.common.registry``) so that a saved model names it by import path.
    """

    is_dict = isinstance(observation_space, gym.spaces.Dict)
    if is_dict and extractor_class in (FlattenExtractor, SB3NatureCNN):
        raise ValueError(f"Error: {extractor_class.__name__} does not take Dict observations; use MultiInputPolicy "
                         "(CombinedExtractor) or a features_extractor_class that takes a dict.")
    if not is_dict and extractor_class is CombinedExtractor:
        raise ValueError(f"Error: CombinedExtractor takes Dict observations, not {observation_space!r}; use "
                         "MlpPolicy / CnnPolicy.")
    if lookup_class(class_key(extractor_class), ("extractor",)) is not extractor_class:
        register_class(extractor_class, "extractor")
    return extractor_class(observation_space, **dict(features_extractor_kwargs or {}))


class ScopedVariables:
    """The variables of an extractor under a scope, as ``named_variables()`` pairs (what a policy's parameter list
    reads)."""

    def __init__(self, scope: str, layer: keras.layers.Layer):
        self.scope = scope
        self.layer = layer

    def named_variables(self) -> list:
        prefix = f"{self.scope}/" if self.scope else ""
        return [(prefix + name, var) for name, var in extractor_named_variables(self.layer).items()]


class FeaturesExtractor(keras.layers.Layer):
    """
    The features of a contrib policy: pre-processing as sb3 does (one-hot for discrete spaces, ``/ 255`` for image
    spaces when ``normalize_images``; for a Dict space, ``sbtf.common.envs.dict_obs``'s packed rows unpacked into a
    ``{key: tensor}`` dict), then the extractor layer: a built-in one (``sbtf.common.extractors``' ``FlattenExtractor``,
    ``NatureCNN``, ``CombinedExtractor``) or any Keras layer class of the user's with a ``features_dim``, built as
    ``features_extractor_class(observation_space, **features_extractor_kwargs)``, the core policies' convention. Its
    variables are named ``<scope>/<name>`` (``sbtf.common.extractors.extractor_named_variables``). A layer without a
    NumPy form makes the policy act through one compiled TF call (``sbtf.common.compile.acting``).

    :param scope: the scope of the extractor's variable names
    :param observation_space: the observation space
    :param extractor_class: the extractor class (see :func:`resolve_extractor_class`)
    :param normalize_images: divide uint8 images by 255
    :param features_extractor_kwargs: the extractor's keyword arguments (sb3's: ``features_dim`` and
        ``normalized_image`` for NatureCNN, ``cnn_output_dim`` and ``normalized_image`` for CombinedExtractor)
    :param ortho_gain: sb3's ``ortho_init`` of the actor-critic policies: orthogonal kernels of this gain and zero
        biases for the Dense / Conv sub-layers of a user's Keras extractor (sbtf's built-in layers are created
        orthogonal); None: the layer's own initialisation
    """

    def __init__(self, scope: str, observation_space: gym.Space, extractor_class: Any, normalize_images: bool = True,
                 features_extractor_kwargs: Optional[Dict[str, Any]] = None, ortho_gain: Optional[float] = None,
                 **kwargs):
        super().__init__(name=kwargs.pop("name", scope.replace("/", "__") + "__features"), **kwargs)

        self.scope = scope
        self.observation_space = observation_space
        self.extractor_class = resolve_extractor_class(extractor_class, "FlattenExtractor")
        extra = dict(features_extractor_kwargs or {})
        self.layer = new_extractor_layer(self.extractor_class, observation_space, extra)
        self.features_dim = features_dim_of(self.layer)
        self.layout = None
        self.scale = bool(normalize_images) and is_image_space(observation_space)
        if isinstance(observation_space, gym.spaces.Dict):
            self.layout = layout_of(observation_space)
            normalized = bool(extra.get("normalized_image", False))
            self.scaled_keys = frozenset(
                entry.key for entry in self.layout.entries
                if sb3_is_image_space(entry.space, normalized_image=normalized)) if normalize_images else frozenset()
        # build it on one (packed) observation and check that it outputs (batch, features_dim), as the core does

        dummy = tf.zeros((1,) + tuple(obs_input_shape(observation_space)),
                         tf.as_dtype(obs_input_dtype(observation_space)))
        out = self.layer(self.preprocess(dummy, TF_OPS))
        if len(out.shape) != 2 or int(out.shape[-1]) != self.features_dim:
            raise ValueError(f"Error: the feature extractor {self.extractor_class.__name__} says "
                             f"features_dim={self.features_dim} but outputs shape {tuple(out.shape)}; it must output "
                             "(batch, features_dim).")
        if ortho_gain is not None and not hasattr(self.layer, "named_variables"):
            from sbtf.common.nn.policy_builders import _reinit_keras_sublayers

            _reinit_keras_sublayers(self.layer, ortho_gain)
        self.build(dummy.shape)  # the extractor layer is built (on the dummy observation): so is this layer

    def build(self, input_shape):
        """The extractor builds itself on the first call (its shapes follow from the data)."""
        self.built = True

    def preprocess(self, obs, ops):
        """Raw (packed) observations to what the extractor takes, in the backend ``ops``."""
        if self.layout is not None:
            from sbtf.common.envs.dict_obs import preprocess_dict

            return preprocess_dict(ops, obs, self.layout, self.scaled_keys)
        return ops.preprocess(obs, self.observation_space, self.scale)

    def ops_call(self, obs, ops):
        return ops.layer(self.layer, self.preprocess(obs, ops))

    def call(self, obs):
        return self.ops_call(obs, TF_OPS)

    @property
    def xla_friendly(self) -> bool:
        """Whether XLA pays off on CPU for this extractor: sbtf's flattening only (a user's Keras layers may use ops
        XLA cannot compile; convolutions run slower under XLA on CPU,
        ``sbtf.common.compile.fast_call.xla_pays_off``)."""

        return type(self.layer) is FlattenExtractor or (type(self.layer) is CombinedExtractor
                                                        and not self.layer.image_keys)

    def named_layers(self) -> list:
        return [ScopedVariables(self.scope, self.layer)]


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
           "resolve_extractor_class", "new_extractor_layer", "actor_critic_arch"]
