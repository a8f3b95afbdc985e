"""RecurrentPPO policies (sb3-contrib ``common/recurrent/policies.py``) as Keras models: ``MlpLstmPolicy``,
``CnnLstmPolicy``, ``MultiInputLstmPolicy``.

A ``RecurrentActorCriticPolicy`` is features (``FlattenExtractor``, ``NatureCNN`` or ``CombinedExtractor``), an LSTM
for the actor (``lstm_actor``), for the critic either its own LSTM (``enable_critic_lstm=True``, ``lstm_critic``),
the actor's (``shared_lstm=True``, its output with the gradient stopped) or a linear layer (``critic``), then sb3's
``mlp_extractor`` (``pi`` / ``vf`` stacks, tanh) and the ``action_net`` / ``value_net`` heads.

With ``share_features_extractor=False`` the actor and the critic have their own extractors
(``pi_features_extractor``, ``vf_features_extractor``). With ``use_sde`` (set by ``RecurrentPPO(use_sde=True)``) the
action head is gSDE's (:mod:`sbtf.common.nn.sde`: mean layer and ``log_std`` matrix on the pi latent, exploration
matrices resampled by the algorithm). A multi-dimensional Box action space is handled as sb3 does: the distribution
is over the flattened actions, which are reshaped to the space's shape for the env and ``predict``.

The LSTM is PyTorch's (gates i, f, g, o; two bias vectors, none with ``lstm_kwargs=dict(bias=False)``;
U(-1/sqrt(H), 1/sqrt(H)) initialisation). The state of a
layer is reset (multiplied by ``1 - episode_start``) before the step whose ``episode_start`` is set, as sb3-contrib.
Inside sbtf a policy's recurrent state is one float32 row per env: ``[pi_h, pi_c, vf_h, vf_c]`` with each part
``n_lstm_layers * lstm_hidden_size`` wide (no ``vf`` parts without a critic LSTM). ``predict`` shows sb3's form
instead: the actor's ``(h, c)``, each ``(n_lstm_layers, n_envs, lstm_hidden_size)``.

Every network is written once against a backend ``ops``: acting runs in NumPy on copies of the weights (no TF call
per env step) unless a layer has no NumPy form (a CNN: one compiled TF call).
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple

import gymnasium as gym
import numpy as np
import tensorflow as tf

from sbtf.common.distributions import make_proba_dist_type
from sbtf.common.input import check_obs_space
from sbtf.common.nn.network_ops import TF_OPS
from sbtf.common.policies import BasePolicy, register_policy_base
from sbtf.common.nn.sde import ExplorationNoise, SDEHead, sde_flat, sde_std
from sbtf.common.tf_layers import Dense, SB2Layer, _NumpyInitializer
from sbtf.common.tf_layers import ortho_init as orthogonal_init
from sbtf.common.extractors import NatureCNN
from sbtf.sb3.common.networks import FeaturesExtractor, TorchLinear, resolve_extractor_class


#: PyTorch ``nn.LSTM`` keywords (``lstm_kwargs``) and the one value of each that sbtf's LSTM has (``bias`` takes both)
LSTM_KWARGS_FIXED = {"batch_first": False, "dropout": 0.0, "bidirectional": False, "proj_size": 0}
#: ``nn.LSTM`` keywords about where and in which precision PyTorch stores the weights: accepted, TensorFlow decides
LSTM_KWARGS_IGNORED = ("device",)


def check_lstm_kwargs(lstm_kwargs: Optional[Dict[str, Any]]) -> bool:
    """
    Check sb3-contrib's ``lstm_kwargs`` (passed to PyTorch's ``nn.LSTM``) against what sbtf's LSTM implements.

    :param lstm_kwargs: ``bias`` (bool), ``dtype`` (float32 only), ``device`` (ignored), and ``batch_first``,
        ``dropout``, ``bidirectional``, ``proj_size`` at their defaults only
    :return: (bool) whether the LSTM layers have biases
    """
    bias = True
    for key, value in dict(lstm_kwargs or {}).items():
        if key == "bias":
            bias = bool(value)
        elif key in LSTM_KWARGS_IGNORED:
            continue
        elif key == "dtype":
            try:
                is_float32 = value is None or tf.as_dtype(value) == tf.float32
            except TypeError:
                is_float32 = False
            if not is_float32:
                raise ValueError(f"Error: lstm_kwargs dtype={value!r} is not supported: sbtf's LSTM is float32.")
        elif key in LSTM_KWARGS_FIXED:
            if value != LSTM_KWARGS_FIXED[key]:
                raise ValueError(f"Error: lstm_kwargs {key}={value!r} is not supported by sbtf's LSTM (only "
                                 f"{key}={LSTM_KWARGS_FIXED[key]!r}); it takes bias, dtype (float32) and device.")
        else:
            raise ValueError(f"Error: unknown lstm_kwargs {key!r}: PyTorch's nn.LSTM takes bias, batch_first, dropout, "
                             "bidirectional, proj_size, device and dtype.")
    return bias


#: sequences up to this length are unrolled in the train step's graph (longer ones run in a ``tf.scan`` loop)
UNROLL_LIMIT = 64


def _sigmoid_np(x: np.ndarray) -> np.ndarray:
    return 0.5 * (np.tanh(0.5 * x) + 1.0)


class TorchLstmCell(SB2Layer):
    """
    One step of one layer of PyTorch's ``nn.LSTM``, on ``concat([x, h, c])`` -> ``concat([h', c'])``.

    Variables ``<scope>/weight_ih`` (in, 4H), ``weight_hh`` (H, 4H), ``bias_ih``, ``bias_hh`` (4H), gates in
    PyTorch's order (input, forget, cell, output), all drawn from U(-1/sqrt(H), 1/sqrt(H)).

    :param scope: the scope of the variable names (``lstm_actor/l0``)
    :param hidden_size: H
    """

    def __init__(self, scope: str, hidden_size: int, bias: bool = True, **kwargs):
        super().__init__(scope, **kwargs)
        self.hidden_size = int(hidden_size)
        self.bias = bool(bias)

    def build(self, input_shape):
        hidden = self.hidden_size
        n_input = int(input_shape[-1]) - 2 * hidden
        bound = 1.0 / np.sqrt(hidden)

        def uniform(shape, dtype=None, **_kwargs):
            return np.random.uniform(-bound, bound, tuple(int(d) for d in shape)).astype(np.float32)

        init = _NumpyInitializer(uniform)
        self.weight_ih = self.add_weight(name="weight_ih", shape=(n_input, 4 * hidden), initializer=init)
        self.weight_hh = self.add_weight(name="weight_hh", shape=(hidden, 4 * hidden), initializer=init)
        if self.bias:
            self.bias_ih = self.add_weight(name="bias_ih", shape=(4 * hidden,), initializer=init)
            self.bias_hh = self.add_weight(name="bias_hh", shape=(4 * hidden,), initializer=init)

    def call(self, inputs):
        hidden = self.hidden_size
        n_input = int(inputs.shape[-1]) - 2 * hidden
        x, h, c = inputs[:, :n_input], inputs[:, n_input:n_input + hidden], inputs[:, n_input + hidden:]
        gates = tf.matmul(x, self.weight_ih) + tf.matmul(h, self.weight_hh)
        if self.bias:
            gates = gates + self.bias_ih + self.bias_hh
        i, f, g, o = tf.split(gates, 4, axis=1)
        c_new = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
        h_new = tf.sigmoid(o) * tf.tanh(c_new)
        return tf.concat([h_new, c_new], axis=1)

    def numpy_call(self, weights: Sequence[np.ndarray], inputs: np.ndarray) -> np.ndarray:
        """``call`` in NumPy; ``weights`` are ``[weight_ih, weight_hh, bias_ih, bias_hh]`` (no biases with
        ``bias=False``)."""
        w_ih, w_hh = weights[0], weights[1]
        hidden = self.hidden_size
        n_input = inputs.shape[-1] - 2 * hidden
        x, h, c = inputs[:, :n_input], inputs[:, n_input:n_input + hidden], inputs[:, n_input + hidden:]
        gates = x @ w_ih + h @ w_hh
        if self.bias:
            gates = gates + (weights[2] + weights[3])
        i, f, g, o = np.split(gates, 4, axis=1)
        c_new = _sigmoid_np(f) * c + _sigmoid_np(i) * np.tanh(g)
        h_new = _sigmoid_np(o) * np.tanh(c_new)
        return np.concatenate([h_new, c_new], axis=1).astype(np.float32, copy=False)


class LogStd(SB2Layer):
    """The state-independent ``log_std`` of sb3's diagonal Gaussian: ``mean -> concat([mean, log_std])``."""

    def __init__(self, scope: str, size: int, log_std_init: float = 0.0, **kwargs):
        super().__init__(scope, **kwargs)
        self.size = int(size)
        self.log_std_init = float(log_std_init)

    def build(self, input_shape):
        self.log_std = self.add_weight(name="log_std", shape=(self.size,),
                                       initializer=keras_constant(self.log_std_init))

    def call(self, mean):
        return tf.concat([mean, tf.zeros_like(mean) + self.log_std], axis=1)

    def numpy_call(self, weights: Sequence[np.ndarray], mean: np.ndarray) -> np.ndarray:
        return np.concatenate([mean, np.zeros_like(mean) + weights[0]], axis=1)


