"""Actor-critic policies (stable-baselines 2.x ``common/policies.py``) as Keras models.

A policy is built from the observation and action spaces plus SB2's ``policy_kwargs``
(``net_arch``, ``layers``, ``act_fun``, ``feature_extraction``, ``cnn_extractor``, ``n_lstm``,
``layer_norm``). Its variables carry SB2's names (``model/pi_fc0/w:0`` ...), see
``named_parameters()``. Each network is written once against a backend (``sbtf.common.nn.network_ops``):
training code calls ``forward`` (TensorFlow) inside ``tf.function``; acting (``step``) runs the same
network through the policy's acting path (``sbtf.common.compile.acting``): in NumPy on copies of the weights
when every layer on it has a NumPy form (no TF call per environment step), else through one compiled
TF call.
"""
from __future__ import annotations

import warnings
from collections import OrderedDict
from itertools import zip_longest
from typing import Mapping, Optional

import gymnasium as gym
import keras
import numpy as np
import tensorflow as tf

from sbtf.common.compile.acting import ActingPath, WeightVersion
from sbtf.common.envs.dict_obs import DictObsLayout, layout_of, preprocess_dict
from sbtf.common.distributions import make_proba_dist_type, softmax_np
from sbtf.common.compile.fast_call import FastFunction
from sbtf.common.input import (check_obs_space, obs_input_dtype, obs_input_shape, preprocess_obs_np,
                               preprocess_obs_tf)
from sbtf.common.nn.network_ops import TF_OPS
from sbtf.common.extractors import CombinedExtractor, FlattenExtractor
from sbtf.common.extractors import NatureCNN as SB3NatureCNN
from sbtf.common.extractors import is_image_space
from sbtf.common.nn.sde import FeedForwardSDEMixin, SDEHead, scale_action, sde_flat, unscale_action
from sbtf.common.algo.sb3_api import PolicyApi
from sbtf.common.tf_layers import GaussianHead, Linear, Lstm, SB2Layer, get_activation, make_cnn_extractor, nature_cnn
from sbtf.common.tf_layers import NatureCNN  # SB2's layer (kept importable from here)
from sbtf.common.nn.policy_builders import (Sb3NetworkBuilder, _check_net_arch_dict, _checked_features_dim,
                                           _dict_image_keys, _extractor_xla_friendly, _new_features_extractor,
                                           _parse_net_arch, _reinit_keras_sublayers, _sb3_net_arch,
                                           _ScopedExtractor, _torch_default_init)


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


class BasePolicy(PolicyApi, keras.Model):
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
    #: SB3's ``squash_output``: Box actions are ``tanh`` outputs in [-1, 1], rescaled to the bounds for the env
    squash_output = False

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
        # a Dict observation space is fed as packed float32 rows and unpacked inside the network
        # (sbtf.common.envs.dict_obs)
        self.dict_layout: Optional[DictObsLayout] = layout_of(ob_space) if isinstance(ob_space, gym.spaces.Dict) \
            else None
        self._scaled_keys: frozenset = frozenset()  # Dict keys rescaled to [0, 1] (images, see FeedForwardPolicy)
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
        """The policy's acting paths (``sbtf.common.compile.acting.ActingPath``); none for a policy that does not
        act."""
        return [] if self._acting is None else [self._acting]

    def _prepare_obs(self, obs) -> np.ndarray:
        """A batch of raw observations as the policy's input dtype and shape (NumPy); dict observations of a Dict
        space are packed (``sbtf.common.envs.dict_obs``)."""
        if self.dict_layout is not None and isinstance(obs, Mapping):
            return self.dict_layout.pack(obs)
        return np.asarray(obs).astype(self.obs_dtype, copy=False).reshape((-1,) + self.obs_shape)

    def _new_acting_path(self, functions: dict, numpy_allowed: bool = True,
                         install_from_train_steps: bool = True) -> ActingPath:
        """An acting path over ``functions`` (``{name: (fn(ops, *inputs), input specs)}``) of this policy."""
        return ActingPath(functions, self._weight_version, parameter_order=self.parameter_list,
                          numpy_allowed=numpy_allowed, install_from_train_steps=install_from_train_steps)

    def weights_changed(self) -> None:
        """
        The weights were written by a route sbtf does not track (a raw ``variable.assign`` in your own code or your
        own ``tf.function``): the acting copies are re-read when next used. Train steps, ``load``,
        ``load_parameters`` / ``set_parameters``, ``set_weights`` and MPI broadcasts need no such call.
        """
        self._weight_version.bump()

    def set_weights(self, weights):  # a tracked write: the acting copies are re-read when next used
        self.weights_changed()
        try:
            super().set_weights(weights)
        finally:
            self.weights_changed()

    @property
    def acts_in_numpy(self) -> bool:
        """Whether the policy acts in NumPy (every layer on its acting path has a NumPy form)."""
        return any(path.uses_numpy for path in self.acting_paths())

    @property
    def n_weight_reads(self) -> int:
        """How many times the acting paths read the weights from the TF variables (installs not counted)."""
        return sum(path.n_reads for path in self.acting_paths())

    def preprocess(self, obs):
        """TF pre-processing of a batch of observations (a dict of pre-processed keys for a Dict space)."""
        if self.dict_layout is not None:
            return preprocess_dict(TF_OPS, obs, self.dict_layout, self._scaled_keys)
        return preprocess_obs_tf(obs, self.ob_space, self.scale)

    def obs_signature(self, batch: Optional[int] = None) -> tf.TensorSpec:
        return tf.TensorSpec((batch,) + self.obs_shape, tf.as_dtype(self.obs_dtype))

    def step(self, obs, state=None, mask=None, deterministic=False):
        raise NotImplementedError

    def proba_step(self, obs, state=None, mask=None):
        raise NotImplementedError


