"""Re-exports of the off-policy core (kept so that ``from sbtf.common.off_policy import X`` works), and the SAC/TD3
actor/critic networks.

Where things live:

* ``sbtf.common.off_policy_algorithm``: ``OffPolicyAlgorithm``, the one learn loop of DQN, SAC, TD3 and DDPG;
* ``sbtf.common.off_policy_actor_critic``: ``ActorCriticOffPolicyAlgorithm`` (what SAC and TD3 share);
* ``sbtf.common.off_policy_train``: ``TrainStepCache`` (the K-gradient-step ``TrainStep`` per variant) and the
  former ``TrainFunctionCache``;
* ``sbtf.common.off_policy_ops``: in-graph helpers (target updates, Huber loss, stateless seeds);
* ``sbtf.common.optimizers.Adam``: TF1's Adam with the fused ``ResourceApplyAdam`` kernel (``FusedAdam`` here is
  that class, under its former name).
"""
from __future__ import annotations

from typing import Any, Sequence, Tuple

import numpy as np
import tensorflow as tf

from sbtf.common.fast_call import FastFunction, FlatLayout, to_tensor  # noqa: F401 (re-exported)
from sbtf.common.off_policy_actor_critic import ActorCriticOffPolicyAlgorithm  # noqa: F401 (re-exported)
from sbtf.common.off_policy_algorithm import OffPolicyAlgorithm, learn_doc  # noqa: F401 (re-exported)
from sbtf.common.off_policy_ops import (copy_variables, huber_loss, polyak_update,  # noqa: F401 (re-exported)
                                        stateless_seed)
from sbtf.common.off_policy_train import TrainFunctionCache  # noqa: F401 (re-exported)
from sbtf.common.optimizers import Adam as FusedAdam  # noqa: F401 (re-exported under its former name)


__all__ = ["OffPolicyAlgorithm", "ActorCriticOffPolicyAlgorithm", "learn_doc", "FusedAdam", "TrainFunctionCache", "FastFunction", "FlatLayout", "to_tensor", "polyak_update", "copy_variables", "huber_loss",
           "stateless_seed"]


