"""stable-baselines3's actor-critic policies (``stable_baselines3.common.policies``) on sbtf's policy layer.

:class:`ActorCriticPolicy` takes SB3's constructor, ``(observation_space, action_space, lr_schedule, net_arch=None,
activation_fn=tf.nn.tanh, ortho_init=True, use_sde=False, log_std_init=0.0, full_std=True, use_expln=False,
squash_output=False, features_extractor_class=FlattenExtractor, features_extractor_kwargs=None,
share_features_extractor=True, normalize_images=True, optimizer_class=Adam, optimizer_kwargs=None)``, and builds the
network of sbtf's :class:`~sbtf.common.policies.FeedForwardPolicy` in its stable-baselines3 mode (one network
builder for every actor-critic policy): features extractor, ``net_arch`` (a list: the same sizes for the policy and
the value network; ``dict(pi=[...], vf=[...])``; default ``dict(pi=[64, 64], vf=[64, 64])``, ``[]`` behind a
NatureCNN), SB3's orthogonal gains (sqrt(2) hidden, 0.01 action, 1 value), gSDE. Acting runs in NumPy when every
layer has a NumPy form (``sbtf.common.compile.acting``).

The optimizer is PyTorch's (``optimizer_class``: ``"Adam"`` / ``"RMSprop"``, sbtf's :class:`TorchAdam` /
:class:`TorchStyleRMSProp`, or Keras' ``keras.optimizers.Adam`` / ``RMSprop`` standing for PyTorch's);
:func:`make_policy_optimizer` builds it with ``optimizer_kwargs`` in PyTorch's names (``eps``, ``betas``, ``alpha``,
``momentum``; Keras' ``epsilon``, ``beta_1``, ``beta_2``, ``rho`` are accepted too).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

import gymnasium as gym
import keras
import numpy as np
import tensorflow as tf

from sbtf.common.extractors import CombinedExtractor, FlattenExtractor, NatureCNN
from sbtf.common.nn.network_ops import TF_OPS
from sbtf.common.optimizers import TorchAdam, TorchStyleRMSProp
from sbtf.common.policies import FeedForwardPolicy, register_policy_base
from sbtf.common.registry import register_class
from sbtf.common.nn.sde import SDEHead
from sbtf.common.tf_layers import GaussianHead

__all__ = ["ActorCriticPolicy", "ActorCriticCnnPolicy", "MultiInputActorCriticPolicy", "MlpPolicy", "CnnPolicy",
           "MultiInputPolicy", "make_policy_optimizer", "OPTIMIZER_NAMES"]

#: the optimizers a policy's ``optimizer_class`` may name: name -> (sbtf class, PyTorch's keyword names)
OPTIMIZER_NAMES: Dict[str, Tuple[type, Tuple[str, ...]]] = {
    "Adam": (TorchAdam, ("eps", "betas")),
    "RMSprop": (TorchStyleRMSProp, ("alpha", "eps", "momentum")),
}
#: Keras' keyword names of the same settings
_KERAS_NAMES = {"epsilon": "eps", "rho": "alpha"}

for _cls in (TorchAdam, TorchStyleRMSProp, keras.optimizers.Adam, keras.optimizers.RMSprop):
    register_class(_cls, "optimizer")  # a model file's policy_kwargs may name them


def _optimizer_name(optimizer_class: Any) -> str:
    """``"Adam"`` or ``"RMSprop"`` for an ``optimizer_class`` argument (ValueError for anything else)."""
    if isinstance(optimizer_class, str):
        for name in OPTIMIZER_NAMES:
            if optimizer_class.lower() == name.lower():
                return name
    elif isinstance(optimizer_class, type):
        if issubclass(optimizer_class, (TorchAdam, keras.optimizers.Adam)):
            return "Adam"
        if issubclass(optimizer_class, (TorchStyleRMSProp, keras.optimizers.RMSprop)):
            return "RMSprop"
    raise ValueError(f"Error: optimizer_class {optimizer_class!r} is not supported; sbtf's stable-baselines3 classes "
                     "train with PyTorch's Adam or RMSprop: pass 'Adam' / 'RMSprop', "
                     "sbtf.common.optimizers.TorchAdam / TorchStyleRMSProp, or keras.optimizers.Adam / RMSprop "
                     "(th.optim.Adam -> keras.optimizers.Adam).")


def make_policy_optimizer(variables: Sequence[tf.Variable], optimizer_class: Any,
                          optimizer_kwargs: Optional[Dict[str, Any]]) -> tf.Module:
    """
    The optimizer of a policy, as SB3 builds ``optimizer_class(params, lr, **optimizer_kwargs)`` (the learning rate
    is given at every step).

    :param variables: the variables to optimize
    :param optimizer_class: see :data:`OPTIMIZER_NAMES` (and the module docstring)
    :param optimizer_kwargs: PyTorch's keywords (``weight_decay=0``, ``amsgrad=False``, ``centered=False``,
        ``foreach``, ``maximize=False``, ``capturable``, ``differentiable``, ``fused`` are accepted as no-ops)
    :return: a :class:`TorchAdam` or :class:`TorchStyleRMSProp`
    """
    name = _optimizer_name(optimizer_class)
    cls, allowed = OPTIMIZER_NAMES[name]
    kwargs = {_KERAS_NAMES.get(key, key): value for key, value in dict(optimizer_kwargs or {}).items()}
    if "beta_1" in kwargs or "beta_2" in kwargs:
        kwargs["betas"] = (float(kwargs.pop("beta_1", 0.9)), float(kwargs.pop("beta_2", 0.999)))
    for key, neutral in (("weight_decay", 0), ("amsgrad", False), ("centered", False), ("maximize", False)):
        if key in kwargs and kwargs.pop(key) != neutral:
            raise ValueError(f"Error: optimizer_kwargs {key}={neutral!r} is the only value sbtf's {name} supports.")
    for key in ("foreach", "capturable", "differentiable", "fused"):  # PyTorch execution options: no maths
        kwargs.pop(key, None)
    unknown = sorted(set(kwargs) - set(allowed))
    if unknown:
        raise ValueError(f"Error: unknown optimizer_kwargs {unknown} for {name}; it takes {list(allowed)}.")
    if name == "Adam":
        return TorchAdam(variables, eps=float(kwargs.get("eps", 1e-8)), betas=tuple(kwargs.get("betas", (0.9, 0.999))))
    return TorchStyleRMSProp(variables, decay=float(kwargs.get("alpha", 0.99)), epsilon=float(kwargs.get("eps", 1e-8)),
                             momentum=float(kwargs.get("momentum", 0.0)))


class ActorCriticPolicy(FeedForwardPolicy):
    """
    stable-baselines3's ``ActorCriticPolicy`` (the ``MlpPolicy`` of PPO and A2C).

    :param observation_space: the observation space
    :param action_space: the action space
    :param lr_schedule: the learning rate schedule (``progress_remaining -> lr``; kept as ``lr_schedule``, the
        algorithm's schedule drives training)
    :param net_arch: a list of sizes (the same for the policy and the value network) or ``dict(pi=[...], vf=[...])``
        (default ``dict(pi=[64, 64], vf=[64, 64])``; ``[]`` behind a NatureCNN)
    :param activation_fn: the activation of the hidden layers: a TF/Keras function (``tf.nn.tanh``, default;
        ``tf.nn.relu``, ``keras.activations.relu``) or its name (``"relu"``)
    :param ortho_init: orthogonal initialisation (gains sqrt(2) hidden, 0.01 action, 1 value); False: PyTorch's
        default uniform initialisation
    :param use_sde: gSDE (set by the algorithm's ``use_sde``)
    :param log_std_init: initial log std (Gaussian or gSDE)
    :param full_std: gSDE: one std per (latent, action) pair
    :param use_expln: gSDE: ``expln`` instead of ``exp``
    :param squash_output: gSDE: ``tanh`` squashed actions
    :param features_extractor_class: a Keras layer class with a ``features_dim`` (default ``FlattenExtractor``)
    :param features_extractor_kwargs: its keyword arguments
    :param share_features_extractor: one extractor for the actor and the critic
    :param normalize_images: divide image observations by 255
    :param optimizer_class: the optimizer (see :func:`make_policy_optimizer`; default PyTorch's Adam)
    :param optimizer_kwargs: its keyword arguments (default for Adam: ``eps=1e-5``, as SB3)
    :param n_env: the number of environments it acts for (sbtf's policies take it; SB3's do not)
    """

    default_features_extractor_class: Optional[type] = FlattenExtractor

    def __init__(self, observation_space: gym.Space, action_space: gym.Space,
                 lr_schedule: Optional[Callable[[float], float]] = None,
                 net_arch: Optional[Union[Sequence[int], Dict[str, Sequence[int]]]] = None,
                 activation_fn: Any = tf.nn.tanh, ortho_init: bool = True, use_sde: bool = False,
                 log_std_init: float = 0.0, full_std: bool = True, use_expln: bool = False,
                 squash_output: bool = False, features_extractor_class: Optional[type] = None,
                 features_extractor_kwargs: Optional[Dict[str, Any]] = None, share_features_extractor: bool = True,
                 normalize_images: bool = True, optimizer_class: Any = "Adam",
                 optimizer_kwargs: Optional[Dict[str, Any]] = None, n_env: int = 1):
        if features_extractor_class is None:
            features_extractor_class = self.default_features_extractor_class
        super().__init__(None, observation_space, action_space, n_env, 1, None, reuse=False, net_arch=net_arch,
                         feature_extraction="mlp", features_extractor_class=features_extractor_class,
                         features_extractor_kwargs=features_extractor_kwargs,
                         share_features_extractor=bool(share_features_extractor),
                         normalize_images=bool(normalize_images), activation_fn=activation_fn,
                         ortho_init=bool(ortho_init), use_sde=use_sde, log_std_init=log_std_init, use_expln=use_expln,
                         full_std=full_std, squash_output=squash_output)
        self.lr_schedule = lr_schedule
        self.activation_fn = activation_fn
        self.log_std_init = float(log_std_init)
        _optimizer_name(optimizer_class)  # refused now rather than at the first learn()
        self.optimizer_class = optimizer_class
        self.optimizer_kwargs = dict(optimizer_kwargs or {})
        if _optimizer_name(optimizer_class) == "Adam" and optimizer_kwargs is None:
            self.optimizer_kwargs["eps"] = 1e-5  # SB3's ActorCriticPolicy: Adam with eps=1e-5
        #: the optimizer (built by the algorithm from optimizer_class / optimizer_kwargs)
        self.optimizer: Optional[tf.Module] = None

    # ------------------------------------------------------------------ SB3's policy API
    @property
    def log_std(self) -> Optional[tf.Variable]:
        """The log std parameter of a Box action distribution (Gaussian: (action_dim,); gSDE: (latent, n)), else
        None (SB3 has no ``log_std`` then)."""
        if isinstance(self.pi_head, SDEHead):
            return self.pi_head.log_std
        if isinstance(self.pi_head, GaussianHead):
            return self.pi_head.logstd
        return None

    def make_optimizer(self, variables: Optional[Sequence[tf.Variable]] = None) -> tf.Module:
        """Build (and keep as ``self.optimizer``) the optimizer of ``optimizer_class`` / ``optimizer_kwargs`` for
        ``variables`` (default: every parameter of the policy)."""
        self.optimizer = make_policy_optimizer(self.parameter_list() if variables is None else variables,
                                               self.optimizer_class, self.optimizer_kwargs)
        return self.optimizer

    def evaluate_actions(self, obs: tf.Tensor, actions: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor, Optional[tf.Tensor]]:
        """
        SB3's ``evaluate_actions`` in TensorFlow (train steps): values, log-likelihoods and entropy of ``actions``.

        :return: (values (batch,), log_prob (batch,), entropy (batch,) or None without a closed form)
        """
        flat, values, _, _ = self.forward(obs)
        dist = self.proba_distribution_from_flat(flat)
        return values, -dist.neglogp(actions), dist.entropy()

    def predict_values(self, obs: np.ndarray) -> np.ndarray:
        """SB3's ``predict_values``: the value estimates of a batch of observations (NumPy, (batch, 1))."""
        return np.asarray(self.value(obs)).reshape(-1, 1)

    def network_tf(self, obs):
        """(flat distribution parameters, values) in TensorFlow."""
        return self.network(TF_OPS, obs)


class ActorCriticCnnPolicy(ActorCriticPolicy):
    """SB3's ``ActorCriticCnnPolicy`` (the ``CnnPolicy``): a NatureCNN features extractor (images divided by 255),
    then the heads (``net_arch`` default ``[]``)."""

    default_features_extractor_class = NatureCNN


class MultiInputActorCriticPolicy(ActorCriticPolicy):
    """SB3's ``MultiInputActorCriticPolicy`` (the ``MultiInputPolicy``) for Dict observations: a
    ``CombinedExtractor`` (a NatureCNN per image key, the other keys flattened)."""

    default_features_extractor_class = CombinedExtractor


MlpPolicy = ActorCriticPolicy
CnnPolicy = ActorCriticCnnPolicy
MultiInputPolicy = MultiInputActorCriticPolicy

register_policy_base(ActorCriticPolicy, {"MlpPolicy": ActorCriticPolicy, "CnnPolicy": ActorCriticCnnPolicy,
                                         "MultiInputPolicy": MultiInputActorCriticPolicy})
