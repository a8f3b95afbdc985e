"""Actor-critic policies (stable-baselines 2.x ``common/policies.py``) as Keras models.

A policy is built from the observation and action spaces plus SB2's ``policy_kwargs``
(``net_arch``, ``layers``, ``act_fun``, ``feature_extraction``, ``cnn_extractor``, ``n_lstm``,
``layer_norm``). Its variables carry SB2's names (``model/pi_fc0/w:0`` ...), see
``named_parameters()``. Each network is written once against a backend (``sbtf.common.network_ops``):
training code calls ``forward`` (TensorFlow) inside ``tf.function``; acting (``step``) runs the same
network through the policy's acting path (``sbtf.common.acting``): in NumPy on copies of the weights
when every layer on it has a NumPy form (no TF call per environment step), else through one compiled
TF call.
"""
from __future__ import annotations

import warnings
from collections import OrderedDict
from itertools import zip_longest
from typing import Optional

import gymnasium as gym
import keras
import numpy as np
import tensorflow as tf

from sbtf.common.acting import ActingPath, WeightVersion
from sbtf.common.distributions import make_proba_dist_type, softmax_np
from sbtf.common.fast_call import FastFunction, FlatLayout
from sbtf.common.input import (check_obs_space, obs_input_dtype, obs_input_shape, preprocess_obs_np,
                               preprocess_obs_tf)
from sbtf.common.network_ops import TF_OPS
from sbtf.common.tf_layers import GaussianHead, Linear, Lstm, NatureCNN, SB2Layer, get_activation, nature_cnn


def mlp_extractor(flat_observations, net_arch, act_fun):
    """
    SB2's ``mlp_extractor`` in functional form: builds the layers and returns (latent_policy, latent_value).

    Prefer the policy classes; this exists so SB2 code that calls it keeps working.
    """
    shared, pi_sizes, vf_sizes = _parse_net_arch(net_arch)
    act = get_activation(act_fun)
    latent = flat_observations
    for idx, size in enumerate(shared):
        latent = act(Linear(f"shared_fc{idx}", size, init_scale=np.sqrt(2))(latent))
    latent_pi, latent_vf = latent, latent
    for idx, (pi_size, vf_size) in enumerate(zip_longest(pi_sizes, vf_sizes)):
        if pi_size is not None:
            latent_pi = act(Linear(f"pi_fc{idx}", pi_size, init_scale=np.sqrt(2))(latent_pi))
        if vf_size is not None:
            latent_vf = act(Linear(f"vf_fc{idx}", vf_size, init_scale=np.sqrt(2))(latent_vf))
    return latent_pi, latent_vf


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