def _dict_obs_refusal(policy_name: str, ob_space: gym.Space, recurrent: bool) -> str:
    """The error message of a policy that does not take Dict observations: which policy does."""
    if recurrent:
        return (f"Error: {policy_name} does not take Dict observations ({ob_space!r}); use "
                "policy='MultiInputLstmPolicy' (a NatureCNN per image key, the other keys flattened, then the LSTM) "
                "or pass a features_extractor_class that takes a dict in policy_kwargs.")
    return (f"Error: {policy_name} does not take Dict observations ({ob_space!r}); use "
            "policy='MultiInputPolicy' (a NatureCNN per image key, the other keys flattened) or pass a "
            "features_extractor_class that takes a dict in policy_kwargs.")


class ActorCriticPolicy(BasePolicy):
    """Policy with a value head and an action distribution (A2C, ACER, ACKTR, PPO1/2, TRPO, GAIL)."""

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, reuse=False,
                 scale=False, *, dict_obs_ok: bool = False):
        if isinstance(ob_space, gym.spaces.Dict) and not dict_obs_ok:
            raise NotImplementedError(_dict_obs_refusal(type(self).__name__, ob_space, self.recurrent))
        check_obs_space(ob_space, type(self).__name__, allow_dict=dict_obs_ok)
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, reuse=reuse, scale=scale)
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
        The feed-forward network in the backend ``ops`` (``sbtf.common.nn.network_ops``) on raw observations.

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

    def scale_action(self, action: np.ndarray) -> np.ndarray:
        """SB3's ``scale_action``: Box actions from the bounds to [-1, 1]."""
        return scale_action(self.ac_space.low, self.ac_space.high, action)

    def unscale_action(self, scaled_action: np.ndarray) -> np.ndarray:
        """SB3's ``unscale_action``: Box actions from [-1, 1] to the bounds."""
        return unscale_action(self.ac_space.low, self.ac_space.high, scaled_action)

    def proba_step(self, obs, state=None, mask=None):
        """SB2's ``policy_proba``: Discrete softmax; MultiDiscrete [softmax per component]; MultiBinary sigmoid;
        Box [mean, std]."""
        flat = self.flat_params(obs, state, mask)
        if isinstance(self.ac_space, gym.spaces.Discrete):
            return softmax_np(flat)
        if isinstance(self.ac_space, gym.spaces.MultiDiscrete):
            return [softmax_np(p) for p in np.split(flat, np.cumsum(self.ac_space.nvec)[:-1], axis=-1)]
        if isinstance(self.ac_space, gym.spaces.MultiBinary):
            return 1.0 / (1.0 + np.exp(-flat))
        n = self.ac_space.shape[0]
        return [flat[:, :n], np.exp(flat[:, n:])]


#: policy_kwargs that only stable-baselines3 has: any of them selects SB3's meaning of the others (see the class doc)
SB3_POLICY_KWARGS = ("features_extractor_class", "features_extractor_kwargs", "share_features_extractor",
                     "normalize_images", "activation_fn", "ortho_init")


