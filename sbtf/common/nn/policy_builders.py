"""Building sbtf's actor-critic policies in stable-baselines3's form: features extractors (shared, or one for the
actor and one for the critic; Dict observations), ``net_arch`` as SB3's dict, PyTorch's default initialisation.
``Sb3NetworkBuilder`` is mixed into ``FeedForwardPolicy``; the helpers serve ``LstmPolicy`` and ``sbtf.sb3`` too."""
from __future__ import annotations

from itertools import zip_longest
from typing import Optional

import gymnasium as gym
import keras
import numpy as np
import tensorflow as tf

from sbtf.common.envs.dict_obs import DictObsLayout
from sbtf.common.nn.network_ops import TF_OPS
from sbtf.common.extractors import CombinedExtractor, FlattenExtractor
from sbtf.common.extractors import extractor_named_variables, features_dim_of, is_image_space
from sbtf.common.registry import class_key, lookup_class, register_class
from sbtf.common.tf_layers import Conv, Linear, ortho_init


def _parse_net_arch(net_arch) -> tuple[list[int], list[int], list[int]]:
    """Split SB2's net_arch into (shared sizes, pi sizes, vf sizes)."""
    shared: list[int] = []
    pi_sizes: list[int] = []
    vf_sizes: list[int] = []
    for layer in net_arch:
        if isinstance(layer, (int, np.integer)):
            shared.append(int(layer))
        elif isinstance(layer, dict):
            pi_sizes = [int(s) for s in layer.get("pi", [])]
            vf_sizes = [int(s) for s in layer.get("vf", [])]
            break
        else:
            raise ValueError(f"Error: net_arch entries must be ints or one dict(pi=[...], vf=[...]), got {layer!r}")
    return shared, pi_sizes, vf_sizes


class _ScopedExtractor:
    """The variables of a feature extractor under one scope (``features_extractor/...``), for ``named_parameters``."""

    def __init__(self, scope: str, layer: keras.layers.Layer):
        self.scope = scope
        self.layer = layer

    def named_variables(self) -> list:
        return [(f"{self.scope}/{name}", var) for name, var in extractor_named_variables(self.layer).items()]


def _sb3_net_arch(net_arch) -> tuple[list[int], list[int], list[int]]:
    """SB3's ``net_arch`` (>= 1.8): a list of ints is the pi and the vf layers alike, ``dict(pi=..., vf=...)`` gives
    them separately; a list holding a dict keeps the older shared-then-split meaning."""
    if isinstance(net_arch, dict):
        return _parse_net_arch([net_arch])
    if all(isinstance(size, (int, np.integer)) for size in net_arch):
        return [], [int(s) for s in net_arch], [int(s) for s in net_arch]
    return _parse_net_arch(net_arch)


def _check_net_arch_dict(net_arch: dict) -> None:
    unknown = sorted(set(net_arch) - {"pi", "vf"})
    if unknown:
        raise ValueError(f"Error: net_arch=dict(...) of an actor-critic policy takes the keys 'pi' and 'vf', got "
                         f"{unknown} (SB3's 'qf' belongs to SAC/TD3/DDPG).")


def _reinit_keras_sublayers(layer: keras.layers.Layer, gain: float) -> None:
    """SB3's ``ortho_init`` on a user's Keras layers: orthogonal kernels (``gain``) and zero biases for every Dense
    and Conv sub-layer (sbtf's own Linear/Conv layers are created orthogonal already)."""
    flatten = getattr(layer, "_flatten_layers", None)
    sublayers = list(flatten(include_self=True, recursive=True)) if callable(flatten) else [layer]
    for sub in sublayers:
        if isinstance(sub, (keras.layers.Dense, keras.layers.Conv1D, keras.layers.Conv2D, keras.layers.Conv3D)):
            kernel = getattr(sub, "kernel", None)
            if kernel is not None and len(kernel.shape) in (2, 4):
                kernel.assign(ortho_init(gain)(tuple(int(d) for d in kernel.shape)))
            bias = getattr(sub, "bias", None)
            if bias is not None:
                bias.assign(np.zeros(tuple(int(d) for d in bias.shape), np.float32))


def _torch_default_init(layers) -> None:
    """``ortho_init=False`` (SB3): sbtf's Linear/Conv layers get PyTorch's default uniform(+-1/sqrt(fan_in))
    weights and biases instead of orthogonal ones (drawn from NumPy's global generator, like ``ortho_init``)."""
    for layer in layers:
        for sub in ([layer] + list(layer.sb2_layers() if hasattr(layer, "sb2_layers") else [])):
            w = getattr(sub, "w", None)
            if not isinstance(sub, (Linear, Conv)) or w is None:
                continue
            fan_in = int(np.prod(w.shape[:-1]))
            bound = 1.0 / np.sqrt(fan_in)
            w.assign(np.random.uniform(-bound, bound, tuple(int(d) for d in w.shape)).astype(np.float32))
            sub.b.assign(np.random.uniform(-bound, bound, tuple(int(d) for d in sub.b.shape)).astype(np.float32))