class BasePolicy(keras.Model):
    """
    The base policy object (SB2 signature; ``sess`` and ``reuse`` are accepted and ignored in TF2).

    :param sess: (None) kept for SB2 compatibility
    :param ob_space: (gymnasium.Space) observation space
    :param ac_space: (gymnasium.Space) action space
    :param n_env: (int) number of environments (the batch of the step model)
    :param n_steps: (int) steps per environment per update (sequence length for recurrent policies)
    :param n_batch: (int) batch size of the train model
    :param reuse: (bool) ignored (one Keras model serves acting and training)
    :param scale: (bool) rescale Box observations to [0, 1] (CNN policies)
    """

    recurrent = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        from sbtf.common.registry import register_class

        register_class(cls, "policy")  # model files may name it (see sbtf.common.registry)

    def __init__(self, sess=None, ob_space: gym.Space = None, ac_space: gym.Space = None, n_env: int = 1,
                 n_steps: int = 1, n_batch: Optional[int] = None, reuse: bool = False, scale: bool = False,
                 obs_phs=None, add_action_ph: bool = False):
        super().__init__(name="model")
        if ob_space is None or ac_space is None:
            raise ValueError("Error: a policy needs ob_space and ac_space")
        self.ob_space = ob_space
        self.ac_space = ac_space
        self.n_env = int(n_env)
        self.n_steps = int(n_steps)
        self.n_batch = n_batch
        self.scale = scale
        self.sess = sess
        self.reuse = reuse
        self._ordered_layers: list[SB2Layer] = []
        self._acting: Optional[ActingPath] = None  # set by subclasses whose network has an acting form
        self.obs_dtype = obs_input_dtype(ob_space)
        self.obs_shape = obs_input_shape(ob_space)
        self.np_random = np.random.default_rng(np.random.randint(0, 2 ** 31 - 1))
        # the version of the weights, shared by the acting paths (a plain object: not tracked by Keras)
        self._weight_version = WeightVersion()

    @property
    def is_discrete(self) -> bool:
        return isinstance(self.ac_space, gym.spaces.Discrete)

    @property
    def initial_state(self):
        return None

    def _register(self, *layers: SB2Layer) -> None:
        self._ordered_layers.extend(layers)

    def _parameter_layers(self) -> list:
        """The SB2-named layers in SB2's parameter order (by default, in the order ``_register`` got them)."""
        return self._ordered_layers

    def named_parameters(self, prefix: str = "model") -> "OrderedDict[str, tf.Variable]":
        """Ordered ``{SB2 name: variable}``, e.g. ``model/pi_fc0/w:0``."""
        params: OrderedDict[str, tf.Variable] = OrderedDict()
        for layer in self._parameter_layers():
            for name, var in layer.named_variables():
                params[f"{prefix}/{name}:0"] = var
        return params

    def parameter_list(self) -> list:
        return list(self.named_parameters().values())

    # --- acting path -----------------------------------------------------------------------
    def acting_paths(self) -> list:
        """The policy's acting paths (``sbtf.common.acting.ActingPath``); none for a policy that does not act."""
        return [] if self._acting is None else [self._acting]

    def _prepare_obs(self, obs) -> np.ndarray:
        """A batch of raw observations as the policy's input dtype and shape (NumPy)."""
        return np.asarray(obs).astype(self.obs_dtype, copy=False).reshape((-1,) + self.obs_shape)

    def _new_acting_path(self, functions: dict, numpy_allowed: bool = True,
                         install_from_train_steps: bool = True) -> ActingPath:
        """An acting path over ``functions`` (``{name: (fn(ops, *inputs), input specs)}``) of this policy."""
        return ActingPath(functions, self._weight_version, parameter_order=self.parameter_list,
                          numpy_allowed=numpy_allowed, install_from_train_steps=install_from_train_steps)

    def weights_changed(self) -> None:
        """The weights were changed from outside (load, ``assign``, ...): the acting path re-reads them when used."""
        self._weight_version.value += 1

    def mark_weights_changed(self) -> None:
        """Alias of ``weights_changed`` (kept for callers written before it)."""
        self._weight_version.value += 1

    def set_weights(self, weights):  # keep the acting copies honest when users set weights directly
        super().set_weights(weights)
        self.weights_changed()

    @property
    def acts_in_numpy(self) -> bool:
        """Whether the policy acts in NumPy (every layer on its acting path has a NumPy form)."""
        return any(path.uses_numpy for path in self.acting_paths())

    @property
    def has_numpy_path(self) -> bool:
        """Alias of ``acts_in_numpy``."""
        return self.acts_in_numpy

    @property
    def n_weight_reads(self) -> int:
        """How many times the acting paths read the weights from the TF variables (installs not counted)."""
        return sum(path.n_reads for path in self.acting_paths())

    def acting_weights_tf(self) -> list:
        """Inside a compiled step: the tensors the NumPy acting copies mirror (none when the policy acts in TF)."""
        return [t for path in self.acting_paths() if path.install_from_train_steps for t in path.weights_tf()]

    def install_acting_weights(self, arrays) -> None:
        """Install NumPy values of ``acting_weights_tf()`` computed by a compiled step (see ``TrainStep``)."""
        self._weight_version.value += 1
        offset = 0
        for path in self.acting_paths():
            if path.install_from_train_steps:
                n = path.n_weights
                path.install(arrays[offset:offset + n])
                offset += n
        if offset != len(arrays):
            raise ValueError(f"expected {offset} acting weight arrays, got {len(arrays)}")

    def preprocess(self, obs):
        return preprocess_obs_tf(obs, self.ob_space, self.scale)

    def obs_signature(self, batch: Optional[int] = None) -> tf.TensorSpec:
        return tf.TensorSpec((batch,) + self.obs_shape, tf.as_dtype(self.obs_dtype))

    def step(self, obs, state=None, mask=None, deterministic=False):
        raise NotImplementedError

    def proba_step(self, obs, state=None, mask=None):
        raise NotImplementedError