def keras_constant(value: float):
    """
    A Keras initializer that fills a tensor with ``value`` (imports Keras on first use).

    :param value: the constant
    :return: a ``keras.initializers.Constant``
    """
    import keras

    return keras.initializers.Constant(value)


class Lstm:
    """A stack of :class:`TorchLstmCell` (``<scope>/l{i}``): sb3-contrib's ``nn.LSTM(features, H, n_layers)``."""

    def __init__(self, scope: str, hidden_size: int, n_layers: int, bias: bool = True):
        self.hidden_size = int(hidden_size)
        self.cells = [TorchLstmCell(f"{scope}/l{i}", hidden_size, bias) for i in range(int(n_layers))]

    @property
    def state_size(self) -> int:
        """The width of the state ``[h (layers), c (layers)]``."""
        return 2 * len(self.cells) * self.hidden_size

    def step(self, ops, x, state, episode_start):
        """
        One step (backend ``ops``): the state is reset where ``episode_start`` is 1, then every layer steps.

        :return: (output, new state)
        """
        hidden, n_layers = self.hidden_size, len(self.cells)
        keep = (1.0 - episode_start)[:, None]
        state = state * keep
        hs, cs = [], []
        for i, cell in enumerate(self.cells):
            h = state[:, i * hidden:(i + 1) * hidden]
            c = state[:, (n_layers + i) * hidden:(n_layers + i + 1) * hidden]
            out = ops.layer(cell, ops.concat([x, h, c]))
            x = out[:, :hidden]
            hs.append(x)
            cs.append(out[:, hidden:])
        return x, ops.concat(hs + cs)

    def named_layers(self) -> list:
        return list(self.cells)


