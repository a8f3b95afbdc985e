"""Maskable actor-critic policies (sb3-contrib ``common/maskable/policies.py``) on sbtf's policy layer.

The network is sb3's default actor-critic: features (flattened observations, or a NatureCNN for images), separate
policy and value MLPs (``net_arch=dict(pi=[64, 64], vf=[64, 64])``, ``activation_fn=tanh``, orthogonal init with gain
sqrt(2), 0.01 for the action logits and 1 for the value), written once against a backend ``ops`` so that acting runs
in NumPy. The action logits are flat over every categorical component (``MultiBinary(n)`` has ``2 n`` logits, as in
sb3-contrib); the masked maths is :class:`~sbtf.contrib.common.maskable.distributions.MaskableDistribution`.
"""
from __future__ import annotations

from typing import Optional, Tuple

import gymnasium as gym
import numpy as np

from sbtf.common.input import preprocess_obs_np
from sbtf.common.network_ops import TF_OPS
from sbtf.common.policies import ActorCriticPolicy, register_policy_base
from sbtf.common.tf_layers import Linear, NatureCNN
from sbtf.contrib.common.maskable.distributions import make_masked_proba_distribution

__all__ = ["MaskableActorCriticPolicy", "MaskableActorCriticCnnPolicy", "parse_sb3_net_arch"]


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

    :param net_arch: (list or dict) sb3's network architecture (default ``dict(pi=[64, 64], vf=[64, 64])``; ``[]``
        behind a CNN)
    :param activation_fn: (str or function) the activation of the hidden layers (default tanh)
    :param ortho_init: (bool) orthogonal initialisation (sbtf's layers are always initialised orthogonally)
    :param normalize_images: (bool) divide image observations by 255
    """

    _uses_cnn = False

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, reuse=False,
                 net_arch=None, activation_fn="tanh", ortho_init: bool = True, normalize_images: bool = True):
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, reuse=reuse,
                         scale=self._uses_cnn and normalize_images)
        if not ortho_init:
            raise ValueError("ortho_init=False is not available in sbtf: its layers are initialised orthogonally")
        self.dist = make_masked_proba_distribution(ac_space)
        self.net_arch = net_arch
        self.activation_fn = activation_fn
        self.ortho_init = ortho_init
        self.normalize_images = normalize_images
        self.feature_extraction = "cnn" if self._uses_cnn else "mlp"
        if net_arch is None:
            net_arch = [] if self._uses_cnn else dict(pi=[64, 64], vf=[64, 64])
        pi_sizes, vf_sizes = parse_sb3_net_arch(net_arch)
        if self._uses_cnn:
            if len(self.obs_shape) != 3:
                raise ValueError(f"Error: CnnPolicy needs image observations (H, W, C), got shape {self.obs_shape}; "
                                 "use MlpPolicy for vector observations.")
            self.cnn = NatureCNN()
            features_dim = int(self.cnn(np.zeros((1,) + self.obs_shape, np.float32)).shape[-1])
            self._register(*self.cnn.sb2_layers())
        else:
            self.cnn = None
            features_dim = int(np.prod(preprocess_obs_np(np.zeros((1,) + self.obs_shape, self.obs_dtype),
                                                         ob_space).shape[1:]))
        self.pi_layers = self._mlp("pi_fc", features_dim, pi_sizes)
        self.vf_layers = self._mlp("vf_fc", features_dim, vf_sizes)
        self.pi_head = self._linear("pi", pi_sizes[-1] if pi_sizes else features_dim, self.dist.n_logits, 0.01)
        self.vf_head = self._linear("vf", vf_sizes[-1] if vf_sizes else features_dim, 1, 1.0)
        self._finish_build()
        self._acting = self._new_acting_path({"network": (self.network, [self.obs_signature()])})

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
        x = ops.preprocess(obs, self.ob_space, self.scale)
        features = ops.layer(self.cnn, x) if self.cnn is not None else ops.flatten(x)
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

    _uses_cnn = True


MlpPolicy = MaskableActorCriticPolicy
CnnPolicy = MaskableActorCriticCnnPolicy

register_policy_base(MaskableActorCriticPolicy, {"MlpPolicy": MaskableActorCriticPolicy,
                                                 "CnnPolicy": MaskableActorCriticCnnPolicy})