class FeedForwardPolicy(Sb3NetworkBuilder, FeedForwardSDEMixin, ActorCriticPolicy):
    """
    Feed-forward actor-critic policy: features extractor -> ``net_arch`` layers -> action and value heads.

    It takes stable-baselines 2's ``policy_kwargs`` and stable-baselines3's. SB2's (``layers``, ``net_arch``,
    ``act_fun``, ``cnn_extractor``, ``feature_extraction``) keep their meaning and parameter names
    (``model/pi_fc0/w:0`` ...): ``net_arch=[64, 64]`` means two *shared* layers, ``[128, dict(pi=[64], vf=[64])]``
    shared then separate layers. Any of SB3's keys (``features_extractor_class``, ``features_extractor_kwargs``,
    ``share_features_extractor``, ``normalize_images``, ``activation_fn``, ``ortho_init``) selects SB3's meaning:
    ``net_arch=[64, 64]`` then means separate pi and vf layers of those sizes (SB3 >= 1.8) and the extractor's
    variables are named ``model/features_extractor/...``. The bare ``net_arch=dict(pi=[...], vf=[...])`` means
    separate layers in both (see docs/policies.md).

    :param layers: ([int]) (deprecated, SB2) sizes of separate pi and vf layers; default [64, 64]
    :param net_arch: (list or dict) the layers after the features (see above)
    :param act_fun: (tf function or name) activation after every hidden layer (default tanh)
    :param cnn_extractor: (callable) (SB2) returns the Keras layer that maps scaled images to features
    :param feature_extraction: (str) ``"cnn"`` or ``"mlp"``
    :param features_extractor_class: (type) a Keras layer class with a ``features_dim`` attribute, built as
        ``features_extractor_class(ob_space, **features_extractor_kwargs)`` (see ``sbtf.common.extractors``)
    :param features_extractor_kwargs: (dict) its keyword arguments
    :param share_features_extractor: (bool) one extractor for pi and vf (default True) or one each
    :param normalize_images: (bool) divide image observations by 255 (default True; SB3 mode)
    :param activation_fn: (tf function or name) SB3's name of ``act_fun``
    :param ortho_init: (bool) orthogonal initialisation (SB3 gains: sqrt(2) hidden, 0.01 pi, 1 vf); default True
    :param use_sde: (bool) gSDE (set by the algorithm's ``use_sde``); ``log_std_init``, ``use_expln``, ``full_std``:
        its settings (see ``sbtf.common.nn.sde`` and docs/gsde.md)
    :param squash_output: (bool) gSDE only: actions are ``tanh(mean + noise)`` in [-1, 1], rescaled to the Box bounds
        (SB3's ``squash_output``)
    :param kwargs: (SB2) extra arguments for the CNN extractor
    """

    #: the extractor of a policy built without ``features_extractor_class`` in SB3 mode (None: by feature_extraction)
    default_features_extractor_class: Optional[type] = None

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, reuse=False,
                 layers=None, net_arch=None, act_fun=None, cnn_extractor=nature_cnn, feature_extraction="cnn",
                 features_extractor_class=None, features_extractor_kwargs=None, share_features_extractor=None,
                 normalize_images=None, activation_fn=None, ortho_init=None, use_sde=False, log_std_init=0.0,
                 use_expln=False, full_std=True, squash_output=False, **kwargs):
        if feature_extraction not in ("cnn", "mlp"):
            raise ValueError(f"Error: feature_extraction must be 'cnn' or 'mlp', got {feature_extraction!r}")
        if features_extractor_class is None:
            features_extractor_class = self.default_features_extractor_class
        sb3_mode = features_extractor_class is not None or any(
            value is not None for value in (features_extractor_kwargs, share_features_extractor, normalize_images,
                                            activation_fn, ortho_init))
        if sb3_mode:
            clashes = [name for name, given in (("layers", layers is not None),
                                                ("cnn_extractor", cnn_extractor is not nature_cnn)) if given]
            if clashes or kwargs:
                raise ValueError(f"Error: stable-baselines 2's {clashes + sorted(kwargs)} cannot be combined with "
                                 f"stable-baselines3's policy_kwargs ({list(SB3_POLICY_KWARGS)}); use "
                                 "features_extractor_class / features_extractor_kwargs and net_arch instead.")
            if features_extractor_class is None:
                features_extractor_class = SB3NatureCNN if feature_extraction == "cnn" else FlattenExtractor
        dict_obs = isinstance(ob_space, gym.spaces.Dict)
        if dict_obs and features_extractor_class in (None, FlattenExtractor, SB3NatureCNN):
            raise NotImplementedError(_dict_obs_refusal(type(self).__name__, ob_space, self.recurrent))
        scale = (feature_extraction == "cnn") if not sb3_mode else False
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, reuse=reuse, scale=scale,
                         dict_obs_ok=dict_obs and sb3_mode)
        self.normalize_images = True if normalize_images is None else bool(normalize_images)
        if activation_fn is not None and act_fun is not None and get_activation(act_fun) is not \
                get_activation(activation_fn):
            raise ValueError("Error: act_fun and activation_fn are the same setting (SB2's and SB3's name); "
                             "give one of them.")
        act_fun = activation_fn if activation_fn is not None else (act_fun if act_fun is not None else tf.tanh)
        if layers is not None:
            warnings.warn("Usage of the `layers` parameter is deprecated! Use net_arch instead "
                          "(it has a different semantics though).", DeprecationWarning)
            if net_arch is not None:
                warnings.warn("The new `net_arch` parameter overrides the deprecated `layers` parameter!",
                              DeprecationWarning)
        if isinstance(net_arch, dict):
            _check_net_arch_dict(net_arch)
        self.sb3_mode = sb3_mode
        self.feature_extraction = feature_extraction
        self.act_fun = act_fun
        self._act = get_activation(act_fun)
        self.cnn_kwargs = kwargs
        self.share_features_extractor = True if share_features_extractor is None else bool(share_features_extractor)
        self.ortho_init = True if ortho_init is None else bool(ortho_init)
        self.features_extractor_class = features_extractor_class
        self.features_extractor_kwargs = dict(features_extractor_kwargs or {})
        self.features_extractor = self.pi_features_extractor = self.vf_features_extractor = None
        self.cnn = None

        if sb3_mode:
            if net_arch is None:
                net_arch = [] if features_extractor_class is SB3NatureCNN else dict(pi=[64, 64], vf=[64, 64])
            shared, pi_sizes, vf_sizes = _sb3_net_arch(net_arch)
            self._scaled_keys = self._image_keys() if self.normalize_images else frozenset()
            if not dict_obs and self.normalize_images and is_image_space(ob_space):
                self.scale = True
            features_dim = self._build_extractors(shared)
            pi_dim = vf_dim = features_dim
        elif feature_extraction == "cnn":
            if len(self.obs_shape) != 3:
                raise ValueError(f"Error: CnnPolicy needs image observations (H, W, C), got shape {self.obs_shape}; "
                                 "use MlpPolicy for vector observations.")
            self.cnn = make_cnn_extractor(cnn_extractor, kwargs)  # a Keras layer, or SB2's function traced into one
            features = self.cnn(tf.zeros((1,) + self.obs_shape))
            self._register(*(self.cnn.sb2_layers() if hasattr(self.cnn, "sb2_layers") else []))
            shared, pi_sizes, vf_sizes = [], [], []  # SB2 ignores net_arch with a CNN
            pi_dim = vf_dim = int(features.shape[-1])
        else:
            if kwargs:
                raise ValueError(f"Unknown keywords for policy: {kwargs}")
            if net_arch is None:
                net_arch = [dict(vf=list(layers or [64, 64]), pi=list(layers or [64, 64]))]
            shared, pi_sizes, vf_sizes = _parse_net_arch([net_arch] if isinstance(net_arch, dict) else net_arch)
            pi_dim = vf_dim = int(np.prod(preprocess_obs_np(np.zeros((1,) + self.obs_shape, self.obs_dtype),
                                                            ob_space).shape[1:]))
        self.net_arch = net_arch
        self.shared_layers, self.pi_layers, self.vf_layers = [], [], []
        if self.cnn is None:
            pi_dim = vf_dim = self._build_mlp(shared, pi_sizes, vf_sizes, pi_dim)
        self.vf_head = Linear("vf", 1)
        self.vf_head.build((None, vf_dim[1] if isinstance(vf_dim, tuple) else vf_dim))
        pi_head, self.q_head = self.pdtype.make_heads(init_scale=0.01)
        self.use_sde, self.sde_noise = self._sde_settings(use_sde, log_std_init, use_expln, full_std, squash_output)
        # gSDE (sbtf.common.nn.sde): the mean layer and the log_std matrix replace the Gaussian head, which is never
        # assigned (Keras would track it as an unbuilt sub-layer and warn at build)
        self.pi_head = pi_head if not self.use_sde else SDEHead("pi", self.ac_space.shape[0], log_std_init, full_std,
                                                                use_expln, init_scale=0.01)
        self.pi_head.build((None, pi_dim[0] if isinstance(pi_dim, tuple) else pi_dim))
        if isinstance(self.pi_head, GaussianHead):  # SB3: log_std_init also sets a plain Gaussian's log std
            self.pi_head.logstd.assign(np.full(self.pi_head.logstd.shape, log_std_init, np.float32))
        self.q_head.build((None, vf_dim[1] if isinstance(vf_dim, tuple) else vf_dim))
        self._register(self.vf_head, self.pi_head, self.q_head)
        if sb3_mode and not self.ortho_init:
            _torch_default_init(self.shared_layers + self.pi_layers + self.vf_layers + [self.vf_head, self.pi_head,
                                                                                        self.q_head])
        self._finish_build()
        # NumPy acting runs ``network``; a subclass that replaces the TF maths (``forward``) acts through TF
        functions = {"network": (self.network, [self.obs_signature()])}
        if self.use_sde:
            functions.update(sde_network=(self.sde_network, [self.obs_signature()]), sde_std=(self._sde_std, []))
        self._acting = self._new_acting_path(functions, numpy_allowed=type(self).forward is FeedForwardPolicy.forward)


    @property
    def xla_friendly(self) -> bool:
        """Whether XLA-compiling a train step pays off on CPU (``sbtf.common.tf_util.xla_pays_off``): MLPs only.
        Convolutions run ~35x slower under XLA on CPU, and a user's Keras layers may use ops XLA cannot compile."""
        if not self.sb3_mode:
            return self.feature_extraction == "mlp"
        extractors = [e for e in (self.features_extractor, self.pi_features_extractor, self.vf_features_extractor)
                      if e is not None]
        return all(_extractor_xla_friendly(e) for e in extractors)

    # --- the network (written once, see sbtf.common.nn.network_ops) -----------------------------------
    def _preprocess_input(self, ops, obs):
        """Raw (packed) observations to what the extractor takes: a dict of pre-processed keys for a Dict space."""
        if self.dict_layout is not None:
            return preprocess_dict(ops, obs, self.dict_layout, self._scaled_keys)
        return ops.preprocess(obs, self.ob_space, self.scale)

    def extract_features(self, ops, x):
        """Features of pre-processed observations ``x`` in the backend ``ops``: the extractor (SB3 mode), the SB2
        CNN, or the flattened input, then the shared layers. Subclasses may override this with layers of their own
        (acting then runs in NumPy only if those layers have a NumPy form)."""
        if self.features_extractor is not None:
            latent = ops.layer(self.features_extractor, x)
        elif self.feature_extraction == "cnn":
            return ops.layer(self.cnn, x)
        else:
            latent = ops.flatten(x)
        act = ops.activation(self.act_fun)
        for layer in self.shared_layers:
            latent = act(ops.layer(layer, latent))
        return latent

    def network(self, ops, obs, with_q: bool = False):
        out = self.sde_network(ops, obs, with_q=with_q)
        return (out[0], out[1], out[3]) if with_q else out[:2]

    def sde_network(self, ops, obs, with_q: bool = False):
        """``network`` plus the pi latent features (gSDE's noise is ``latent @ exploration matrix``).

        :return: (flat distribution parameters, value, latent_pi), plus the q-values when ``with_q``
        """
        x = self._preprocess_input(ops, obs)
        if self.pi_features_extractor is not None:  # share_features_extractor=False
            latent_pi = ops.layer(self.pi_features_extractor, x)
            latent_vf = ops.layer(self.vf_features_extractor, x)
        else:
            latent_pi = latent_vf = self.extract_features(ops, x)
        act = ops.activation(self.act_fun)
        for layer in self.pi_layers:
            latent_pi = act(ops.layer(layer, latent_pi))
        for layer in self.vf_layers:
            latent_vf = act(ops.layer(layer, latent_vf))
        value = ops.layer(self.vf_head, latent_vf)[:, 0]
        flat = ops.layer(self.pi_head, latent_pi)
        if isinstance(self.pi_head, GaussianHead):  # SB2's flat parameters: [mean, logstd broadcast to the batch]
            flat = ops.concat([flat, flat * 0.0 + ops.weight(self.pi_head, "logstd")])
        elif isinstance(self.pi_head, SDEHead):
            flat = sde_flat(ops, self.pi_head, flat, latent_pi)
        if with_q:
            return flat, value, latent_pi, ops.layer(self.q_head, latent_vf)
        return flat, value, latent_pi


    def forward(self, obs, state=None, mask=None, n_steps: int = 1):
        flat, value, q_value = self.network(TF_OPS, obs, with_q=True)
        return flat, value, q_value, None


