"""Maskable actor-critic policies (sb3-contrib ``common/maskable/policies.py``) on sbtf's policy layer.

The network is sb3's default actor-critic: features (flattened observations, a NatureCNN for images, a
``CombinedExtractor`` for Dict observations or any Keras extractor of the user's), separate
policy and value MLPs (``net_arch=dict(pi=[64, 64], vf=[64, 64])``, ``activation_fn=tanh``, orthogonal init with gain
sqrt(2), 0.01 for the action logits and 1 for the value), written once against a backend ``ops`` so that acting runs
in NumPy (through one compiled TF call when the extractor has no NumPy form). The action logits are flat over every
categorical component (``MultiBinary(n)`` has ``2 n`` logits, as in sb3-contrib); the masked maths is
:class:`~sbtf.contrib.common.maskable.distributions.MaskableDistribution`.
"""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from sbtf.common.extractors import FlattenExtractor, NatureCNN
from sbtf.common.nn.network_ops import TF_OPS
from sbtf.common.policies import ActorCriticPolicy, register_policy_base
from sbtf.common.tf_layers import Linear
from sbtf.contrib.common.maskable.distributions import make_masked_proba_distribution
from sbtf.sb3.common.networks import FeaturesExtractor, resolve_extractor_class

__all__ = ["MaskableActorCriticPolicy", "MaskableActorCriticCnnPolicy", "MaskableMultiInputActorCriticPolicy",
           "parse_sb3_net_arch"]


def parse_sb3_net_arch(net_arch) -> Tuple[list, list]:
    """
    sb3's ``net_arch`` (``[64, 64]``: the same sizes for the policy and the value network, or
    ``dict(pi=[...], vf=[...])``) as (pi sizes, vf sizes).
    """
    if isinstance(net_arch, dict):
        unknown = set(net_arch) - {"pi", "vf"}
        if unknown:
            raise ValueError(f"net_arch dict keys must be 'pi' and 'vf', got {sorted(unknown)}")
        return [int(s) for s in net_arch.get("pi", [])], [int(s) for s in net_arch.get("vf", [])]
    if isinstance(net_arch, (list, tuple)) and all(isinstance(s, (int, np.integer)) for s in net_arch):
        return [int(s) for s in net_arch], [int(s) for s in net_arch]
    raise ValueError(f"net_arch must be a list of layer sizes or dict(pi=[...], vf=[...]) (sb3's forms), "
                     f"got {net_arch!r}")