def _dict_image_keys(layout: Optional[DictObsLayout], features_extractor_kwargs: dict) -> frozenset:
    """The keys of a Dict space that hold images (SB3's rule, see ``sbtf.common.extractors.is_image_space``; any 3-D
    Box with ``features_extractor_kwargs=dict(normalized_image=True)``); none for other spaces."""
    if layout is None:
        return frozenset()
    normalized = bool(features_extractor_kwargs.get("normalized_image", False))
    return frozenset(entry.key for entry in layout.entries if is_image_space(entry.space, normalized_image=normalized))


def _new_features_extractor(cls, ob_space: gym.Space, features_extractor_kwargs: dict) -> keras.layers.Layer:
    """``cls(ob_space, **features_extractor_kwargs)``, the class registered so that a saved model names it
    (``sbtf.common.registry``); TypeError when ``cls`` is not a Keras layer class with a ``features_dim``."""
    if not (isinstance(cls, type) and issubclass(cls, keras.layers.Layer)):
        raise TypeError(f"Error: features_extractor_class must be a keras.layers.Layer subclass (with a "
                        f"features_dim attribute), got {cls!r}")
    if lookup_class(class_key(cls), ("extractor",)) is not cls:
        register_class(cls, "extractor")  # a saved model names it (sbtf.common.registry)
    layer = cls(ob_space, **features_extractor_kwargs)
    features_dim_of(layer)
    return layer


def _checked_features_dim(layer: keras.layers.Layer, out) -> int:
    """The ``features_dim`` of an extractor after its first call gave ``out`` (ValueError when they disagree)."""
    dim = features_dim_of(layer)
    if len(out.shape) != 2 or int(out.shape[-1]) != dim:
        raise ValueError(f"Error: the feature extractor {type(layer).__name__} says features_dim={dim} but "
                         f"outputs shape {tuple(out.shape)}; it must output (batch, features_dim).")
    return dim


def _extractor_xla_friendly(layer: keras.layers.Layer) -> bool:
    """Whether XLA pays off on CPU for this extractor: sbtf's flattening only (a user's Keras layers may use ops XLA
    cannot compile; convolutions run slower under XLA on CPU, ``sbtf.common.compile.fast_call.xla_pays_off``)."""
    return type(layer) is FlattenExtractor or (type(layer) is CombinedExtractor and not layer.image_keys)


class Sb3NetworkBuilder:
    """The construction helpers of ``FeedForwardPolicy`` (mixed into it; they use its attributes)."""

    # --- construction helpers ----------------------------------------------------------------
    def _image_keys(self) -> frozenset:
        """The keys of a Dict space that hold images (SB3's rule, see ``sbtf.common.extractors.is_image_space``)."""
        return _dict_image_keys(self.dict_layout, self.features_extractor_kwargs)

    def _new_extractor(self) -> keras.layers.Layer:
        return _new_features_extractor(self.features_extractor_class, self.ob_space, self.features_extractor_kwargs)

    def _build_extractor(self, scope: str) -> tuple[keras.layers.Layer, int]:
        layer = self._new_extractor()
        dummy = self._preprocess_input(TF_OPS, tf.zeros((1,) + self.obs_shape, tf.as_dtype(self.obs_dtype)))
        dim = _checked_features_dim(layer, layer(dummy))
        if self.ortho_init and not hasattr(layer, "named_variables"):
            _reinit_keras_sublayers(layer, np.sqrt(2))
        elif not self.ortho_init:
            flatten = getattr(layer, "_flatten_layers", None)
            _torch_default_init(list(flatten(include_self=True, recursive=True)) if callable(flatten) else [layer])
        self._register(_ScopedExtractor(scope, layer))
        return layer, dim

    def _build_extractors(self, shared: list) -> int:
        if self.share_features_extractor:
            self.features_extractor, dim = self._build_extractor("features_extractor")
            return dim
        if shared:
            raise ValueError("Error: net_arch has shared layers, which need share_features_extractor=True.")
        self.pi_features_extractor, pi_dim = self._build_extractor("pi_features_extractor")
        self.vf_features_extractor, vf_dim = self._build_extractor("vf_features_extractor")
        return (pi_dim, vf_dim)

    def _build_mlp(self, shared: list, pi_sizes: list, vf_sizes: list, in_dim):
        """The shared, pi and vf layers (SB2 names ``shared_fc{i}``, ``pi_fc{i}``, ``vf_fc{i}``); returns the output
        sizes (pi, vf) (an int when they are equal)."""
        pi_dim, vf_dim = in_dim if isinstance(in_dim, tuple) else (in_dim, in_dim)
        for idx, size in enumerate(shared):
            layer = Linear(f"shared_fc{idx}", size, init_scale=np.sqrt(2))
            layer.build((None, pi_dim))
            pi_dim = vf_dim = size
            self.shared_layers.append(layer)
            self._register(layer)
        for idx, (pi_size, vf_size) in enumerate(zip_longest(pi_sizes, vf_sizes)):
            if pi_size is not None:
                layer = Linear(f"pi_fc{idx}", pi_size, init_scale=np.sqrt(2))
                layer.build((None, pi_dim))
                pi_dim = pi_size
                self.pi_layers.append(layer)
                self._register(layer)
            if vf_size is not None:
                layer = Linear(f"vf_fc{idx}", vf_size, init_scale=np.sqrt(2))
                layer.build((None, vf_dim))
                vf_dim = vf_size
                self.vf_layers.append(layer)
                self._register(layer)
        return (pi_dim, vf_dim)
