"""TQC policies (sb3-contrib ``tqc/policies.py``) as Keras models: ``MlpPolicy``, ``CnnPolicy``,
``MultiInputPolicy``.

A ``TQCPolicy`` holds the actor, the critic and the critic's target (sb3-contrib's ``actor``, ``critic``,
``critic_target``):

* actor: features, hidden layers ``actor/fc{i}`` (net_arch ``pi``), then the heads ``actor/mu`` and
  ``actor/log_std`` (log-std clipped to [-20, 2]); actions are ``tanh`` of a Gaussian sample (or of the mean);
* critic: ``n_critics`` networks ``critic/qf{i}`` (net_arch ``qf``) on ``concat[features, action]``, each with
  ``n_quantiles`` outputs, stacked as (batch, n_critics, n_quantiles); ``critic_target`` has the same shape.

Variable names: ``model/actor/fc0/kernel:0``, ..., ``model/critic/qf0/out/bias:0``, ``model/critic_target/...``.
Acting runs the actor through the policy's acting path (NumPy on copies of the weights for Mlp actors).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

import gymnasium as gym
import tensorflow as tf

from sbtf.common.policies import register_policy_base
from sbtf.sb3.common.actor_critic import (LOG_STD_MAX, LOG_STD_MIN, ContinuousCritic,
                                              OffPolicyActorCriticPolicy)
from sbtf.sb3.common.actor_critic import SquashedGaussianActor as Actor


class Critic(ContinuousCritic):
    """sb3-contrib's TQC ``Critic``: ``n_critics`` quantile networks on ``concat[features, action]``."""

    def __init__(self, scope: str, observation_space: gym.Space, net_arch: List[int], activation_fn, extractor: type,
                 normalize_images: bool, features_extractor_kwargs, n_quantiles: int, n_critics: int,
                 features_extractor=None, **kwargs):
        super().__init__(scope, observation_space, net_arch, activation_fn, extractor, normalize_images,
                         features_extractor_kwargs, n_quantiles, n_critics, features_extractor=features_extractor,
                         **kwargs)
        self.n_quantiles = int(n_quantiles)
        self.quantiles_total = self.n_quantiles * self.n_critics

    def quantiles(self, obs, action) -> tf.Tensor:
        """(batch, n_critics, n_quantiles) quantiles of Q(obs, action), action in [-1, 1]."""
        return self.outputs(obs, action)


class TQCPolicy(OffPolicyActorCriticPolicy):
    """
    Policy class (with both actor and critic) for TQC (sb3-contrib's arguments; the learning-rate schedule is the
    model's ``learning_rate``): SAC's squashed Gaussian actor (``sbtf.sb3.common.actor_critic``) and quantile
    critics.

    :param observation_space: (gymnasium.Space) Observation space
    :param action_space: (gymnasium.spaces.Box) Action space
    :param net_arch: ([int] or dict) The sizes of the hidden layers of the actor and the critics (default
        [256, 256]), or ``dict(pi=[...], qf=[...])``
    :param activation_fn: (callable or str) Activation function (default ReLU)
    :param use_sde: (bool) gSDE actor (set by ``TQC(use_sde=True)``; see ``sbtf.common.nn.sde`` and docs/gsde.md)
    :param log_std_init: (float) Initial value of gSDE's ``log_std`` (gSDE only)
    :param use_expln: (bool) gSDE: ``expln`` instead of ``exp`` for the std
    :param clip_mean: (float) gSDE: the mean is clipped to [-clip_mean, clip_mean] (sb3's Hardtanh; 0: no clip)
    :param full_std: (bool) gSDE: one std per (latent, action) pair, else one per latent unit (sb3's actor argument)
    :param features_extractor_class: (type) Features extractor to use: any Keras layer class with a ``features_dim``
        (``sbtf.common.extractors``), built as ``cls(observation_space, **features_extractor_kwargs)``, or a built-in
        one by name (``"FlattenExtractor"``, ``"NatureCNN"``, ``"CombinedExtractor"``)
    :param features_extractor_kwargs: (dict) Keyword arguments to pass to the features extractor
    :param normalize_images: (bool) Whether to divide uint8 images by 255
    :param optimizer_class: (None or "Adam") The optimizer (PyTorch's Adam, as sb3-contrib's default)
    :param optimizer_kwargs: (dict) Additional keyword arguments of the optimizer (``eps``, ``betas``)
    :param n_quantiles: (int) Number of quantiles for the critic
    :param n_critics: (int) Number of critic networks to create
    :param share_features_extractor: (bool) Whether the critic uses the actor's features extractor (trained by the
        actor loss only)
    """

    _algo_name = "TQC"

    def __init__(self, observation_space: gym.Space, action_space: gym.Space,
                 net_arch: Union[List[int], Dict[str, List[int]], None] = None, activation_fn=tf.nn.relu,
                 use_sde: bool = False, log_std_init: float = -3, use_expln: bool = False, clip_mean: float = 2.0,
                 features_extractor_class=None, features_extractor_kwargs: Optional[Dict[str, Any]] = None,
                 normalize_images: bool = True, optimizer_class=None, optimizer_kwargs: Optional[Dict[str, Any]] = None,
                 n_quantiles: int = 25, n_critics: int = 2, share_features_extractor: bool = False,
                 full_std: bool = True):
        if int(n_quantiles) < 1 or int(n_critics) < 1:
            raise ValueError(f"Error: n_quantiles and n_critics must be >= 1, got {n_quantiles}, {n_critics}.")
        super().__init__(observation_space, action_space, net_arch=net_arch, activation_fn=activation_fn,
                         features_extractor_class=features_extractor_class,
                         features_extractor_kwargs=features_extractor_kwargs, normalize_images=normalize_images,
                         optimizer_class=optimizer_class, optimizer_kwargs=optimizer_kwargs, n_critics=n_critics,
                         share_features_extractor=share_features_extractor, critic_outputs=int(n_quantiles),
                         use_sde=bool(use_sde), log_std_init=float(log_std_init), full_std=bool(full_std),
                         use_expln=bool(use_expln), clip_mean=float(clip_mean))
        self.n_quantiles = int(n_quantiles)
        self.log_std_init = log_std_init
        self.use_expln = use_expln
        self.clip_mean = clip_mean
        self.full_std = bool(full_std)

    def _make_critic(self, scope: str, critic_args: tuple, shared) -> Critic:
        return Critic(scope, *critic_args, features_extractor=shared)


class MlpPolicy(TQCPolicy):
    """TQC policy on flattened observations (sb3-contrib ``MlpPolicy``)."""


class CnnPolicy(TQCPolicy):
    """TQC policy with the nature CNN (sb3-contrib ``CnnPolicy``)."""

    _default_extractor = "NatureCNN"


class MultiInputPolicy(TQCPolicy):
    """TQC policy for Dict observations (sb3-contrib ``MultiInputPolicy``): ``CombinedExtractor`` features."""

    _default_extractor = "CombinedExtractor"


register_policy_base(TQCPolicy, {"MlpPolicy": MlpPolicy, "CnnPolicy": CnnPolicy,
                                 "MultiInputPolicy": MultiInputPolicy})

__all__ = ["Actor", "Critic", "TQCPolicy", "MlpPolicy", "CnnPolicy", "LOG_STD_MIN", "LOG_STD_MAX"]