class LstmPolicy(ActorCriticPolicy):
    """
    Recurrent actor-critic policy (SB2 ``LstmPolicy``): features, an LSTM of ``n_lstm`` units, heads.

    State and mask semantics are SB2's: ``state`` is ``concat[c, h]`` per env, ``mask`` is the done
    flag of the previous step (the state is reset before processing an observation whose mask is 1).

    The features are SB2's (the flattened observation, or ``cnn_extractor``'s with ``feature_extraction="cnn"``)
    unless a features extractor is given (stable-baselines3's ``features_extractor_class``, the default of
    ``MultiInputLstmPolicy``): its features then replace the flattened observation / the CNN and go through the
    layers before the LSTM (``layers`` in the legacy mode, default [64, 64], none with
    ``feature_extraction="cnn"``; the ints before ``'lstm'`` in ``net_arch``). Its variables are named
    ``model/features_extractor/...``, the other layers keep SB2's names (``pi_fc0``, ``lstm1``, ``shared_fc0`` ...).

    :param n_lstm: (int) units of the LSTM
    :param layers: ([int]) (legacy mode) sizes of the layers before the LSTM
    :param net_arch: (list) ints (shared layers, before or after the LSTM), ``'lstm'`` once, then optionally
        ``dict(pi=[...], vf=[...])``
    :param act_fun: (tf function or name) activation after every hidden layer (default tanh); ``activation_fn`` is
        stable-baselines3's name of the same setting
    :param cnn_extractor: (callable) (SB2) the CNN of ``feature_extraction="cnn"``
    :param layer_norm: (bool) layer-normalised LSTM (SB2's ``lnlstm``)
    :param feature_extraction: (str) ``"cnn"`` or ``"mlp"``
    :param features_extractor_class: (type) a Keras layer class with a ``features_dim`` attribute, built as
        ``features_extractor_class(ob_space, **features_extractor_kwargs)`` (see ``sbtf.common.extractors``); given
        ``features_extractor_kwargs`` or ``normalize_images`` alone select SB3's ``NatureCNN`` (``"cnn"``) or
        ``FlattenExtractor`` (``"mlp"``)
    :param features_extractor_kwargs: (dict) its keyword arguments
    :param normalize_images: (bool) divide image observations by 255 (default True; extractor mode)
    :param kwargs: (SB2) extra arguments for the CNN extractor
    """

    recurrent = True
    #: the extractor of a policy built without ``features_extractor_class`` (None: SB2's flattening / CNN)
    default_features_extractor_class: Optional[type] = None

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, n_lstm=256,
                 reuse=False, layers=None, net_arch=None, act_fun=tf.tanh, cnn_extractor=nature_cnn,
                 layer_norm=False, feature_extraction="cnn", features_extractor_class=None,
                 features_extractor_kwargs=None, normalize_images=None, activation_fn=None, **kwargs):
        if features_extractor_class is None:
            features_extractor_class = self.default_features_extractor_class
        if features_extractor_class is None and (features_extractor_kwargs is not None
                                                 or normalize_images is not None):
            features_extractor_class = SB3NatureCNN if feature_extraction == "cnn" else FlattenExtractor
        if features_extractor_class is not None and (cnn_extractor is not nature_cnn or kwargs):
            given = (["cnn_extractor"] if cnn_extractor is not nature_cnn else []) + sorted(kwargs)
            raise ValueError(f"Error: {given} cannot be combined with a features extractor "
                             f"({getattr(features_extractor_class, '__name__', features_extractor_class)}); pass "
                             "its arguments in features_extractor_kwargs.")
        dict_obs = isinstance(ob_space, gym.spaces.Dict)
        if features_extractor_class is CombinedExtractor and ob_space is not None and not dict_obs:
            raise ValueError(f"Error: {type(self).__name__} (CombinedExtractor) takes Dict observations, not "
                             f"{ob_space!r}; use MlpLstmPolicy or CnnLstmPolicy.")
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, reuse=reuse,
                         scale=(feature_extraction == "cnn" and features_extractor_class is None),
                         dict_obs_ok=dict_obs and features_extractor_class not in (None, FlattenExtractor,
                                                                                     SB3NatureCNN))
        if activation_fn is not None:
            if act_fun is not tf.tanh and get_activation(act_fun) is not get_activation(activation_fn):
                raise ValueError("Error: act_fun and activation_fn are the same setting (SB2's and SB3's name); "
                                 "give one of them.")
            act_fun = activation_fn
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
        self.features_extractor = None
        self.features_extractor_class = features_extractor_class
        self.features_extractor_kwargs = dict(features_extractor_kwargs or {})
        self.normalize_images = True if normalize_images is None else bool(normalize_images)
        if features_extractor_class is not None:
            in_dim = self._build_features_extractor()
        self.shared_layers: list = []      # before the LSTM
        self.post_lstm_layers: list = []   # shared layers after the LSTM (net_arch mode)
        self.pi_layers: list = []
        self.vf_layers: list = []
        if net_arch is None:  # legacy mode
            if layers is None:
                layers = [] if (self.features_extractor is not None and feature_extraction == "cnn") else [64, 64]
            else:
                warnings.warn("The layers parameter is deprecated. Use the net_arch parameter instead.",
                              DeprecationWarning)
            if feature_extraction == "cnn" and self.features_extractor is None:
                self.cnn = make_cnn_extractor(cnn_extractor, kwargs)
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
            if layers is not None:
                warnings.warn("The new net_arch parameter overrides the deprecated layers parameter.")
            if feature_extraction == "cnn" and self.features_extractor is None:
                raise NotImplementedError("Error: net_arch is not supported with a CNN LSTM policy (as in SB2)")
            lstm_seen = False
            pi_sizes: list = []
            vf_sizes: list = []
            for idx, layer_spec in enumerate(net_arch):
                if isinstance(layer_spec, (int, np.integer)):  # shared, before or after the LSTM (SB2: shared_fc{idx})
                    layer = Linear(f"shared_fc{idx}", int(layer_spec), init_scale=np.sqrt(2))
                    layer.build((None, in_dim))
                    in_dim = int(layer_spec)
                    (self.post_lstm_layers if lstm_seen else self.shared_layers).append(layer)
                    self._register(layer)
                elif isinstance(layer_spec, str) and layer_spec == "lstm":
                    if lstm_seen:
                        raise ValueError("The net_arch parameter must only contain one occurrence of 'lstm'!")
                    lstm_seen = True
                    self.lstm = Lstm("lstm1", self.n_lstm, layer_norm=layer_norm)
                    self.lstm.build((None, in_dim))
                    self._register(self.lstm)
                    in_dim = self.n_lstm
                elif isinstance(layer_spec, dict):
                    pi_sizes = list(layer_spec.get("pi", []))
                    vf_sizes = list(layer_spec.get("vf", []))
                    break  # from here on the network splits into the policy and the value networks
                else:
                    raise ValueError(f"Error: the net_arch list can only contain ints, 'lstm' and one dict, got "
                                     f"{layer_spec!r}")
            for sizes, key in ((pi_sizes, "pi"), (vf_sizes, "vf")):
                if "lstm" in [s for s in sizes if isinstance(s, str)]:
                    raise NotImplementedError("LSTMs are only supported in the shared part of the policy network.")
                if not all(isinstance(s, (int, np.integer)) for s in sizes):
                    raise ValueError(f"Error: net_arch[-1][{key!r}] must only contain integers, got {sizes!r}")
            if not lstm_seen:
                raise ValueError("The net_arch parameter must contain at least one occurrence of 'lstm'!")
            pi_dim = vf_dim = in_dim
            for i, size in enumerate(pi_sizes):  # SB2 creates every pi_fc before every vf_fc
                layer = Linear(f"pi_fc{i}", int(size), init_scale=np.sqrt(2))
                layer.build((None, pi_dim))
                pi_dim = int(size)
                self.pi_layers.append(layer)
                self._register(layer)
            for i, size in enumerate(vf_sizes):
                layer = Linear(f"vf_fc{i}", int(size), init_scale=np.sqrt(2))
                layer.build((None, vf_dim))
                vf_dim = int(size)
                self.vf_layers.append(layer)
                self._register(layer)
        self.vf_head = Linear("vf", 1)
        self.vf_head.build((None, vf_dim))
        self.pi_head, self.q_head = self.pdtype.make_heads(init_scale=1.0)  # SB2: 1.0 in both modes (0.01 feed-forward)
        self.pi_head.build((None, pi_dim))
        self.q_head.build((None, vf_dim))
        self._register(self.vf_head, self.pi_head, self.q_head)
        self._finish_build()

    def _build_features_extractor(self) -> int:
        """Build the features extractor (``self.features_extractor_class``) on a dummy observation, register its
        variables as ``features_extractor/...`` and return its ``features_dim``."""
        if self.dict_layout is not None:
            self._scaled_keys = _dict_image_keys(self.dict_layout, self.features_extractor_kwargs) \
                if self.normalize_images else frozenset()
        elif self.normalize_images and is_image_space(self.ob_space):
            self.scale = True  # SB3's normalize_images: an image space is divided by 255 (its bounds)
        layer = _new_features_extractor(self.features_extractor_class, self.ob_space, self.features_extractor_kwargs)
        dim = _checked_features_dim(layer, layer(self.preprocess(tf.zeros((1,) + self.obs_shape,
                                                                          tf.as_dtype(self.obs_dtype)))))
        if not hasattr(layer, "named_variables"):  # SB3's ortho_init of a user's Keras layers (sbtf's are orthogonal)
            _reinit_keras_sublayers(layer, np.sqrt(2))
        self.features_extractor = layer
        self._register(_ScopedExtractor("features_extractor", layer))
        return dim

    @property
    def xla_friendly(self) -> bool:
        """Whether XLA-compiling a train step pays off on CPU (``sbtf.common.tf_util.xla_pays_off``): no for a
        CNN or a user's Keras extractor."""
        if self.features_extractor is not None:
            return _extractor_xla_friendly(self.features_extractor)
        return self.feature_extraction == "mlp"

    @property
    def initial_state(self) -> np.ndarray:
        return self._initial_state.copy()

    def forward(self, obs, state=None, mask=None, n_steps: int = 1):
        x = self.preprocess(obs)
        if self.features_extractor is not None:
            latent = self.features_extractor(x)
        elif self.cnn is not None:
            latent = self.cnn(x)
        else:
            latent = tf.reshape(x, (-1, int(np.prod(x.shape[1:]))))
        for layer in self.shared_layers:  # none after SB2's CNN
            latent = self._act(layer(latent))
        latent, new_state = self.lstm(latent, masks=mask, state=state, n_steps=n_steps)
        for layer in self.post_lstm_layers:
            latent = self._act(layer(latent))
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