class MaskableActorCriticPolicy(ActorCriticPolicy):
    """
    Actor-critic policy whose categorical action distribution takes action masks (sb3-contrib's
    ``MaskableActorCriticPolicy``; the ``MlpPolicy`` of ``MaskablePPO``).

    Variable names: ``model/pi_fc{i}``, ``model/vf_fc{i}``, ``model/pi``, ``model/vf``; the built-in NatureCNN's
    ``model/c1`` ... ``model/fc1`` (the names MaskablePPO's CnnPolicy always had); any other extractor's variables
    under ``model/features_extractor/`` (``CombinedExtractor``: ``<key>/c1/w`` ...; a user's layer: ``0_kernel`` ...).

    :param net_arch: (list or dict) sb3's network architecture (default ``dict(pi=[64, 64], vf=[64, 64])``; ``[]``
        behind a CNN)
    :param activation_fn: (str or function) the activation of the hidden layers (default tanh)
    :param ortho_init: (bool) orthogonal initialisation (sbtf's layers are always initialised orthogonally; a user's
        Keras extractor gets orthogonal Dense / Conv kernels of gain sqrt(2), as sb3 does)
    :param features_extractor_class: (type) the features extractor: any Keras layer class with a ``features_dim``
        (``sbtf.common.extractors``), built as ``cls(observation_space, **features_extractor_kwargs)``, or a built-in
        one by name (``"FlattenExtractor"``, ``"NatureCNN"``, ``"CombinedExtractor"``); default by policy name
    :param features_extractor_kwargs: (dict) its keyword arguments (NatureCNN: ``features_dim``,
        ``normalized_image``; CombinedExtractor: ``cnn_output_dim``, ``normalized_image``)
    :param share_features_extractor: (bool) must be True (one extractor for the actor and the critic)
    :param normalize_images: (bool) divide image observations by 255
    """

    _default_extractor = "FlattenExtractor"

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, reuse=False,
                 net_arch=None, activation_fn="tanh", ortho_init: bool = True, features_extractor_class=None,
                 features_extractor_kwargs: Optional[dict] = None, share_features_extractor: bool = True,
                 normalize_images: bool = True):
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, reuse=reuse, dict_obs_ok=True)
        if not ortho_init:
            raise ValueError("ortho_init=False is not available in sbtf: its layers are initialised orthogonally")
        if not share_features_extractor:
            raise NotImplementedError("Error: MaskablePPO policies in sbtf share their features extractor "
                                      "(share_features_extractor=True).")
        self.dist = make_masked_proba_distribution(ac_space)
        self.net_arch = net_arch
        self.activation_fn = activation_fn
        self.ortho_init = ortho_init
        self.normalize_images = normalize_images
        extractor = resolve_extractor_class(features_extractor_class, self._default_extractor)
        self.features_extractor_class = extractor
        self.features_extractor_kwargs = dict(features_extractor_kwargs or {})
        self.share_features_extractor = True
        # the built-in NatureCNN / flattening keep the root names MaskablePPO always had; the others are scoped
        root = extractor in (NatureCNN, FlattenExtractor)
        self.features_extractor = FeaturesExtractor("" if root else "features_extractor", ob_space, extractor,
                                                    normalize_images, self.features_extractor_kwargs,
                                                    ortho_gain=np.sqrt(2), name="features_extractor")
        self._scaled_keys = getattr(self.features_extractor, "scaled_keys", frozenset())
        self.scale = self.features_extractor.scale
        #: "mlp" when the extractor is sbtf's flattening (what the XLA choice reads)
        self.feature_extraction = "mlp" if self.features_extractor.xla_friendly else "cnn"
        self._register(*self.features_extractor.named_layers())
        if net_arch is None:
            net_arch = [] if extractor is NatureCNN else dict(pi=[64, 64], vf=[64, 64])
        pi_sizes, vf_sizes = parse_sb3_net_arch(net_arch)
        features_dim = self.features_extractor.features_dim
        self.pi_layers = self._mlp("pi_fc", features_dim, pi_sizes)
        self.vf_layers = self._mlp("vf_fc", features_dim, vf_sizes)
        self.pi_head = self._linear("pi", pi_sizes[-1] if pi_sizes else features_dim, self.dist.n_logits, 0.01)
        self.vf_head = self._linear("vf", vf_sizes[-1] if vf_sizes else features_dim, 1, 1.0)
        self._finish_build()
        self._acting = self._new_acting_path({"network": (self.network, [self.obs_signature()])})

    @property
    def xla_friendly(self) -> bool:
        """Whether XLA pays off on CPU (``sbtf.common.compile.fast_call.xla_pays_off``): sbtf's flattening only."""
        return self.features_extractor.xla_friendly

    def _linear(self, scope: str, n_in: int, n_out: int, gain: float) -> Linear:
        layer = Linear(scope, n_out, init_scale=gain)
        layer.build((None, n_in))
        self._register(layer)
        return layer

    def _mlp(self, prefix: str, n_in: int, sizes: list) -> list:
        layers = []
        for idx, size in enumerate(sizes):
            layers.append(self._linear(f"{prefix}{idx}", n_in, size, np.sqrt(2)))
            n_in = size
        return layers

    # ------------------------------------------------------------------ the network, written once
    def network(self, ops, obs, with_q: bool = False):
        """Action logits (flat over the components) and values, in the backend ``ops``."""
        features = self.features_extractor.ops_call(obs, ops)
        act = ops.activation(self.activation_fn)
        latent_pi, latent_vf = features, features
        for layer in self.pi_layers:
            latent_pi = act(ops.layer(layer, latent_pi))
        for layer in self.vf_layers:
            latent_vf = act(ops.layer(layer, latent_vf))
        return ops.layer(self.pi_head, latent_pi), ops.layer(self.vf_head, latent_vf)[:, 0]

    def network_tf(self, obs):
        """``network`` in TensorFlow (train steps, export): (logits, values)."""
        return self.network(TF_OPS, obs)

    def forward(self, obs, state=None, mask=None, n_steps: int = 1):
        logits, value = self.network(TF_OPS, obs)
        return logits, value, None, None

    # ------------------------------------------------------------------ acting (NumPy when possible)
    def _logits_values(self, obs) -> Tuple[np.ndarray, np.ndarray]:
        return self._acting("network", self._prepare_obs(obs))

    def step_masked(self, obs, action_masks: Optional[np.ndarray] = None, deterministic: bool = False):
        """
        One acting step with masks.

        :param obs: a batch of observations
        :param action_masks: (n, n_choices) booleans, or None (no masking)
        :return: (actions, values, negative log-likelihoods)
        """
        logits, values = self._logits_values(obs)
        masks = None if action_masks is None else self.dist.check_masks(action_masks, logits.shape[0])
        actions, log_prob = self.dist.act_np(logits, masks, self.np_random, deterministic)
        return actions, values, -log_prob

    def step(self, obs, state=None, mask=None, deterministic=False):
        actions, values, neglogp = self.step_masked(obs, None, deterministic)
        return actions, values, None, neglogp

    def act(self, obs, state=None, mask=None, deterministic=False):
        actions, values, _ = self.step_masked(obs, None, deterministic)
        return actions, values, None

    def flat_params(self, obs, state=None, mask=None) -> np.ndarray:
        return self._logits_values(obs)[0]

    def value(self, obs, state=None, mask=None) -> np.ndarray:
        return self._logits_values(obs)[1]

    def proba_step(self, obs, state=None, mask=None):
        """The probabilities of every choice (flat over the components), unmasked."""
        return self.dist.probabilities_np(self.flat_params(obs))


class MaskableActorCriticCnnPolicy(MaskableActorCriticPolicy):
    """``MaskableActorCriticPolicy`` with a NatureCNN feature extractor (the ``CnnPolicy`` of ``MaskablePPO``)."""

    _default_extractor = "NatureCNN"


class MaskableMultiInputActorCriticPolicy(MaskableActorCriticPolicy):
    """``MaskableActorCriticPolicy`` for Dict observations (the ``MultiInputPolicy`` of ``MaskablePPO``):
    ``CombinedExtractor`` features (a NatureCNN per image key, the other keys flattened,
    ``sbtf.common.envs.dict_obs``)."""

    _default_extractor = "CombinedExtractor"


MlpPolicy = MaskableActorCriticPolicy
CnnPolicy = MaskableActorCriticCnnPolicy
MultiInputPolicy = MaskableMultiInputActorCriticPolicy

register_policy_base(MaskableActorCriticPolicy, {"MlpPolicy": MaskableActorCriticPolicy,
                                                 "CnnPolicy": MaskableActorCriticCnnPolicy,
                                                 "MultiInputPolicy": MaskableMultiInputActorCriticPolicy})
