"""
Feed-forward actor and critics with SB2's names, shared by the SAC and TD3 policies; the argument checks, the scoped
CNN and the actor/critic parameter order that the DDPG (and, for the first two, DQN) policies share with them.

The actor (``<scope>/[c1..c3, fc1]``, ``<scope>/fc{i}`` [+ ``LayerNorm{_i}``], heads) and the critics
(``<scope>/[c1..c3, fc1]``, one ``SB2Mlp`` + dense head per critic) are written once against a backend ``ops``
(``sbtf.common.nn.network_ops``): in TensorFlow for training, and for acting through the policy's acting path (NumPy
when every layer on the actor has a NumPy form, else one compiled TF call).

``policy_kwargs`` take stable-baselines 2's keywords (``layers``, ``act_fun``, ``layer_norm``, ``feature_extraction``,
``cnn_extractor``) and stable-baselines3's (``net_arch`` as ``[256, 256]`` or ``dict(pi=[...], qf=[...])``,
``activation_fn``, ``n_critics``, ``share_features_extractor``, ``normalize_images``); ``OffPolicyArch`` is what
they resolve to (``resolve_off_policy_arch``).
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

import gymnasium as gym
import keras
import numpy as np
import tensorflow as tf

from sbtf.common.nn.network_ops import TF_OPS
from sbtf.common.tf_layers import Dense, SB2Mlp

#: the arguments of a policy constructor that are not ``policy_kwargs`` (the algorithm passes them)
_POSITIONAL = ("self", "sess", "ob_space", "ac_space", "n_env", "n_steps", "n_batch", "reuse", "obs_phs")


def accepted_policy_keys(policy_cls: type) -> List[str]:
    """The keywords ``policy_kwargs`` may hold for ``policy_cls``: the named arguments of its constructors down to the
    first one that takes no ``**kwargs`` (the policy base, whose arguments the policy sets itself)."""
    keys = set()
    for klass in policy_cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        params = inspect.signature(init).parameters.values()
        if not any(param.kind == param.VAR_KEYWORD for param in params):
            break
        keys.update(param.name for param in params
                    if param.kind in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY)
                    and param.name not in _POSITIONAL)
    return sorted(keys)


def unknown_keywords_error(algo: str, policy_cls: type, unknown: dict) -> ValueError:
    """The error for ``policy_kwargs`` keys a policy does not take: names the algorithm and lists the accepted keys."""
    return ValueError(f"Unknown keywords for policy: {sorted(unknown)} are not accepted by the {algo} policy "
                      f"{policy_cls.__name__}; accepted policy_kwargs: {accepted_policy_keys(policy_cls)}")


def is_image_space(space: gym.Space) -> bool:
    """Whether ``space`` holds images as stable-baselines3 sees them: a uint8 Box (H, W, C) in [0, 255]."""
    from sbtf.common.extractors import is_image_space as sb3_is_image_space

    return sb3_is_image_space(space)


def image_scaling(ob_space: gym.Space, feature_extraction: str, normalize_images: Optional[bool],
                  features_extractor_class: Optional[type] = None) -> bool:
    """
    Whether a policy rescales its observations to [0, 1] (``scale``): SB2's rule (CNN policies do) unless SB3's
    ``normalize_images`` is given (default True with a ``features_extractor_class``, as SB3), which rescales image
    observations only.
    """
    if normalize_images is None and features_extractor_class is None:
        return feature_extraction == "cnn"
    return (normalize_images is None or bool(normalize_images)) and is_image_space(ob_space)


def resolve_activation(act_fun: Any, activation_fn: Any) -> Any:
    """
    The activation of the hidden layers from SB2's ``act_fun`` (default ``tf.nn.relu``) and SB3's ``activation_fn``
    (which wins over the default; an ``act_fun`` of the user's that differs is an error): a TF/Keras function, a name
    (``"tanh"``), or a Keras layer class (instantiated).
    """
    if activation_fn is None:
        fn = tf.nn.relu if act_fun is None else act_fun
    else:
        if act_fun is not None and act_fun is not tf.nn.relu and act_fun is not activation_fn:
            raise ValueError(f"Error: act_fun={act_fun!r} and activation_fn={activation_fn!r} name two activations; "
                             "give one of them.")
        fn = activation_fn
    if isinstance(fn, type) and issubclass(fn, keras.layers.Layer):
        return fn()
    if not (callable(fn) or isinstance(fn, str)):
        raise ValueError(f"Error: the activation must be a function, a name or a Keras layer class, got {fn!r}")
    return fn


def _sizes(value: Any, what: str) -> List[int]:
    if not isinstance(value, (list, tuple)) or not all(
            isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v > 0 for v in value):
        raise ValueError(f"Error: {what} must be a list of positive layer sizes, got {value!r}")
    return [int(v) for v in value]


def split_net_arch(algo: str, layers: Any, net_arch: Any, critic_key: str = "qf") -> Tuple[List[int], List[int]]:
    """
    (actor sizes, critic sizes) from SB2's ``layers`` or SB3's ``net_arch`` (``[256, 256]``: the same for both;
    ``dict(pi=[...], qf=[...])``). Neither: SB2's [64, 64].
    """
    if net_arch is not None and layers is not None:
        raise ValueError(f"Error: {algo} got both SB2's layers={layers!r} and SB3's net_arch={net_arch!r}; give one.")
    if net_arch is None:
        sizes = [64, 64] if layers is None else _sizes(layers, "layers")
        return sizes, list(sizes)
    if isinstance(net_arch, dict):
        keys = {"pi", critic_key}
        if set(net_arch) != keys:
            raise ValueError(f"Error: {algo}'s net_arch dict must have exactly the keys {sorted(keys)} (actor and "
                             f"critic layer sizes), got {sorted(net_arch)}")
        return _sizes(net_arch["pi"], "net_arch['pi']"), _sizes(net_arch[critic_key], f"net_arch['{critic_key}']")
    sizes = _sizes(net_arch, f"{algo}'s net_arch (a list of sizes or dict(pi=[...], {critic_key}=[...]))")
    return sizes, list(sizes)


@dataclass(frozen=True)
class OffPolicyArch:
    """What the ``policy_kwargs`` of an off-policy actor-critic policy resolve to."""

    #: hidden layer sizes of the actor
    actor_sizes: List[int]
    #: hidden layer sizes of each critic
    critic_sizes: List[int]
    #: the activation of the hidden layers
    act_fun: Any
    #: the number of Q critics (SAC, TD3)
    n_critics: int
    #: whether the critics use the actor's feature extractor (SB3's ``share_features_extractor``)
    share_features_extractor: bool


def resolve_off_policy_arch(algo: str, policy_cls: type, obs_shape: Tuple[int, ...], *, layers, net_arch,
                            feature_extraction: str, act_fun, activation_fn, n_critics: int,
                            share_features_extractor: bool, cnn_extractor, cnn_kwargs: dict,
                            min_layers: int = 1, features_extractor_class: Optional[type] = None) -> OffPolicyArch:
    """
    Check the ``policy_kwargs`` of an off-policy actor-critic policy (SB2's errors for SB2's keywords) and resolve
    them (see ``OffPolicyArch``).
    """
    _check_feature_extraction(algo, policy_cls, obs_shape, feature_extraction, cnn_extractor, cnn_kwargs,
                              features_extractor_class)
    if net_arch is None and layers is not None and len(layers) < min_layers:
        raise ValueError("Error: must have at least one hidden layer for the policy.")
    actor, critic = split_net_arch(algo, layers, net_arch)
    if not isinstance(n_critics, (int, np.integer)) or isinstance(n_critics, bool) or n_critics < 1:
        raise ValueError(f"Error: {algo}'s n_critics must be a positive integer, got {n_critics!r}")
    return OffPolicyArch(actor, critic, resolve_activation(act_fun, activation_fn), int(n_critics),
                         bool(share_features_extractor))


def _check_feature_extraction(algo: str, policy_cls: type, obs_shape, feature_extraction: str, cnn_extractor,
                              cnn_kwargs: dict, features_extractor_class: Optional[type] = None) -> None:
    if feature_extraction not in ("cnn", "mlp"):
        raise ValueError(f"Error: feature_extraction must be 'cnn' or 'mlp', got {feature_extraction!r}")
    from sbtf.common.tf_layers import nature_cnn

    # the extra keywords go to SB2's CNN extractor; sbtf's nature CNN and SB3's extractors take none
    if cnn_kwargs and (feature_extraction == "mlp" or cnn_extractor is nature_cnn
                       or features_extractor_class is not None):
        raise unknown_keywords_error(algo, policy_cls, cnn_kwargs)
    if features_extractor_class is not None:
        if cnn_extractor is not nature_cnn:
            raise ValueError(f"Error: {algo} got SB2's cnn_extractor and SB3's features_extractor_class; give one.")
        return
    if feature_extraction == "cnn" and len(obs_shape) != 3:
        raise ValueError(f"Error: CnnPolicy needs image observations (H, W, C), got shape {obs_shape}; use "
                         "MlpPolicy for vector observations.")


def feed_forward_layer_sizes(obs_shape: Tuple[int, ...], layers, feature_extraction: str, cnn_kwargs: dict,
                             min_layers: int = 1, algo: str = "the", policy_cls: Optional[type] = None,
                             cnn_extractor=None, net_arch=None,
                             features_extractor_class: Optional[type] = None) -> List[int]:
    """
    Check the arguments of an off-policy ``FeedForwardPolicy`` (SB2's errors) and return its hidden layer sizes.

    :param obs_shape: the policy's observation shape (a CNN needs images, (H, W, C))
    :param layers: hidden layer sizes, None for SB2's default [64, 64]
    :param feature_extraction: "cnn" or "mlp"
    :param cnn_kwargs: the extra keywords, only valid for a CNN extractor of the user's
    :param min_layers: how many hidden layers the policy needs at least (DQN's Q-network may have none)
    :param algo: the algorithm's name, for messages
    :param policy_cls: the policy class, for the list of accepted keywords
    :param cnn_extractor: the CNN extractor (None: sbtf's nature CNN)
    :param net_arch: SB3's form of ``layers`` (a list of sizes)
    """
    from sbtf.common.tf_layers import nature_cnn

    _check_feature_extraction(algo, policy_cls or object, obs_shape, feature_extraction,
                              nature_cnn if cnn_extractor is None else cnn_extractor, cnn_kwargs,
                              features_extractor_class)
    if net_arch is None and layers is not None and len(layers) < min_layers:
        raise ValueError("Error: must have at least one hidden layer for the policy.")
    if isinstance(net_arch, dict):
        raise ValueError(f"Error: {algo}'s net_arch is one list of layer sizes (the Q-network), got {net_arch!r}")
    return split_net_arch(algo, layers, net_arch)[0]


#: stable-baselines3's default layer sizes of a ``MultiInputPolicy`` (the SB2-style policies keep SB2's [64, 64])
SB3_DEFAULT_NET_ARCH = {"SAC": [256, 256], "TD3": [400, 300], "DDPG": [400, 300], "DQN": [64, 64]}


def setup_dict_observations(policy, algo: str, features_extractor_class: Optional[type],
                            features_extractor_kwargs: Optional[dict], normalize_images: Optional[bool]) -> None:
    """
    For a policy on a Dict observation space (packed rows, ``policy.dict_layout``): check that its extractor takes a
    dict (``MultiInputPolicy``'s ``CombinedExtractor`` or one of the user's) and choose the image keys it rescales to
    [0, 1] (``normalize_images``, SB3's default True).
    """
    if policy.dict_layout is None:
        return
    from sbtf.common.extractors import FlattenExtractor, NatureCNN

    if features_extractor_class in (None, FlattenExtractor, NatureCNN):
        raise NotImplementedError(
            f"Error: {algo}'s {type(policy).__name__} does not take Dict observations ({policy.ob_space!r}); use "
            "policy='MultiInputPolicy' (a NatureCNN per image key, the other keys flattened) or pass a "
            "features_extractor_class that takes a dict in policy_kwargs.")
    if normalize_images is None or normalize_images:
        from sbtf.common.extractors import is_image_space as sb3_is_image_space

        normalized = bool(dict(features_extractor_kwargs or {}).get("normalized_image", False))
        policy._scaled_keys = frozenset(entry.key for entry in policy.dict_layout.entries
                                        if sb3_is_image_space(entry.space, normalized_image=normalized))


def init_sb3_settings(policy, algo: str, net_arch, normalize_images: Optional[bool],
                      features_extractor_class: Optional[type], features_extractor_kwargs: Optional[dict]) -> None:
    """Keep SB3's policy settings on the policy (``net_arch``, ``normalize_images``, the features extractor and its
    keyword arguments) and set up its Dict observations (``setup_dict_observations``)."""
    policy.features_extractor_class = features_extractor_class
    policy.features_extractor_kwargs = dict(features_extractor_kwargs or {})
    policy.net_arch = net_arch
    policy.normalize_images = normalize_images
    setup_dict_observations(policy, algo, features_extractor_class, features_extractor_kwargs, normalize_images)


def multi_input_kwargs(algo: str, kwargs: dict) -> dict:
    """The policy_kwargs of SB3's ``MultiInputPolicy`` (updated in place and returned): a ``CombinedExtractor`` and,
    without ``net_arch`` or ``layers``, SB3's default layer sizes of ``algo`` (``SB3_DEFAULT_NET_ARCH``)."""
    from sbtf.common.extractors import CombinedExtractor

    kwargs.setdefault("features_extractor_class", CombinedExtractor)
    if kwargs.get("net_arch") is None and kwargs.get("layers") is None:
        kwargs["net_arch"] = list(SB3_DEFAULT_NET_ARCH[algo])
    return kwargs


def preprocess_ops(policy, obs, ops):
    """A policy's pre-processing in the backend ``ops``: a ``{key: tensor}`` dict for a Dict space, else one tensor."""
    if getattr(policy, "dict_layout", None) is not None:
        from sbtf.common.envs.dict_obs import preprocess_dict

        return preprocess_dict(ops, obs, policy.dict_layout, policy._scaled_keys)
    return ops.preprocess(obs, policy.ob_space, policy.scale)


class ScopedExtractor:
    """The variables of a feature extractor under one scope (``pi/features_extractor/...``), for named_parameters."""

    def __init__(self, scope: str, layer: keras.layers.Layer):
        self.scope = scope
        self.layer = layer

    def named_variables(self) -> list:
        from sbtf.common.extractors import extractor_named_variables

        return [(f"{self.scope}/{name}", var) for name, var in extractor_named_variables(self.layer).items()]


def make_features_extractor(policy, extractor_class: type, extractor_kwargs: Optional[dict],
                            scope: str) -> Tuple[keras.layers.Layer, ScopedExtractor]:
    """
    A new ``extractor_class(policy.ob_space, **extractor_kwargs)`` (SB3's ``features_extractor_class``: any Keras
    layer with a ``features_dim``), built on the policy's pre-processed observations, its variables named under
    ``scope``; the class is registered so that a saved model names it.
    """
    from sbtf.common.extractors import features_dim_of
    from sbtf.common.registry import class_key, lookup_class, register_class

    if not (isinstance(extractor_class, type) and issubclass(extractor_class, keras.layers.Layer)):
        raise TypeError(f"Error: features_extractor_class must be a keras.layers.Layer subclass with a features_dim "
                        f"attribute, got {extractor_class!r}")
    if lookup_class(class_key(extractor_class), ("extractor",)) is not extractor_class:
        register_class(extractor_class, "extractor")
    layer = extractor_class(policy.ob_space, **dict(extractor_kwargs or {}))
    dim = features_dim_of(layer)
    out = layer(policy.preprocess(tf.zeros((1,) + policy.obs_shape, tf.as_dtype(policy.obs_dtype))))
    if len(out.shape) != 2 or int(out.shape[-1]) != dim:
        raise ValueError(f"Error: the feature extractor {extractor_class.__name__} says features_dim={dim} but "
                         f"outputs shape {tuple(out.shape)}; it must output (batch, features_dim).")
    return layer, ScopedExtractor(scope, layer)


def scoped_cnn(cnn_extractor, cnn_kwargs: dict, scope: str) -> Tuple[Any, list]:
    """A new CNN feature extractor whose SB2-named layers live under ``scope``; (the layer, its named layers)."""
    cnn = cnn_extractor(**cnn_kwargs)
    layers = cnn.sb2_layers() if hasattr(cnn, "sb2_layers") else []
    for layer in layers:
        layer.scope = f"{scope}/{layer.scope}"
    return cnn, layers


def _variables(layers: Sequence) -> list:
    return [var for layer in layers for _, var in layer.named_variables()]


class ActorCriticLayers:
    """
    Mixin for ``BasePolicy`` subclasses with an actor and critics (SAC, TD3, DDPG): their SB2-named layers in
    ``_actor_named`` and ``_critic_named``, listed actor first whatever the building order (``named_parameters``).

    The critics have a feature extractor of their own (``<critic scope>/c1...``, SB2's layout and SB3's default
    ``share_features_extractor=False``) or use the actor's (``share_features_extractor=True``: it is then trained by
    the actor's loss only, the critics read its features without gradient, as in stable-baselines3).
    """

    share_features_extractor = False

    features_extractor_class: Optional[type] = None
    features_extractor_kwargs: Optional[dict] = None

    def _make_cnn(self, scope: str, named: list):
        """The feature extractor of a network under ``scope``: SB3's ``features_extractor_class``
        (``<scope>/features_extractor/...``), SB2's CNN (``<scope>/c1...``) or None (Mlp policies: flattened
        observations); its named layers are appended to ``named``."""
        if self.features_extractor_class is not None:
            cnn, scoped = make_features_extractor(self, self.features_extractor_class, self.features_extractor_kwargs,
                                                  f"{scope}/features_extractor")
            layers = [scoped]
        elif self.feature_extraction != "cnn":
            return None
        else:
            cnn, layers = scoped_cnn(self.cnn_extractor, self.cnn_kwargs, scope)
        named.extend(layers)
        self.__dict__.setdefault("_extractor_layers", {})[id(cnn)] = layers
        return cnn

    def _actor_extractor(self, scope: str = "pi"):
        """The actor's feature extractor, created under ``scope`` on first use (None for Mlp policies)."""
        if self.actor_cnn is None:
            self.actor_cnn = self._make_cnn(scope, self._actor_named)
        return self.actor_cnn

    def _critic_extractor(self, scope: str):
        """The critics' feature extractor: their own under ``scope``, or the actor's when it is shared."""
        if self.share_features_extractor:
            return self._actor_extractor()
        return self._make_cnn(scope, self._critic_named)

    def _extractor_variables(self, extractor) -> list:
        """The variables of a feature extractor made by ``_make_cnn`` (none for Mlp policies)."""
        if extractor is None:
            return []
        return _variables(self.__dict__.get("_extractor_layers", {}).get(id(extractor), []))

    def _parameter_layers(self) -> list:
        return list(self._actor_named) + list(self._critic_named)

    def actor_variables(self) -> list:
        return _variables(self._actor_named)

    def critic_variables(self) -> list:
        """The variables the critics' optimizer trains (without a feature extractor shared with the actor)."""
        return _variables(self._critic_named)


class ActorCriticNetworks(ActorCriticLayers):
    """
    Mixin for ``BasePolicy`` subclasses (SAC's and TD3's feed-forward policies): builds SB2's actor and critics with
    SB2's variable names, lists them in SB2 order (``named_parameters``) and acts through an acting path over the
    functions of ``_acting_functions()``.
    """

    def _init_networks(self, arch: OffPolicyArch, cnn_extractor, feature_extraction: str, layer_norm: bool,
                       cnn_kwargs: dict) -> None:
        #: hidden sizes of the actor (SB2's attribute name) and of each critic
        self.layer_sizes = list(arch.actor_sizes)
        self.qf_layer_sizes = list(arch.critic_sizes)
        self.n_critics = arch.n_critics
        self.share_features_extractor = arch.share_features_extractor
        self.feature_extraction = feature_extraction
        self.layer_norm = bool(layer_norm)
        self.activ_fn = arch.act_fun
        self.act_fun = arch.act_fun
        self.cnn_extractor = cnn_extractor
        self.cnn_kwargs = cnn_kwargs
        self.n_act = int(np.prod(self.ac_space.shape))
        self._actor_named: list = []
        self._critic_named: list = []
        self.actor_cnn = None
        self.actor_mlp = None
        self.actor_heads: list = []
        self.critic_cnn = None
        self.critic_mlps: dict = {}
        self.critic_heads: dict = {}
        self._dummy_obs = tf.zeros((1,) + self.obs_shape, tf.as_dtype(self.obs_dtype))

    @property
    def qf_names(self) -> List[str]:
        """The names of the Q critics: SB2's ``qf1``, ``qf2``, then ``qf3`` ... for ``n_critics`` > 2."""
        return [f"qf{i + 1}" for i in range(self.n_critics)]

    def features(self, obs, cnn, ops=TF_OPS):
        """Pre-processed, flattened observations, or the extractor's features (in the backend ``ops``)."""
        x = preprocess_ops(self, obs, ops)
        if cnn is not None:
            return ops.layer(cnn, x)
        return ops.flatten(x)

    def _build_actor(self, scope: str, heads: Sequence[Tuple[str, Any]]) -> None:
        """Create the actor: features, hidden stack and ``heads`` [(name, activation)], each of n_act units."""
        self.actor_scope = scope
        self._actor_extractor(scope)
        self.actor_mlp = SB2Mlp(scope, self.layer_sizes, self.activ_fn, layer_norm=self.layer_norm, style="mlp")
        self._actor_named.extend(self.actor_mlp.sb2_layers())
        self.actor_heads = [Dense(f"{scope}/{name}", self.n_act, activation=activation) for name, activation in heads]
        self._actor_named.extend(self.actor_heads)
        latent = self.actor_mlp(self.features(self._dummy_obs, self.actor_cnn))
        for head in self.actor_heads:
            head(latent)
        self._acting = self._new_acting_path(self._acting_functions())

    def _acting_functions(self) -> dict:
        """``{name: (fn(ops, *inputs), input specs)}`` of the actor, for the acting path."""
        raise NotImplementedError

    def actor_latent(self, obs, ops=TF_OPS):
        """The actor's hidden features of a batch of observations (in the backend ``ops``)."""
        return ops.layer(self.actor_mlp, self.features(obs, self.actor_cnn, ops))

    def actor_head_outputs(self, obs, ops=TF_OPS) -> list:
        """The outputs of the actor's heads (after their activations) for a batch of observations."""
        latent = self.actor_latent(obs, ops)
        return [ops.layer(head, latent) for head in self.actor_heads]

    def _build_critics(self, scope: str, names: Sequence[str], with_action: Sequence[bool]) -> None:
        """Create critics ``<scope>/<name>/{fc*, <name>}`` (Q critics take ``concat[features, action]``)."""
        self.critic_scope = scope
        self.critic_cnn = self._critic_extractor(scope)
        features = self.features(self._dummy_obs, self.critic_cnn)
        for name, takes_action in zip(names, with_action):
            mlp = SB2Mlp(f"{scope}/{name}", self.qf_layer_sizes, self.activ_fn, layer_norm=self.layer_norm,
                         style="mlp")
            head = Dense(f"{scope}/{name}/{name}", 1)
            self._critic_named.extend(mlp.sb2_layers())
            self._critic_named.append(head)
            inputs = tf.concat([features, tf.zeros((1, self.n_act))], axis=-1) if takes_action else features
            head(mlp(inputs))
            self.critic_mlps[name] = mlp
            self.critic_heads[name] = head

    def critic(self, name: str, features, action=None):
        """Output (batch, 1) of critic ``name`` on critic features (and an action in [-1, 1] for Q critics)."""
        inputs = features if action is None else tf.concat([features, action], axis=-1)
        return self.critic_heads[name](self.critic_mlps[name](inputs))

    def critic_features(self, obs):
        """The critics' features of a batch of observations (without gradient into an extractor they share)."""
        features = self.features(obs, self.critic_cnn)
        if self.share_features_extractor and self.critic_cnn is not None:
            return tf.stop_gradient(features)
        return features

    def critic_network_variables(self, names: Sequence[str]) -> list:
        """The variables of the critics ``names`` and of the feature extractor they read (owned or shared), in SB2
        order: the pairs a target network follows."""
        variables = self._extractor_variables(self.critic_cnn)
        for name in names:
            variables += _variables(self.critic_mlps[name].sb2_layers() + [self.critic_heads[name]])
        return variables

    # ------------------------------------------------------------------ acting path
    def acting_variables(self) -> list:
        """The variables the NumPy acting copies mirror (the actor's), in order (every tracked write of them
        refreshes the copies, see ``sbtf.common.compile.weight_tracking``)."""
        if self._acting is not None and self._acting.uses_numpy:
            return list(self._acting.variables)
        return self.actor_variables()

    def _run_acting(self, name: str, obs):
        """Run acting function ``name`` on a batch of raw observations (NumPy or one compiled TF call)."""
        return self._acting(name, self._prepare_obs(obs))


__all__ = ["ActorCriticLayers", "ActorCriticNetworks", "OffPolicyArch", "ScopedExtractor", "make_features_extractor",
           "accepted_policy_keys", "setup_dict_observations", "preprocess_ops", "SB3_DEFAULT_NET_ARCH",
           "feed_forward_layer_sizes", "image_scaling", "is_image_space", "resolve_activation",
           "resolve_off_policy_arch", "scoped_cnn", "split_net_arch", "unknown_keywords_error"]