class RecurrentActorCriticPolicy(BasePolicy):
    """
    Recurrent policy class for actor-critic algorithms (has both policy and value prediction), sb3-contrib's
    arguments (the learning rate is the model's).

    :param observation_space: (gymnasium.Space) Observation space
    :param action_space: (gymnasium.Space) Action space (Discrete or Box)
    :param net_arch: ([int] or dict(pi=[...], vf=[...])) The specification of the policy and value networks after
        the LSTM (default ``dict(pi=[64, 64], vf=[64, 64])``; ``[]`` with the NatureCNN)
    :param activation_fn: (callable) Activation function of the ``mlp_extractor`` (default tanh)
    :param ortho_init: (bool) Whether to use orthogonal initialization (extractor-side stacks sqrt(2), action 0.01,
        value 1)
    :param use_sde: (bool) gSDE (Box actions; set by ``RecurrentPPO(use_sde=True)``)
    :param log_std_init: (float) Initial value for the log standard deviation (Box actions)
    :param full_std: (bool) gSDE: one std per (latent unit, action) instead of one per latent unit
    :param use_expln: (bool) gSDE: ``expln`` instead of ``exp`` to turn ``log_std`` into the std
    :param squash_output: must be False (sbtf's RecurrentPPO has no tanh-squashed gSDE)
    :param features_extractor_class: (type) Features extractor: any Keras layer class with a ``features_dim``
        (``sbtf.common.extractors``), built as ``cls(observation_space, **features_extractor_kwargs)``, or a built-in
        one by name (``"FlattenExtractor"``, ``"NatureCNN"``, ``"CombinedExtractor"``)
    :param features_extractor_kwargs: (dict) Keyword arguments to pass to the features extractor
    :param share_features_extractor: (bool) one extractor for the actor and the critic, else one each
    :param normalize_images: (bool) Whether to divide uint8 images by 255
    :param optimizer_class: (None or "Adam") The optimizer (PyTorch's Adam)
    :param optimizer_kwargs: (dict) Additional keyword arguments of the optimizer (default ``eps=1e-5``)
    :param lstm_hidden_size: (int) Number of hidden units for each LSTM layer
    :param n_lstm_layers: (int) Number of LSTM layers
    :param shared_lstm: (bool) Whether the LSTM is shared between the actor and the critic (then the critic's
        gradient does not flow into it)
    :param enable_critic_lstm: (bool) Use a separate LSTM for the critic
    :param lstm_kwargs: (dict) PyTorch ``nn.LSTM`` keywords: ``bias``, ``dtype`` (float32), ``device`` (ignored);
        ``batch_first``, ``dropout``, ``bidirectional``, ``proj_size`` at their defaults only (see
        :func:`check_lstm_kwargs`)
    """

    _default_extractor = "FlattenExtractor"
    recurrent = True

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, net_arch=None, activation_fn=tf.nn.tanh,
                 ortho_init: bool = True, use_sde: bool = False, log_std_init: float = 0.0, full_std: bool = True,
                 use_expln: bool = False, squash_output: bool = False, features_extractor_class=None,
                 features_extractor_kwargs: Optional[Dict[str, Any]] = None,
                 share_features_extractor: bool = True, normalize_images: bool = True, optimizer_class=None,
                 optimizer_kwargs: Optional[Dict[str, Any]] = None, lstm_hidden_size: int = 256,
                 n_lstm_layers: int = 1, shared_lstm: bool = False, enable_critic_lstm: bool = True,
                 lstm_kwargs: Optional[Dict[str, Any]] = None):
        super().__init__(None, observation_space, action_space)
        if not isinstance(action_space, (gym.spaces.Discrete, gym.spaces.Box)):
            raise NotImplementedError("Error: RecurrentPPO policies take Discrete or Box actions, "
                                      f"got {action_space!r}.")
        check_obs_space(observation_space, "RecurrentPPO", allow_dict=True)
        if squash_output:
            raise ValueError("Error: squash_output=True is not supported by sbtf's RecurrentPPO policies (gSDE "
                             "without tanh squashing only; actions are clipped to the Box bounds).")
        if use_sde and not isinstance(action_space, gym.spaces.Box):
            raise ValueError(f"Error: gSDE (use_sde=True) needs a Box action space, got {action_space!r}.")
        lstm_bias = check_lstm_kwargs(lstm_kwargs)
        if shared_lstm and enable_critic_lstm:
            raise ValueError("Error: you must choose between shared LSTM, seperate or no LSTM for the critic "
                             "(shared_lstm=True needs enable_critic_lstm=False).")
        if shared_lstm and not share_features_extractor:
            raise ValueError("Error: if the features extractor is not shared, the LSTM cannot be shared "
                             "(shared_lstm=True needs share_features_extractor=True).")
        extractor = resolve_extractor_class(features_extractor_class, self._default_extractor)
        if net_arch is None:
            net_arch = [] if extractor is NatureCNN else dict(pi=[64, 64], vf=[64, 64])
        if isinstance(net_arch, dict):
            pi_arch, vf_arch = list(net_arch.get("pi", [])), list(net_arch.get("vf", []))
        else:
            pi_arch, vf_arch = list(net_arch), list(net_arch)
        self.net_arch = net_arch
        self.activation_fn = activation_fn
        self.ortho_init = bool(ortho_init)
        self.log_std_init = float(log_std_init)
        self.features_extractor_class = extractor
        self.features_extractor_kwargs = dict(features_extractor_kwargs or {})
        self.normalize_images = bool(normalize_images)
        self.optimizer_class = optimizer_class
        self.optimizer_kwargs = dict(optimizer_kwargs) if optimizer_kwargs is not None else dict(eps=1e-5)
        self.lstm_hidden_size = int(lstm_hidden_size)
        self.n_lstm_layers = int(n_lstm_layers)
        self.shared_lstm = bool(shared_lstm)
        self.enable_critic_lstm = bool(enable_critic_lstm)
        self.share_features_extractor = bool(share_features_extractor)
        self.lstm_kwargs = dict(lstm_kwargs or {})
        self.use_sde = bool(use_sde)
        self.full_std = bool(full_std)
        self.use_expln = bool(use_expln)
        self.squash_output = False
        #: a multi-dimensional Box acts on its flattened form (sb3's ``get_action_dim``); None for other spaces
        self.action_shape = tuple(action_space.shape) if isinstance(action_space, gym.spaces.Box) else None
        if isinstance(action_space, gym.spaces.Box) and len(action_space.shape) != 1:
            self.pdtype = make_proba_dist_type(gym.spaces.Box(action_space.low.reshape(-1),
                                                              action_space.high.reshape(-1), dtype=action_space.dtype))
        else:
            self.pdtype = make_proba_dist_type(action_space)
        self.sde_noise = ExplorationNoise(self.np_random) if self.use_sde else None

        def init(scale: float):
            return orthogonal_init(scale) if self.ortho_init else None

        def new_extractor(scope: str) -> FeaturesExtractor:
            return FeaturesExtractor(scope, observation_space, extractor, self.normalize_images,
                                     features_extractor_kwargs, ortho_gain=np.sqrt(2) if self.ortho_init else None)

        if self.share_features_extractor:
            self.features_extractor = new_extractor("features_extractor")
            self.pi_features_extractor = self.vf_features_extractor = self.features_extractor
        else:  # sb3's names of the two extractors
            self.pi_features_extractor = new_extractor("pi_features_extractor")
            self.vf_features_extractor = new_extractor("vf_features_extractor")
            self.features_extractor = self.pi_features_extractor
        #: "mlp" when the extractor is sbtf's flattening (what the XLA choice reads)
        self.feature_extraction = "mlp" if self.features_extractor.xla_friendly else "cnn"
        self.lstm_actor = Lstm("lstm_actor", lstm_hidden_size, n_lstm_layers, lstm_bias)
        self.lstm_critic = Lstm("lstm_critic", lstm_hidden_size, n_lstm_layers, lstm_bias) \
            if enable_critic_lstm else None
        self.critic = TorchLinear("critic", lstm_hidden_size) if not (shared_lstm or enable_critic_lstm) else None
        self.pi_layers = [Dense(f"mlp_extractor/policy_net/fc{i}", n, activation_fn, init(np.sqrt(2)))
                          for i, n in enumerate(pi_arch)]
        self.vf_layers = [Dense(f"mlp_extractor/value_net/fc{i}", n, activation_fn, init(np.sqrt(2)))
                          for i, n in enumerate(vf_arch)]
        if isinstance(action_space, gym.spaces.Discrete):
            self.action_net = Dense("action_net", int(action_space.n), None, init(0.01))
            self.log_std = None
        elif self.use_sde:  # gSDE: the mean layer and the log_std matrix (latent, action or 1)
            size = int(np.prod(action_space.shape))
            self.action_net = SDEHead("action_net", size, log_std_init, self.full_std, self.use_expln,
                                      init_scale=0.01 if self.ortho_init else 1.0)
            self.log_std = None
        else:
            size = int(np.prod(action_space.shape))
            self.action_net = Dense("action_net", size, None, init(0.01))
            self.log_std = LogStd("action_dist", size, log_std_init)
        self.value_net = Dense("value_net", 1, None, init(1.0))
        # build every layer (dummy forward) so that the parameters exist in a fixed order
        dummy_obs = tf.zeros((1,) + self.obs_shape, tf.as_dtype(self.obs_dtype))
        self.forward_step(TF_OPS, dummy_obs, tf.zeros((1, self.state_size)), tf.zeros((1,)))
        spec_state = tf.TensorSpec((None, self.state_size), tf.float32)
        spec_start = tf.TensorSpec((None,), tf.float32)
        functions = {"step": (self.forward_step, [self.obs_signature(), spec_state, spec_start]),
                     "value": (self.value_step, [self.obs_signature(), spec_state, spec_start])}
        if self.use_sde:
            functions.update(sde_step=(self.sde_step, [self.obs_signature(), spec_state, spec_start]),
                             sde_std=(self._sde_std, []))
        self._acting = self._new_acting_path(functions)

    # ------------------------------------------------------------------ structure
    @property
    def pi_state_size(self) -> int:
        """Width of the actor's part of the state row (``[h, c]`` of every layer)."""
        return self.lstm_actor.state_size

    @property
    def state_size(self) -> int:
        """Width of a state row: the actor's ``[h, c]`` and, with a critic LSTM, the critic's."""
        return self.pi_state_size + (self.lstm_critic.state_size if self.lstm_critic is not None else 0)

    @property
    def initial_state(self) -> np.ndarray:
        return np.zeros((1, self.state_size), np.float32)

    def _parameter_layers(self) -> list:
        layers = self.pi_features_extractor.named_layers()
        if not self.share_features_extractor:
            layers += self.vf_features_extractor.named_layers()
        layers += self.lstm_actor.named_layers()
        if self.lstm_critic is not None:
            layers += self.lstm_critic.named_layers()
        if self.critic is not None:
            layers.append(self.critic)
        layers += self.pi_layers + self.vf_layers + [self.action_net]
        if self.log_std is not None:
            layers.append(self.log_std)
        return layers + [self.value_net]

    # ------------------------------------------------------------------ the network (backend ops)
    def _latents(self, ops, obs, state, episode_start):
        """Actor and critic latents after the LSTMs, and the new state row."""
        features = pi_features = self.pi_features_extractor.ops_call(obs, ops)
        vf_features = features if self.share_features_extractor else self.vf_features_extractor.ops_call(obs, ops)
        pi_size = self.pi_state_size
        latent_pi, pi_state = self.lstm_actor.step(ops, pi_features, state[:, :pi_size], episode_start)
        if self.lstm_critic is not None:
            latent_vf, vf_state = self.lstm_critic.step(ops, vf_features, state[:, pi_size:], episode_start)
            new_state = ops.concat([pi_state, vf_state])
        else:
            latent_vf = ops.layer(self.critic, vf_features) if self.critic is not None else \
                (tf.stop_gradient(latent_pi) if not getattr(ops, "is_numpy", False) else latent_pi)
            new_state = pi_state
        return latent_pi, latent_vf, new_state

    def _heads(self, ops, latent_pi, latent_vf, with_latent: bool = False):
        for layer in self.pi_layers:
            latent_pi = ops.layer(layer, latent_pi)
        for layer in self.vf_layers:
            latent_vf = ops.layer(layer, latent_vf)
        flat = ops.layer(self.action_net, latent_pi)
        if self.log_std is not None:
            flat = ops.layer(self.log_std, flat)
        elif self.use_sde:  # [mean, 0.5 log(latent**2 @ std**2 + eps)] (gradient stopped through the latent)
            flat = sde_flat(ops, self.action_net, flat, latent_pi)
        value = ops.layer(self.value_net, latent_vf)[:, 0]
        if with_latent:
            return flat, value, latent_pi
        return flat, value

    def sde_step(self, ops, obs, state, episode_start):
        """``forward_step`` plus gSDE's latent (the pi features the exploration matrices multiply)."""
        latent_pi, latent_vf, new_state = self._latents(ops, obs, state, episode_start)
        flat, value, latent = self._heads(ops, latent_pi, latent_vf, with_latent=True)
        return flat, value, new_state, latent

    def _sde_std(self, ops):
        head = self.action_net
        return sde_std(ops.weight(head, "log_std"), head.n_hidden, head.use_expln, head.full_std, numpy=ops.is_numpy)

    def sde_std_matrix(self) -> np.ndarray:
        """The std of gSDE's exploration matrices (latent_dim, action_dim), NumPy."""
        return np.asarray(self._acting("sde_std"))

    def reset_noise(self, n_envs: int = 1) -> None:
        """Sample new gSDE exploration matrices (sb3's ``reset_noise``)."""
        if not self.use_sde:
            raise ValueError("Error: reset_noise() is only available when using gSDE (use_sde=True).")
        self.sde_noise.reset(self.sde_std_matrix(), n_envs)

    def forward_step(self, ops, obs, state, episode_start):
        """One step of every env: (distribution parameters, values, new state rows)."""
        latent_pi, latent_vf, new_state = self._latents(ops, obs, state, episode_start)
        flat, value = self._heads(ops, latent_pi, latent_vf)
        return flat, value, new_state

    def value_step(self, ops, obs, state, episode_start):
        """The values of one step (sb3-contrib's ``predict_values``)."""
        return self.forward_step(ops, obs, state, episode_start)[1]

    def evaluate_sequences(self, obs, start_states, episode_starts):
        """
        Inside a train step: the policy on ``n_seq`` sequences of ``seq_len`` steps (TF).

        :param obs: (n_seq, seq_len) + obs_shape observations
        :param start_states: (n_seq, state_size) the state rows before each sequence's first step
        :param episode_starts: (n_seq, seq_len) 1 where the state resets before the step
        :return: (flat distribution parameters (n_seq * seq_len, ...), values (n_seq * seq_len,))
        """
        n_seq, seq_len = int(obs.shape[0]), int(obs.shape[1])
        flat_obs = tf.reshape(obs, (n_seq * seq_len,) + tuple(obs.shape[2:]))
        features = self.pi_features_extractor.ops_call(flat_obs, TF_OPS)
        features = tf.reshape(features, (n_seq, seq_len, int(features.shape[-1])))
        if self.share_features_extractor:
            vf_features = features
        else:
            vf_features = self.vf_features_extractor.ops_call(flat_obs, TF_OPS)
            vf_features = tf.reshape(vf_features, (n_seq, seq_len, int(vf_features.shape[-1])))
        pi_size = self.pi_state_size
        critic_lstm = self.lstm_critic

        def one_step(state, x_t, vf_x_t, start_t):
            out_pi, pi_state = self.lstm_actor.step(TF_OPS, x_t, state[:, :pi_size], start_t)
            if critic_lstm is not None:
                out_vf, vf_state = critic_lstm.step(TF_OPS, vf_x_t, state[:, pi_size:], start_t)
                return tf.concat([out_pi, out_vf], axis=1), tf.concat([pi_state, vf_state], axis=1)
            return out_pi, pi_state

        width = self.lstm_hidden_size * (2 if critic_lstm is not None else 1)
        if seq_len <= UNROLL_LIMIT:  # unrolled: no loop overhead per step (the common, short sequences)
            state, steps = start_states, []
            for t in range(seq_len):
                out, state = one_step(state, features[:, t], vf_features[:, t], episode_starts[:, t])
                steps.append(out)
            outputs = tf.reshape(tf.stack(steps, axis=1), (-1, width))
        else:
            outputs, _ = tf.scan(lambda carry, elems: one_step(carry[1], *elems),
                                 (tf.transpose(features, (1, 0, 2)), tf.transpose(vf_features, (1, 0, 2)),
                                  tf.transpose(episode_starts, (1, 0))),
                                 initializer=(tf.zeros((n_seq, width)), start_states))
            outputs = tf.reshape(tf.transpose(outputs, (1, 0, 2)), (-1, width))
        hidden = self.lstm_hidden_size
        latent_pi = outputs[:, :hidden]
        if critic_lstm is not None:
            latent_vf = outputs[:, hidden:]
        elif self.critic is not None:
            latent_vf = self.critic(tf.reshape(vf_features, (-1, vf_features.shape[-1])))
        else:
            latent_vf = tf.stop_gradient(latent_pi)
        return self._heads(TF_OPS, latent_pi, latent_vf)

    def forward(self, obs, state=None, mask=None, n_steps: int = 1):
        """
        One step in TF (what sbtf's exporter calls): (distribution parameters, values, None, new state rows).

        :param obs: a batch of observations
        :param state: (batch, state_size) state rows (None: zeros)
        :param mask: (batch,) episode starts (None: no start)
        """
        batch = tf.shape(obs)[0]
        state = tf.zeros((batch, self.state_size)) if state is None else tf.cast(state, tf.float32)
        mask = tf.zeros((batch,)) if mask is None else tf.cast(mask, tf.float32)
        flat, value, new_state = self.forward_step(TF_OPS, obs, state, mask)
        return flat, value, None, new_state

    def proba_distribution_from_flat(self, flat):
        return self.pdtype.proba_distribution_from_flat(flat)

    # ------------------------------------------------------------------ acting (NumPy when possible)
    def _state_and_starts(self, n_obs: int, state, mask):
        state = np.zeros((n_obs, self.state_size), np.float32) if state is None else \
            np.asarray(state, np.float32).reshape(n_obs, self.state_size)
        mask = np.zeros(n_obs, np.float32) if mask is None else np.asarray(mask, np.float32).reshape(n_obs)
        return state, mask

    def step(self, obs, state=None, mask=None, deterministic=False):
        """Actions, values, new state rows and negative log-likelihoods of a batch (one row per env)."""
        obs = self._prepare_obs(obs)
        state, mask = self._state_and_starts(obs.shape[0], state, mask)
        if self.use_sde:  # gSDE: mean + latent @ E (E: the exploration matrices, resampled by the algorithm)
            flat, values, new_state, latent = self._acting("sde_step", obs, state, mask)
            actions = flat[:, :self.pdtype.size].copy()
            if not deterministic:
                self.sde_noise.before_step(self.sde_std_matrix, len(latent))
                actions = (actions + self.sde_noise.noise(np.asarray(latent))).astype(np.float32)
        else:
            flat, values, new_state = self._acting("step", obs, state, mask)
            if deterministic:
                actions = self.pdtype.np_mode(flat)
            else:
                actions = self.pdtype.np_sample(flat, self.np_random)
        return actions, values, new_state, self.pdtype.np_neglogp(flat, actions)

    def env_actions(self, actions: np.ndarray) -> np.ndarray:
        """The policy's (flat) actions as the env takes them: Box actions clipped to the bounds and reshaped to the
        space's shape (one row per env)."""
        if self.action_shape is None:
            return actions
        space = self.ac_space
        return np.clip(np.asarray(actions).reshape((-1,) + self.action_shape), space.low, space.high)

    def value(self, obs, state=None, mask=None) -> np.ndarray:
        obs = self._prepare_obs(obs)
        state, mask = self._state_and_starts(obs.shape[0], state, mask)
        return np.asarray(self._acting("value", obs, state, mask))

    def proba_step(self, obs, state=None, mask=None):
        raise NotImplementedError("RecurrentPPO has no action_probability (sb3-contrib has none either).")

    def call(self, inputs, training=None):
        obs, state, starts = inputs
        return self.forward_step(TF_OPS, obs, state, starts)

    # ------------------------------------------------------------------ sb3's state form
    def to_sb3_state(self, rows: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """State rows -> the actor's ``(h, c)``, each ``(n_lstm_layers, n_envs, lstm_hidden_size)``."""
        n_layers, hidden = self.n_lstm_layers, self.lstm_hidden_size
        pi = np.asarray(rows[:, :self.pi_state_size]).reshape(-1, 2, n_layers, hidden)
        return np.ascontiguousarray(pi[:, 0].transpose(1, 0, 2)), np.ascontiguousarray(pi[:, 1].transpose(1, 0, 2))

    def from_sb3_state(self, state, n_envs: int) -> np.ndarray:
        """The actor's ``(h, c)`` (or None) -> state rows (the critic's part is zero: acting does not read it)."""
        rows = np.zeros((n_envs, self.state_size), np.float32)
        if state is None:
            return rows
        if not (isinstance(state, (tuple, list)) and len(state) == 2):
            raise ValueError("Error: the state of a RecurrentPPO policy is the tuple (h, c) that predict returned, "
                             f"each of shape (n_lstm_layers, n_envs, lstm_hidden_size); got {type(state).__name__}.")
        expected = (self.n_lstm_layers, n_envs, self.lstm_hidden_size)
        h, c = (np.asarray(part, np.float32) for part in state)
        if h.shape != expected or c.shape != expected:
            raise ValueError(f"Error: the state parts have shapes {h.shape} and {c.shape}; expected {expected} "
                             "(n_lstm_layers, n_envs, lstm_hidden_size).")
        width = self.n_lstm_layers * self.lstm_hidden_size
        rows[:, :width] = h.transpose(1, 0, 2).reshape(n_envs, width)
        rows[:, width:2 * width] = c.transpose(1, 0, 2).reshape(n_envs, width)
        return rows


class MlpLstmPolicy(RecurrentActorCriticPolicy):
    """Recurrent policy on flattened observations (sb3-contrib ``MlpLstmPolicy``)."""


class CnnLstmPolicy(RecurrentActorCriticPolicy):
    """Recurrent policy with the nature CNN (sb3-contrib ``CnnLstmPolicy``)."""

    _default_extractor = "NatureCNN"


class MultiInputLstmPolicy(RecurrentActorCriticPolicy):
    """Recurrent policy for Dict observations (sb3-contrib ``MultiInputLstmPolicy``): ``CombinedExtractor``."""

    _default_extractor = "CombinedExtractor"


register_policy_base(RecurrentActorCriticPolicy, {"MlpLstmPolicy": MlpLstmPolicy, "CnnLstmPolicy": CnnLstmPolicy,
                                                  "MultiInputLstmPolicy": MultiInputLstmPolicy})

__all__ = ["TorchLstmCell", "LogStd", "Lstm", "RecurrentActorCriticPolicy", "MlpLstmPolicy", "CnnLstmPolicy",
           "MultiInputLstmPolicy"]