class ActorCriticPolicy(BasePolicy):
    """Policy with a value head and an action distribution (A2C, ACER, ACKTR, PPO1/2, TRPO, GAIL)."""

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, reuse=False,
                 scale=False):
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, reuse=reuse, scale=scale)
        check_obs_space(ob_space, type(self).__name__)
        self.pdtype = make_proba_dist_type(ac_space)
        self.pi_head = None
        self.q_head = None
        self.vf_head = None
        self._tf_step_fns: dict = {}
        self._tf_gen = tf.random.Generator.from_seed(int(self.np_random.integers(0, 2 ** 31 - 1)))

    # --- maths used by training code (inside tf.function) --------------------------------
    def forward(self, obs, state=None, mask=None, n_steps: int = 1):
        """
        :return: (flat distribution parameters, value (batch,), q-values (batch, n_act), new state or None)
        """
        raise NotImplementedError

    def network(self, ops, obs, with_q: bool = False):
        """
        The feed-forward network in the backend ``ops`` (``sbtf.common.network_ops``) on raw observations.

        :return: (flat distribution parameters, value (batch,)), plus the q-values when ``with_q``
        """
        raise NotImplementedError

    def proba_distribution_from_flat(self, flat):
        return self.pdtype.proba_distribution_from_flat(flat)

    def call(self, inputs, training=None):
        if self.recurrent:
            obs, state, mask = inputs
            flat, value, _, _ = self.forward(obs, state, mask, n_steps=1)
        else:
            flat, value, _, _ = self.forward(inputs)
        return flat, value

    def _finish_build(self) -> None:
        """Create all variables (in SB2 order) by running the model once on a dummy batch."""
        # a batch of one: the variables' shapes do not depend on the batch (and a large n_env costs nothing here)
        dummy = tf.zeros((1,) + self.obs_shape, tf.as_dtype(self.obs_dtype))
        if self.recurrent:
            self((dummy, tf.zeros((1,) + tuple(self.initial_state.shape[1:])), tf.zeros((1,))))
        else:
            self(dummy)
        self.mark_weights_changed()

    # --- acting ---------------------------------------------------------------------------
    def _tf_step_fn(self, deterministic: bool):
        """A compiled ``(obs, state, mask) -> (actions, values, state, neglogp, flat)`` for TF-path acting."""
        key = bool(deterministic)
        if key not in self._tf_step_fns:
            state_spec = tf.TensorSpec((None, self.state_size), tf.float32) if self.recurrent else \
                tf.TensorSpec((None, 1), tf.float32)

            # no autograph for feed-forward policies: converting the network's Python code cost ~7 CPU-s of a CNN
            # policy's first predict (the maths has no tensor-dependent Python control flow)
            @tf.function(input_signature=[self.obs_signature(), state_spec, tf.TensorSpec((None,), tf.float32)],
                         autograph=self.recurrent)
            def _step(obs, state, mask):
                flat, value, _, new_state = self.forward(obs, state if self.recurrent else None, mask, n_steps=1)
                dist = self.proba_distribution_from_flat(flat)
                action = dist.mode() if key else dist.sample(seed=tf.cast(self._tf_gen.make_seeds(1)[:, 0], tf.int32))
                if new_state is None:
                    new_state = state
                return action, value, new_state, dist.neglogp(action), flat

            self._tf_step_fns[key] = FastFunction(_step.get_concrete_function())
        return self._tf_step_fns[key]

    def _run_tf(self, obs, state, mask, deterministic):
        obs = self._prepare_obs(obs)
        n = obs.shape[0]
        if self.recurrent:
            state = np.asarray(state, np.float32)
            mask = np.asarray(mask, np.float32).reshape(-1)
        else:
            state = np.zeros((n, 1), np.float32)
            mask = np.zeros((n,), np.float32)
        action, value, new_state, neglogp, flat = self._tf_step_fn(deterministic)(obs, state, mask)
        return action.numpy(), value.numpy(), (new_state.numpy() if self.recurrent else None), neglogp.numpy(), \
            flat.numpy()

    def _numpy_ops(self):
        """The NumPy backend of the acting path on fresh weights, or None when the policy acts through TF."""
        acting = self._acting
        return None if acting is None else acting.numpy_ops()

    def flat_weights_tf(self) -> tf.Tensor:
        """All weights (``named_parameters`` order) as one flat float32 tensor, inside a compiled step (for
        ``install_flat_weights``; new code passes the policy to ``TrainStep(updates=...)`` instead)."""
        return tf.concat([tf.reshape(v, [-1]) for v in self.parameter_list()], axis=0)

    def install_flat_weights(self, flat: np.ndarray) -> None:
        """Install the acting copies from a vector laid out as ``flat_weights_tf`` (after a train step)."""
        params = self.parameter_list()
        arrays = FlatLayout([tuple(int(d) for d in v.shape) for v in params]).unpack_np(flat)
        by_id = {id(var): array for var, array in zip(params, arrays)}
        self._weight_version.value += 1
        for path in self.acting_paths():
            path.install([by_id[id(var)] for var in path.variables])

    def step(self, obs, state=None, mask=None, deterministic=False):
        """
        One acting step (SB2 signature).

        :return: (actions, values, states, neglogp) as NumPy arrays
        """
        ops = self._numpy_ops()
        if ops is not None:
            flat, value = self.network(ops, self._prepare_obs(obs))
            action = self.pdtype.np_mode(flat) if deterministic else self.pdtype.np_sample(flat, self.np_random)
            return action, value, None, self.pdtype.np_neglogp(flat, action).astype(np.float32)
        action, value, new_state, neglogp, _ = self._run_tf(obs, state, mask, deterministic)
        return action, value, new_state, neglogp

    def act(self, obs, state=None, mask=None, deterministic=False):
        """
        ``step`` without the negative log-likelihood, for runners that do not need it (cheaper on the NumPy path).

        :return: (actions, values, states) as NumPy arrays
        """
        ops = self._numpy_ops()
        if ops is not None:
            flat, value = self.network(ops, self._prepare_obs(obs))
            action = self.pdtype.np_mode(flat) if deterministic else self.pdtype.np_sample(flat, self.np_random)
            return action, value, None
        action, value, new_state, _, _ = self._run_tf(obs, state, mask, deterministic)
        return action, value, new_state

    def flat_params(self, obs, state=None, mask=None) -> np.ndarray:
        """Flat distribution parameters for a batch of observations (NumPy)."""
        ops = self._numpy_ops()
        if ops is not None:
            return self.network(ops, self._prepare_obs(obs))[0]
        return self._run_tf(obs, state, mask, True)[4]

    def value(self, obs, state=None, mask=None) -> np.ndarray:
        """Value estimates (NumPy, shape (batch,))."""
        ops = self._numpy_ops()
        if ops is not None:
            return self.network(ops, self._prepare_obs(obs))[1]
        return self._run_tf(obs, state, mask, True)[1]

    def proba_step(self, obs, state=None, mask=None):
        """Action probabilities (Discrete: softmax; Box: flat [mean, logstd]; MultiBinary: sigmoid)."""
        flat = self.flat_params(obs, state, mask)
        if isinstance(self.ac_space, gym.spaces.Discrete):
            return softmax_np(flat)
        if isinstance(self.ac_space, gym.spaces.MultiBinary):
            return 1.0 / (1.0 + np.exp(-flat))
        return flat


