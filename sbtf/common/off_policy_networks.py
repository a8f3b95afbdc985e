"""
Feed-forward actor and critics with SB2's names, shared by the SAC and TD3 policies; the argument checks, the scoped
CNN and the actor/critic parameter order that the DDPG (and, for the first two, DQN) policies share with them.

The actor (``<scope>/[c1..c3, fc1]``, ``<scope>/fc{i}`` [+ ``LayerNorm{_i}``], heads) and the critics
(``<scope>/[c1..c3, fc1]``, one ``SB2Mlp`` + dense head per critic) are written once against a backend ``ops``
(``sbtf.common.network_ops``): in TensorFlow for training, and for acting through the policy's acting path (NumPy
when every layer on the actor has a NumPy form, else one compiled TF call).
"""
from __future__ import annotations

from typing import Any, List, Sequence, Tuple

import numpy as np
import tensorflow as tf

from sbtf.common.network_ops import TF_OPS
from sbtf.common.tf_layers import Dense, SB2Mlp


def feed_forward_layer_sizes(obs_shape: Tuple[int, ...], layers, feature_extraction: str, cnn_kwargs: dict,
                             min_layers: int = 1) -> List[int]:
    """
    Check the arguments of an off-policy ``FeedForwardPolicy`` (SB2's errors) and return its hidden layer sizes.

    :param obs_shape: the policy's observation shape (a CNN needs images, (H, W, C))
    :param layers: hidden layer sizes, None for SB2's default [64, 64]
    :param feature_extraction: "cnn" or "mlp"
    :param cnn_kwargs: the extra keywords, only valid for the CNN extractor
    :param min_layers: how many hidden layers the policy needs at least (DQN's Q-network may have none)
    """
    if feature_extraction not in ("cnn", "mlp"):
        raise ValueError(f"Error: feature_extraction must be 'cnn' or 'mlp', got {feature_extraction!r}")
    if feature_extraction == "mlp" and cnn_kwargs:
        raise ValueError(f"Unknown keywords for policy: {cnn_kwargs}")
    if layers is None:
        layers = [64, 64]
    if len(layers) < min_layers:
        raise ValueError("Error: must have at least one hidden layer for the policy.")
    if feature_extraction == "cnn" and len(obs_shape) != 3:
        raise ValueError(f"Error: CnnPolicy needs image observations (H, W, C), got shape {obs_shape}; use "
                         "MlpPolicy for vector observations.")
    return [int(n) for n in layers]


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
    """

    def _make_cnn(self, scope: str, named: list):
        """The CNN of a network under ``scope`` (None for Mlp policies); its named layers are appended to ``named``."""
        if self.feature_extraction != "cnn":
            return None
        cnn, layers = scoped_cnn(self.cnn_extractor, self.cnn_kwargs, scope)
        named.extend(layers)
        return cnn

    def _parameter_layers(self) -> list:
        return list(self._actor_named) + list(self._critic_named)

    def actor_variables(self) -> list:
        return _variables(self._actor_named)

    def critic_variables(self) -> list:
        return _variables(self._critic_named)


class ActorCriticNetworks(ActorCriticLayers):
    """
    Mixin for ``BasePolicy`` subclasses (SAC's and TD3's feed-forward policies): builds SB2's actor and critics with
    SB2's variable names, lists them in SB2 order (``named_parameters``) and acts through an acting path over the
    functions of ``_acting_functions()``.
    """

    def _init_networks(self, layers, cnn_extractor, feature_extraction: str, layer_norm: bool, act_fun,
                       cnn_kwargs: dict) -> None:
        self.layer_sizes = feed_forward_layer_sizes(
            self.obs_shape, layers, feature_extraction, cnn_kwargs)
        self.feature_extraction = feature_extraction
        self.layer_norm = bool(layer_norm)
        self.activ_fn = act_fun
        self.act_fun = act_fun
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

    def features(self, obs, cnn, ops=TF_OPS):
        """Pre-processed, flattened observations, or CNN features (in the backend ``ops``)."""
        x = ops.preprocess(obs, self.ob_space, self.scale)
        if cnn is not None:
            return ops.layer(cnn, x)
        return ops.flatten(x)

    def _build_actor(self, scope: str, heads: Sequence[Tuple[str, Any]]) -> None:
        """Create the actor: features, hidden stack and ``heads`` [(name, activation)], each of n_act units."""
        self.actor_scope = scope
        self.actor_cnn = self._make_cnn(scope, self._actor_named)
        self.actor_mlp = SB2Mlp(scope, self.layer_sizes, self.activ_fn, layer_norm=self.layer_norm, style="mlp")
        self._actor_named.extend(self.actor_mlp.sb2_layers())
        self.actor_heads = [Dense(f"{scope}/{name}", self.n_act, activation=activation) for name, activation in heads]
        self._actor_named.extend(self.actor_heads)
        latent = self.actor_mlp(self.features(self._dummy_obs, self.actor_cnn))
        for head in self.actor_heads:
            head(latent)
        self._acting = self._new_acting_path(self._acting_functions())
        self.weights_changed()

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
        self.critic_cnn = self._make_cnn(scope, self._critic_named)
        features = self.features(self._dummy_obs, self.critic_cnn)
        for name, takes_action in zip(names, with_action):
            mlp = SB2Mlp(f"{scope}/{name}", self.layer_sizes, self.activ_fn, layer_norm=self.layer_norm, style="mlp")
            head = Dense(f"{scope}/{name}/{name}", 1)
            self._critic_named.extend(mlp.sb2_layers())
            self._critic_named.append(head)
            inputs = tf.concat([features, tf.zeros((1, self.n_act))], axis=-1) if takes_action else features
            head(mlp(inputs))
            self.critic_mlps[name] = mlp
            self.critic_heads[name] = head
        self.weights_changed()

    def critic(self, name: str, features, action=None):
        """Output (batch, 1) of critic ``name`` on critic features (and an action in [-1, 1] for Q critics)."""
        inputs = features if action is None else tf.concat([features, action], axis=-1)
        return self.critic_heads[name](self.critic_mlps[name](inputs))

    def critic_features(self, obs):
        return self.features(obs, self.critic_cnn)

    # ------------------------------------------------------------------ acting path
    def acting_variables(self) -> list:
        """The variables the NumPy acting copies mirror (the actor's), in order; see ``set_numpy_weights``."""
        if self._acting is not None and self._acting.uses_numpy:
            return list(self._acting.variables)
        return self.actor_variables()

    def set_numpy_weights(self, arrays: Sequence[np.ndarray]) -> None:
        """Install fresh NumPy copies of ``acting_variables()`` (e.g. returned by a train step) at the current weight
        version; new code passes the policy to ``TrainStep(updates=...)`` instead."""
        if self._acting is not None:
            self._acting.install(list(arrays))

    def _run_acting(self, name: str, obs):
        """Run acting function ``name`` on a batch of raw observations (NumPy or one compiled TF call)."""
        return self._acting(name, self._prepare_obs(obs))


__all__ = ["ActorCriticLayers", "ActorCriticNetworks", "feed_forward_layer_sizes", "scoped_cnn"]