class MultiInputPolicy(FeedForwardPolicy):
    """
    Actor-critic policy for Dict observations (SB3's ``MultiInputPolicy``): a ``CombinedExtractor`` (a NatureCNN per
    image key, the other keys flattened; ``features_extractor_kwargs=dict(cnn_output_dim=..., normalized_image=...)``)
    then ``net_arch`` (default ``dict(pi=[64, 64], vf=[64, 64])``) and the heads. Takes SB3's policy_kwargs.
    """

    default_features_extractor_class = CombinedExtractor

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, reuse=False,
                 **_kwargs):
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, reuse, feature_extraction="mlp",
                         **_kwargs)


class MultiInputLstmPolicy(LstmPolicy):
    """
    Recurrent actor-critic policy for Dict observations: a ``CombinedExtractor`` (a NatureCNN per image key, the
    other keys flattened; ``features_extractor_kwargs=dict(cnn_output_dim=..., normalized_image=...)``, or your
    ``features_extractor_class``), then SB2's ``LstmPolicy`` on its features: ``layers`` (default [64, 64],
    ``pi_fc0`` ...) or ``net_arch`` with ``'lstm'``, the LSTM of ``n_lstm`` units (``lstm1``) and the heads.
    """

    default_features_extractor_class = CombinedExtractor

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, n_lstm=256,
                 reuse=False, **_kwargs):
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, n_lstm, reuse, feature_extraction="mlp",
                         **_kwargs)


class MultiInputLnLstmPolicy(MultiInputLstmPolicy):
    """``MultiInputLstmPolicy`` with a layer-normalised LSTM (SB2's ``lnlstm``)."""

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, n_lstm=256,
                 reuse=False, **_kwargs):
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, n_lstm, reuse, layer_norm=True,
                         **_kwargs)


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
        "MultiInputPolicy": MultiInputPolicy,
        "MultiInputLstmPolicy": MultiInputLstmPolicy,
        "MultiInputLnLstmPolicy": MultiInputLnLstmPolicy,
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


__all__ = ["BasePolicy", "ActorCriticPolicy", "RecurrentActorCriticPolicy", "LstmPolicy", "FeedForwardPolicy",
           "CnnPolicy", "CnnLstmPolicy", "CnnLnLstmPolicy", "MlpPolicy", "MlpLstmPolicy", "MlpLnLstmPolicy",
           "nature_cnn", "mlp_extractor", "get_policy_from_name", "register_policy", "register_policy_base",
           "NatureCNN", "MultiInputPolicy", "MultiInputLstmPolicy",
           "MultiInputLnLstmPolicy", "SB3_POLICY_KWARGS"]