class FeedForwardPolicy(ActorCriticPolicy):
    """
    Feed-forward actor-critic policy (SB2 ``FeedForwardPolicy``).

    :param layers: ([int]) (deprecated) sizes of separate pi and vf layers; default [64, 64]
    :param net_arch: (list) shared layer sizes, then optionally ``dict(pi=[...], vf=[...])``
    :param act_fun: (tf function or name) activation after every hidden layer (default tanh)
    :param cnn_extractor: (callable) returns the Keras layer that maps scaled images to features
    :param feature_extraction: (str) ``"cnn"`` or ``"mlp"``
    :param kwargs: extra arguments for the CNN extractor
    """

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, reuse=False,
                 layers=None, net_arch=None, act_fun=tf.tanh, cnn_extractor=nature_cnn, feature_extraction="cnn",
                 **kwargs):
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, reuse=reuse,
                         scale=(feature_extraction == "cnn"))
        if feature_extraction not in ("cnn", "mlp"):
            raise ValueError(f"Error: feature_extraction must be 'cnn' or 'mlp', got {feature_extraction!r}")
        if layers is not None:
            warnings.warn("Usage of the `layers` parameter is deprecated! Use net_arch instead "
                          "(it has a different semantics though).", DeprecationWarning)
            if net_arch is not None:
                warnings.warn("The new `net_arch` parameter overrides the deprecated `layers` parameter!",
                              DeprecationWarning)
        if net_arch is None:
            if layers is None:
                layers = [64, 64]
            net_arch = [dict(vf=list(layers), pi=list(layers))]
        self.net_arch = net_arch
        self.feature_extraction = feature_extraction
        self.act_fun = act_fun
        self._act = get_activation(act_fun)
        self.cnn_kwargs = kwargs

        if feature_extraction == "cnn":
            if len(self.obs_shape) != 3:
                raise ValueError(f"Error: CnnPolicy needs image observations (H, W, C), got shape {self.obs_shape}; "
                                 "use MlpPolicy for vector observations.")
            self.cnn = cnn_extractor(**kwargs) if not isinstance(cnn_extractor, keras.layers.Layer) else cnn_extractor
            if not isinstance(self.cnn, keras.layers.Layer):
                raise TypeError("Error: cnn_extractor must return a Keras layer when called with its keyword "
                                "arguments (e.g. sbtf.common.policies.nature_cnn)")
            features = self.cnn(tf.zeros((1,) + self.obs_shape))
            self._register(*(self.cnn.sb2_layers() if hasattr(self.cnn, "sb2_layers") else []))
            self.shared_layers, self.pi_layers, self.vf_layers = [], [], []
            pi_dim = vf_dim = int(features.shape[-1])
        else:
            if kwargs:
                raise ValueError(f"Unknown keywords for policy: {kwargs}")
            shared, pi_sizes, vf_sizes = _parse_net_arch(net_arch)
            in_dim = int(np.prod(preprocess_obs_np(np.zeros((1,) + self.obs_shape, self.obs_dtype), ob_space).shape[1:]))
            self.shared_layers = []
            for idx, size in enumerate(shared):
                layer = Linear(f"shared_fc{idx}", size, init_scale=np.sqrt(2))
                layer.build((None, in_dim))
                in_dim = size
                self.shared_layers.append(layer)
                self._register(layer)
            self.pi_layers, self.vf_layers = [], []
            pi_dim = vf_dim = in_dim
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
        self.vf_head = Linear("vf", 1)
        self.vf_head.build((None, vf_dim))
        self.pi_head, self.q_head = self.pdtype.make_heads(init_scale=0.01)
        self.pi_head.build((None, pi_dim))
        self.q_head.build((None, vf_dim))
        self._register(self.vf_head, self.pi_head, self.q_head)
        self._finish_build()
        # NumPy acting runs ``network``; a subclass that replaces the TF maths (``forward``) acts through TF
        self._acting = self._new_acting_path({"network": (self.network, [self.obs_signature()])},
                                             numpy_allowed=type(self).forward is FeedForwardPolicy.forward)

    def extract_features(self, ops, x):
        """Features of pre-processed observations ``x`` in the backend ``ops``: the CNN, or the flattened input
        through the shared layers. Subclasses may override this with layers of their own (acting then runs in NumPy
        only if those layers have a NumPy form)."""
        if self.feature_extraction == "cnn":
            return ops.layer(self.cnn, x)
        act = ops.activation(self.act_fun)
        latent = ops.flatten(x)
        for layer in self.shared_layers:
            latent = act(ops.layer(layer, latent))
        return latent

    def network(self, ops, obs, with_q: bool = False):
        latent = self.extract_features(ops, ops.preprocess(obs, self.ob_space, self.scale))
        act = ops.activation(self.act_fun)
        latent_pi, latent_vf = latent, latent
        for layer in self.pi_layers:
            latent_pi = act(ops.layer(layer, latent_pi))
        for layer in self.vf_layers:
            latent_vf = act(ops.layer(layer, latent_vf))
        value = ops.layer(self.vf_head, latent_vf)[:, 0]
        flat = ops.layer(self.pi_head, latent_pi)
        if isinstance(self.pi_head, GaussianHead):  # SB2's flat parameters: [mean, logstd broadcast to the batch]
            flat = ops.concat([flat, flat * 0.0 + ops.weight(self.pi_head, "logstd")])
        if with_q:
            return flat, value, ops.layer(self.q_head, latent_vf)
        return flat, value

    def forward(self, obs, state=None, mask=None, n_steps: int = 1):
        flat, value, q_value = self.network(TF_OPS, obs, with_q=True)
        return flat, value, q_value, None