# ---------------------------------------------------------------------------------------------------------------
# feed-forward actor / critics with SB2 names (shared by the SAC and TD3 policies)
# ---------------------------------------------------------------------------------------------------------------
class ActorCriticNetworks:
    """
    Mixin for ``BasePolicy`` subclasses (SAC's and TD3's feed-forward policies): builds SB2's actor
    (``<scope>/[c1..c3, fc1]``, ``<scope>/fc{i}`` [+ ``LayerNorm{_i}``], heads) and critics
    (``<scope>/[c1..c3, fc1]``, one ``SB2Mlp`` + dense head per critic) with SB2's variable names, lists them in SB2
    order (``named_parameters``) and evaluates the actor in NumPy for Mlp policies.
    """

    def _init_networks(self, layers, cnn_extractor, feature_extraction: str, layer_norm: bool, act_fun,
                       cnn_kwargs: dict) -> None:
        from sbtf.common.tf_layers import numpy_activation

        if feature_extraction not in ("cnn", "mlp"):
            raise ValueError(f"Error: feature_extraction must be 'cnn' or 'mlp', got {feature_extraction!r}")
        if feature_extraction == "mlp" and cnn_kwargs:
            raise ValueError(f"Unknown keywords for policy: {cnn_kwargs}")
        if layers is None:
            layers = [64, 64]
        if len(layers) < 1:
            raise ValueError("Error: must have at least one hidden layer for the policy.")
        if feature_extraction == "cnn" and len(self.obs_shape) != 3:
            raise ValueError(f"Error: CnnPolicy needs image observations (H, W, C), got shape {self.obs_shape}; use "
                             "MlpPolicy for vector observations.")
        self.layer_sizes = [int(n) for n in layers]
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
        self._np_act = numpy_activation(act_fun) if feature_extraction == "mlp" else None
        self._np_actor_state = _NumpyActorState()
        self._dummy_obs = tf.zeros((1,) + self.obs_shape, tf.as_dtype(self.obs_dtype))

    def _make_cnn(self, scope: str, named: list):
        if self.feature_extraction != "cnn":
            return None
        cnn = self.cnn_extractor(**self.cnn_kwargs)
        layers = cnn.sb2_layers() if hasattr(cnn, "sb2_layers") else []
        for layer in layers:
            layer.scope = f"{scope}/{layer.scope}"
        named.extend(layers)
        return cnn

    def features(self, obs, cnn):
        """Pre-processed, flattened observations, or CNN features."""
        x = self.preprocess(obs)
        if cnn is not None:
            return cnn(x)
        return tf.reshape(x, (-1, int(np.prod(x.shape[1:]))))

    def _build_actor(self, scope: str, heads: Sequence[Tuple[str, Any]]) -> None:
        """Create the actor: features, hidden stack and ``heads`` [(name, activation)], each of n_act units."""
        from sbtf.common.tf_layers import Dense, SB2Mlp

        self.actor_scope = scope
        self.actor_cnn = self._make_cnn(scope, self._actor_named)
        self.actor_mlp = SB2Mlp(scope, self.layer_sizes, self.activ_fn, layer_norm=self.layer_norm, style="mlp")
        self._actor_named.extend(self.actor_mlp.sb2_layers())
        self.actor_heads = [Dense(f"{scope}/{name}", self.n_act, activation=activation) for name, activation in heads]
        self._actor_named.extend(self.actor_heads)
        latent = self.actor_mlp(self.features(self._dummy_obs, self.actor_cnn))
        for head in self.actor_heads:
            head(latent)
        self.mark_weights_changed()

    def actor_latent(self, obs):
        return self.actor_mlp(self.features(obs, self.actor_cnn))

    def _build_critics(self, scope: str, names: Sequence[str], with_action: Sequence[bool]) -> None:
        """Create critics ``<scope>/<name>/{fc*, <name>}`` (Q critics take ``concat[features, action]``)."""
        from sbtf.common.tf_layers import Dense, SB2Mlp

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
        self.mark_weights_changed()

    def critic(self, name: str, features, action=None):
        """Output (batch, 1) of critic ``name`` on critic features (and an action in [-1, 1] for Q critics)."""
        inputs = features if action is None else tf.concat([features, action], axis=-1)
        return self.critic_heads[name](self.critic_mlps[name](inputs))

    def critic_features(self, obs):
        return self.features(obs, self.critic_cnn)

    # ------------------------------------------------------------------ parameters
    def named_parameters(self, prefix: str = "model") -> "OrderedDict[str, tf.Variable]":
        from collections import OrderedDict

        params = OrderedDict()
        for layer in list(self._actor_named) + list(self._critic_named):
            for name, var in layer.named_variables():
                params[f"{prefix}/{name}:0"] = var
        return params

    def actor_variables(self) -> list:
        return [var for layer in self._actor_named for _, var in layer.named_variables()]

    def critic_variables(self) -> list:
        return [var for layer in self._critic_named for _, var in layer.named_variables()]

    # ------------------------------------------------------------------ NumPy actor
    @property
    def has_numpy_path(self) -> bool:
        return self._np_act is not None and self.actor_mlp is not None

    def acting_variables(self) -> list:
        """The variables the NumPy actor reads (the actor's variables), in order."""
        return self.actor_variables()

    def set_numpy_weights(self, arrays: Sequence[np.ndarray]) -> None:
        """Install fresh NumPy copies of ``acting_variables()`` (e.g. returned by a train step) as the cache."""
        it = iter(arrays)
        plan = []
        for _ in self.actor_mlp.dense_layers:
            kernel, bias = next(it), next(it)
            norm = None
            if self.layer_norm:
                beta, gamma = next(it), next(it)
                norm = (gamma, beta, 1e-12)
            plan.append((kernel, bias, norm))
        heads = [(next(it), next(it)) for _ in self.actor_heads]
        state = self._np_actor_state
        state.plan = (plan, heads)
        state.version = state.counter

    def mark_weights_changed(self) -> None:
        """Tell the NumPy fast path that the weights changed (a plain counter: no Keras attribute tracking)."""
        self._np_actor_state.counter += 1

    def acting_weights_tf(self) -> list:
        return [tf.identity(v) for v in self.acting_variables()] if self.has_numpy_path else []

    def install_acting_weights(self, arrays) -> None:
        self.mark_weights_changed()
        if self.has_numpy_path:
            self.set_numpy_weights(list(arrays))

    def _numpy_actor_plan(self):
        state = self._np_actor_state
        if state.version != state.counter:
            state.reads += 1
            self.set_numpy_weights([var.numpy() for var in self.acting_variables()])
        return state.plan

    @property
    def n_weight_reads(self) -> int:
        """How many times the acting path read the weights from the TF variables (not counting installs)."""
        return self._np_actor_state.reads

    def actor_heads_np(self, obs: np.ndarray) -> list:
        """The actor heads' outputs (before their activations) for a batch of observations, in NumPy."""
        from sbtf.common.input import preprocess_obs_np
        from sbtf.common.tf_layers import numpy_mlp

        plan, heads = self._numpy_actor_plan()
        x = preprocess_obs_np(obs, self.ob_space, self.scale)
        latent = numpy_mlp(x.reshape(x.shape[0], -1), plan, self._np_act)
        return [latent @ kernel + bias for kernel, bias in heads]

    def _actor_tf_fn(self, fn):
        """A compiled ``obs -> fn(obs)`` (for policies without a NumPy path), cached per function name."""
        cache = self.__dict__.setdefault("_tf_actor_fns", {})
        key = fn.__name__
        if key not in cache:
            cache[key] = FastFunction(tf.function(fn, input_signature=[self.obs_signature()]).get_concrete_function())
        return cache[key]

    def _prepare_obs(self, obs) -> np.ndarray:
        return np.asarray(obs).astype(self.obs_dtype, copy=False).reshape((-1,) + self.obs_shape)


class _NumpyActorState:
    """Plain holder for the NumPy actor cache (avoids Keras attribute tracking on every update)."""

    def __init__(self):
        self.counter = 0  # bumped when the weights change
        self.version = -1  # the counter value the cache was built at
        self.plan = None
        self.reads = 0