class LstmPolicy(ActorCriticPolicy):
    """
    Recurrent actor-critic policy (SB2 ``LstmPolicy``): features, an LSTM of ``n_lstm`` units, heads.

    State and mask semantics are SB2's: ``state`` is ``concat[c, h]`` per env, ``mask`` is the done
    flag of the previous step (the state is reset before processing an observation whose mask is 1).
    """

    recurrent = True

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, n_lstm=256,
                 reuse=False, layers=None, net_arch=None, act_fun=tf.tanh, cnn_extractor=nature_cnn,
                 layer_norm=False, feature_extraction="cnn", **kwargs):
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, reuse=reuse,
                         scale=(feature_extraction == "cnn"))
        self.n_lstm = int(n_lstm)
        self.state_size = 2 * self.n_lstm
        self.layer_norm = layer_norm
        self.feature_extraction = feature_extraction
        self.act_fun = act_fun
        self._act = get_activation(act_fun)
        self.net_arch = net_arch
        self._initial_state = np.zeros((self.n_env, self.state_size), dtype=np.float32)
        in_dim = int(np.prod(preprocess_obs_np(np.zeros((1,) + self.obs_shape, self.obs_dtype), ob_space).shape[1:]))
        self.cnn = None
        self.shared_layers: list = []
        self.pi_layers: list = []
        self.vf_layers: list = []
        if net_arch is None:  # legacy mode
            if layers is None:
                layers = [64, 64]
            else:
                warnings.warn("The layers parameter is deprecated. Use the net_arch parameter instead.",
                              DeprecationWarning)
            if feature_extraction == "cnn":
                self.cnn = cnn_extractor(**kwargs)
                in_dim = int(self.cnn(tf.zeros((1,) + self.obs_shape)).shape[-1])
                self._register(*(self.cnn.sb2_layers() if hasattr(self.cnn, "sb2_layers") else []))
            else:
                for i, size in enumerate(layers):
                    layer = Linear(f"pi_fc{i}", size, init_scale=np.sqrt(2))
                    layer.build((None, in_dim))
                    in_dim = size
                    self.shared_layers.append(layer)
                    self._register(layer)
            self.lstm = Lstm("lstm1", self.n_lstm, layer_norm=layer_norm)
            self.lstm.build((None, in_dim))
            self._register(self.lstm)
            pi_dim = vf_dim = self.n_lstm
        else:
            if feature_extraction == "cnn":
                raise NotImplementedError("Error: net_arch is not supported with a CNN LSTM policy (as in SB2)")
            lstm_seen = False
            pi_sizes: list[int] = []
            vf_sizes: list[int] = []
            for idx, layer_spec in enumerate(net_arch):
                if isinstance(layer_spec, (int, np.integer)):
                    if lstm_seen:
                        raise ValueError("Error: shared layers after the LSTM are not supported; use dict(pi, vf)")
                    layer = Linear(f"shared_fc{idx}", int(layer_spec), init_scale=np.sqrt(2))
                    layer.build((None, in_dim))
                    in_dim = int(layer_spec)
                    self.shared_layers.append(layer)
                    self._register(layer)
                elif layer_spec == "lstm":
                    if lstm_seen:
                        raise ValueError("Error: net_arch may contain only one 'lstm' entry")
                    lstm_seen = True
                    self.lstm = Lstm("lstm1", self.n_lstm, layer_norm=layer_norm)
                    self.lstm.build((None, in_dim))
                    self._register(self.lstm)
                    in_dim = self.n_lstm
                elif isinstance(layer_spec, dict):
                    pi_sizes = [int(s) for s in layer_spec.get("pi", [])]
                    vf_sizes = [int(s) for s in layer_spec.get("vf", [])]
                    break
                else:
                    raise ValueError(f"Error: unknown net_arch entry {layer_spec!r}")
            if not lstm_seen:
                raise ValueError("Error: net_arch of a recurrent policy must contain one 'lstm' entry")
            pi_dim = vf_dim = in_dim
            for i, size in enumerate(pi_sizes):
                layer = Linear(f"pi_fc{i}", size, init_scale=np.sqrt(2))
                layer.build((None, pi_dim))
                pi_dim = size
                self.pi_layers.append(layer)
                self._register(layer)
            for i, size in enumerate(vf_sizes):
                layer = Linear(f"vf_fc{i}", size, init_scale=np.sqrt(2))
                layer.build((None, vf_dim))
                vf_dim = size
                self.vf_layers.append(layer)
                self._register(layer)
        self.vf_head = Linear("vf", 1)
        self.vf_head.build((None, vf_dim))
        self.pi_head, self.q_head = self.pdtype.make_heads(init_scale=1.0 if net_arch is None else 0.01)
        self.pi_head.build((None, pi_dim))
        self.q_head.build((None, vf_dim))
        self._register(self.vf_head, self.pi_head, self.q_head)
        self._finish_build()

    @property
    def initial_state(self) -> np.ndarray:
        return self._initial_state.copy()

    def forward(self, obs, state=None, mask=None, n_steps: int = 1):
        x = self.preprocess(obs)
        if self.cnn is not None:
            latent = self.cnn(x)
        else:
            latent = tf.reshape(x, (-1, int(np.prod(x.shape[1:]))))
            for layer in self.shared_layers:
                latent = self._act(layer(latent))
        latent, new_state = self.lstm(latent, masks=mask, state=state, n_steps=n_steps)
        latent_pi, latent_vf = latent, latent
        for layer in self.pi_layers:
            latent_pi = self._act(layer(latent_pi))
        for layer in self.vf_layers:
            latent_vf = self._act(layer(latent_vf))
        value = self.vf_head(latent_vf)[:, 0]
        flat = self.pdtype.flat_from_head(self.pi_head, self.pi_head(latent_pi))
        return flat, value, self.q_head(latent_vf), new_state


class CnnPolicy(FeedForwardPolicy):
    """Policy object that implements actor critic, using a CNN (the nature CNN)."""

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, reuse=False,
                 **_kwargs):
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, reuse, feature_extraction="cnn",
                         **_kwargs)


class CnnLstmPolicy(LstmPolicy):
    """Policy object that implements actor critic, using LSTMs with a CNN feature extraction."""

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, n_lstm=256,
                 reuse=False, **_kwargs):
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, n_lstm, reuse, layer_norm=False,
                         feature_extraction="cnn", **_kwargs)


class CnnLnLstmPolicy(LstmPolicy):
    """Policy object that implements actor critic, using a layer normalized LSTMs with a CNN feature extraction."""

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, n_lstm=256,
                 reuse=False, **_kwargs):
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, n_lstm, reuse, layer_norm=True,
                         feature_extraction="cnn", **_kwargs)


class MlpPolicy(FeedForwardPolicy):
    """Policy object that implements actor critic, using a MLP (2 layers of 64)."""

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, reuse=False,
                 **_kwargs):
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, reuse, feature_extraction="mlp",
                         **_kwargs)


class MlpLstmPolicy(LstmPolicy):
    """Policy object that implements actor critic, using LSTMs with a MLP feature extraction."""

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, n_lstm=256,
                 reuse=False, **_kwargs):
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, n_lstm, reuse, layer_norm=False,
                         feature_extraction="mlp", **_kwargs)


class MlpLnLstmPolicy(LstmPolicy):
    """Policy object that implements actor critic, using a layer normalized LSTMs with a MLP feature extraction."""

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, n_lstm=256,
                 reuse=False, **_kwargs):
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, n_lstm, reuse, layer_norm=True,
                         feature_extraction="mlp", **_kwargs)


# Kept for SB2 code that refers to these names.
RecurrentActorCriticPolicy = LstmPolicy

_policy_registry: dict[type, dict[str, type]] = {
    ActorCriticPolicy: {
        "CnnPolicy": CnnPolicy,
        "CnnLstmPolicy": CnnLstmPolicy,
        "CnnLnLstmPolicy": CnnLnLstmPolicy,
        "MlpPolicy": MlpPolicy,
        "MlpLstmPolicy": MlpLstmPolicy,
        "MlpLnLstmPolicy": MlpLnLstmPolicy,
    }
}


def get_policy_from_name(base_policy_type: type, name: str) -> type:
    """
    Returns the registered policy from the base type and name.

    :param base_policy_type: (BasePolicy subclass) the base policy class
    :param name: (str) the policy name
    :return: (type) the policy class
    """
    if base_policy_type not in _policy_registry:
        raise ValueError(f"Error: the policy type {base_policy_type} is not registered!")
    if name not in _policy_registry[base_policy_type]:
        raise ValueError(f"Error: unknown policy type {name!r}, the only registered policy types are: "
                         f"{sorted(_policy_registry[base_policy_type])}!")
    return _policy_registry[base_policy_type][name]


def register_policy(name: str, policy: type) -> None:
    """
    Register a policy so that it can be passed by name (e.g. ``PPO2("MyPolicy", env)``).

    :param name: (str) the policy name
    :param policy: (subclass of BasePolicy) the policy
    """
    sub_class = None
    for cls in BasePolicy.__subclasses__():
        if issubclass(policy, cls):
            sub_class = cls
            break
    if sub_class is None:
        raise ValueError(f"Error: the policy {policy} is not of any known subclasses of BasePolicy!")
    registry = _policy_registry.setdefault(sub_class, {})
    if name in registry and registry[name] is not policy:
        raise ValueError(f"Error: the name {name} is already registered for a different policy, "
                         "will not override.")
    registry[name] = policy


def register_policy_base(base: type, policies: dict[str, type]) -> None:
    """Register a family of named policies for an algorithm-specific base class (DQN, SAC, ...)."""
    _policy_registry.setdefault(base, {}).update(policies)


#: (SB2 name, feature extraction, layer normalisation, docstring) of the four named off-policy actor-critic policies
_ACTOR_CRITIC_VARIANTS = (
    ("CnnPolicy", "cnn", False, """
    Policy object that implements actor critic, using a CNN (the nature CNN)

    :param _kwargs: (dict) Extra keyword arguments for the nature CNN feature extraction
    """),
    ("LnCnnPolicy", "cnn", True, """
    Policy object that implements actor critic, using a CNN (the nature CNN), with layer normalisation

    :param _kwargs: (dict) Extra keyword arguments for the nature CNN feature extraction
    """),
    ("MlpPolicy", "mlp", False, """
    Policy object that implements actor critic, using a MLP (2 layers of 64)

    :param _kwargs: (dict) Extra keyword arguments (``layers``, ``act_fun``, ...)
    """),
    ("LnMlpPolicy", "mlp", True, """
    Policy object that implements actor critic, using a MLP (2 layers of 64), with layer normalisation

    :param _kwargs: (dict) Extra keyword arguments (``layers``, ``act_fun``, ...)
    """),
)


def _actor_critic_variant(feed_forward: type, module: str, name: str, feature_extraction: str, layer_norm: bool,
                          doc: str) -> type:
    fixed = {"feature_extraction": feature_extraction}
    if layer_norm:
        fixed["layer_norm"] = True

    class Variant(feed_forward):
        def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, reuse=False,
                     **_kwargs):
            super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, reuse, **fixed, **_kwargs)

    Variant.__name__ = Variant.__qualname__ = name
    Variant.__module__ = Variant.__init__.__module__ = module
    Variant.__init__.__qualname__ = f"{name}.__init__"
    Variant.__doc__ = doc
    return Variant


def make_actor_critic_policies(feed_forward: type, module: str) -> tuple:
    """
    The SB2-named ``CnnPolicy``, ``LnCnnPolicy``, ``MlpPolicy`` and ``LnMlpPolicy`` subclasses of an off-policy
    actor-critic ``FeedForwardPolicy`` (SAC, TD3, DDPG), in that order, named as in SB2 and living in ``module``.
    """
    return tuple(_actor_critic_variant(feed_forward, module, *variant) for variant in _ACTOR_CRITIC_VARIANTS)


__all__ = ["BasePolicy", "ActorCriticPolicy", "RecurrentActorCriticPolicy", "LstmPolicy", "FeedForwardPolicy",
           "CnnPolicy", "CnnLstmPolicy", "CnnLnLstmPolicy", "MlpPolicy", "MlpLstmPolicy", "MlpLnLstmPolicy",
           "nature_cnn", "mlp_extractor", "get_policy_from_name", "register_policy", "register_policy_base",
           "make_actor_critic_policies", "NatureCNN"]

