"""SAC policies (stable-baselines 2.x ``sac/policies.py``) as Keras models.

``make_actor()`` creates the tanh-squashed Gaussian actor ``pi/`` (hidden stack ``fc{i}`` [+ ``LayerNorm{_i}``],
mean head ``dense``, log-std head ``dense_1``, log-std clipped to [LOG_STD_MIN, LOG_STD_MAX]); ``make_critics()``
creates ``values_fn/vf`` (state value) and the twin ``values_fn/qf1``, ``values_fn/qf2`` (on
``concat[features, action]``), all with SB2's variable names. The actor is written once (``actor_mu_log_std``); acting
(``step``) runs it through the policy's acting path: in NumPy on copies of the weights for Mlp actors, else through
one compiled TF call.
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from sbtf.common.nn.box_actor_critic_policy import BoxActorCriticPolicy, make_actor_critic_policies
from sbtf.common.nn.network_ops import TF_OPS
from sbtf.common.nn.off_policy_networks import (ActorCriticNetworks, image_scaling, init_sb3_settings,
                                             multi_input_kwargs, resolve_off_policy_arch)
from sbtf.common.nn.sde import ExplorationNoise, SDELogStd, sde_log_std, sde_std
from sbtf.common.policies import nature_cnn, register_policy_base

EPS = 1e-6  # Avoid NaN (prevents division by zero or log of zero)
# CAP the standard deviation of the actor
LOG_STD_MAX = 2
LOG_STD_MIN = -20


def gaussian_likelihood(input_, mu_, log_std):
    """
    Helper to computer log likelihood of a gaussian.
    Here we assume this is a Diagonal Gaussian.

    :param input_: (tf.Tensor)
    :param mu_: (tf.Tensor)
    :param log_std: (tf.Tensor)
    :return: (tf.Tensor)
    """
    pre_sum = -0.5 * (((input_ - mu_) / (tf.exp(log_std) + EPS)) ** 2 + 2 * log_std + np.log(2 * np.pi))
    return tf.reduce_sum(pre_sum, axis=1)


def gaussian_entropy(log_std):
    """
    Compute the entropy for a diagonal Gaussian distribution.

    :param log_std: (tf.Tensor) Log of the standard deviation
    :return: (tf.Tensor)
    """
    return tf.reduce_sum(log_std + 0.5 * np.log(2.0 * np.pi * np.e), axis=-1)


def clip_but_pass_gradient(input_, lower=-1., upper=1.):
    """Clip in the forward pass, identity gradient in the backward pass."""
    clip_up = tf.cast(input_ > upper, tf.float32)
    clip_low = tf.cast(input_ < lower, tf.float32)
    return input_ + tf.stop_gradient((upper - input_) * clip_up + (lower - input_) * clip_low)


def apply_squashing_func(mu_, pi_, logp_pi):
    """
    Squash the output of the Gaussian distribution and account for that in the log probability.
    The squashed mean is also returned for using deterministic actions.

    :param mu_: (tf.Tensor) Mean of the gaussian
    :param pi_: (tf.Tensor) Output of the policy before squashing
    :param logp_pi: (tf.Tensor) Log probability before squashing
    :return: ([tf.Tensor])
    """
    deterministic_policy = tf.tanh(mu_)
    policy = tf.tanh(pi_)
    logp_pi -= tf.reduce_sum(tf.math.log(1 - policy ** 2 + EPS), axis=1)
    return deterministic_policy, policy, logp_pi


class SACPolicy(BoxActorCriticPolicy):
    """
    Policy object that implements a SAC-like actor critic (the arguments of ``BoxActorCriticPolicy``)
    """

    algo_name = "SAC"

    def make_critics(self, obs=None, action=None, reuse=False, scope="values_fn", create_vf=True, create_qf=True):
        """
        Creates the two Q-Values approximator along with the Value function

        :param obs: (TensorFlow Tensor) a batch of observations (None: only create the variables)
        :param action: (TensorFlow Tensor) a batch of actions in [-1, 1]
        :param reuse: (bool) ignored (TF2)
        :param scope: (str) the scope name
        :param create_vf: (bool) Whether to create Value fn or not
        :param create_qf: (bool) Whether to create Q-Values fn or not
        :return: ([tf.Tensor]) Mean, action and log probability
        """
        raise NotImplementedError

    def step(self, obs, state=None, mask=None, deterministic=False):
        """
        Returns the policy for a single step

        :param obs: ([float] or [int]) The current observation of the environment
        :param state: ([float]) The last states (used in recurrent policies)
        :param mask: ([float]) The last masks (used in recurrent policies)
        :param deterministic: (bool) Whether or not to return deterministic actions.
        :return: ([float]) actions
        """
        raise NotImplementedError

    def proba_step(self, obs, state=None, mask=None):
        """
        Returns the action probability params (mean, std) for a single step

        :param obs: ([float] or [int]) The current observation of the environment
        :param state: ([float]) The last states (used in recurrent policies)
        :param mask: ([float]) The last masks (used in recurrent policies)
        :return: ([float], [float])
        """
        raise NotImplementedError


class FeedForwardPolicy(ActorCriticNetworks, SACPolicy):
    """
    Policy object that implements a DDPG-like actor critic, using a feed forward neural network.

    :param sess: (None) kept for SB2 compatibility
    :param ob_space: (gymnasium.Space) The observation space of the environment
    :param ac_space: (gymnasium.Space) The action space of the environment
    :param n_env: (int) The number of environments to run
    :param n_steps: (int) The number of steps to run for each environment
    :param n_batch: (int) The number of batch to run (n_envs * n_steps)
    :param reuse: (bool) ignored (TF2)
    :param layers: ([int]) The size of the Neural network for the policy (if None, default to [64, 64])
    :param cnn_extractor: (callable) the CNN feature extraction (returns a Keras layer, see ``nature_cnn``)
    :param feature_extraction: (str) The feature extraction type ("cnn" or "mlp")
    :param layer_norm: (bool) enable layer normalisation
    :param reg_weight: (float) Regularization loss weight for the policy parameters (unused, as in SB2)
    :param act_fun: (tf.func) the activation function to use in the neural network.
    :param net_arch: ([int] or dict) SB3's layer sizes: ``[256, 256]`` for the actor and each critic, or
        ``dict(pi=[...], qf=[...])`` (the state-value network ``vf`` has the critics' sizes); instead of ``layers``
    :param activation_fn: SB3's name of ``act_fun`` (a TF/Keras function, a name, or a Keras layer class)
    :param n_critics: (int) the number of Q critics ``qf1``, ``qf2``, ... (SB3's default 2, as SB2)
    :param share_features_extractor: (bool) the critics use the actor's feature extractor (SB3's default False: each
        has its own, SB2's layout)
    :param normalize_images: (bool) rescale image observations to [0, 1] (None: SB2's rule, CNN policies do)
    :param features_extractor_class: (type) SB3's feature extractor: a Keras layer class with a ``features_dim``,
        built as ``features_extractor_class(ob_space, **features_extractor_kwargs)`` for the actor and (unless
        shared) the critics, variables ``<scope>/features_extractor/...``; replaces SB2's CNN / flattening
    :param features_extractor_kwargs: (dict) its keyword arguments
    :param use_sde: (bool) gSDE actor (set by ``SAC(use_sde=True)``; see ``sbtf.common.nn.sde``)
    :param log_std_init: (float) initial gSDE ``log_std`` (SB3's SAC default -3)
    :param use_expln: (bool) gSDE: ``expln`` instead of ``exp`` for the std
    :param full_std: (bool) gSDE: one std per (latent, action) pair, else one per latent unit
    :param clip_mean: (float) gSDE: the mean is clipped to [-clip_mean, clip_mean] (SB3's Hardtanh; 0: no clip)
    :param kwargs: (dict) Extra keyword arguments for the nature CNN feature extraction
    """

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, reuse=False,
                 layers=None, cnn_extractor=nature_cnn, feature_extraction="cnn", reg_weight=0.0, layer_norm=False,
                 act_fun=tf.nn.relu, net_arch=None, activation_fn=None, n_critics=2, share_features_extractor=False,
                 normalize_images=None, features_extractor_class=None, features_extractor_kwargs=None,
                 use_sde=False, log_std_init=-3.0, use_expln=False, full_std=True, clip_mean=2.0, **kwargs):
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, reuse=reuse,
                         scale=image_scaling(ob_space, feature_extraction, normalize_images,
                                             features_extractor_class))
        init_sb3_settings(self, "SAC", net_arch, normalize_images, features_extractor_class,
                          features_extractor_kwargs)
        self.reg_weight = reg_weight
        arch = resolve_off_policy_arch(
            "SAC", type(self), self.obs_shape, layers=layers, net_arch=net_arch, feature_extraction=feature_extraction,
            act_fun=act_fun, activation_fn=activation_fn, n_critics=n_critics,
            share_features_extractor=share_features_extractor, cnn_extractor=cnn_extractor, cnn_kwargs=kwargs,
            features_extractor_class=features_extractor_class)
        self.use_sde = bool(use_sde)
        self.sde_settings = dict(log_std_init=float(log_std_init), use_expln=bool(use_expln),
                                 full_std=bool(full_std), clip_mean=float(clip_mean))
        self.sde_noise = ExplorationNoise(self.np_random) if self.use_sde else None
        self.sde_log_std_layer = None
        self._init_networks(arch, cnn_extractor, feature_extraction, layer_norm, kwargs)

    # ------------------------------------------------------------------ building (SB2 API)
    def make_actor(self, obs=None, reuse=False, scope="pi"):
        if self.actor_mlp is None and self.use_sde:  # gSDE: the mean head and the log_std matrix
            self._build_actor(scope, [("dense", None)])
            self.sde_log_std_layer = SDELogStd(scope, self.n_act, self.sde_settings["log_std_init"],
                                               self.sde_settings["full_std"])
            self.sde_log_std_layer.build(self.actor_latent(self._dummy_obs).shape)
            self._actor_named.append(self.sde_log_std_layer)
        if self.actor_mlp is None:
            self._build_actor(scope, [("dense", None), ("dense_1", None)])
        if obs is None:
            return None
        mu_, log_std = self.actor_mu_log_std(obs)
        pi_ = mu_ + tf.random.normal(tf.shape(mu_)) * tf.exp(log_std)
        logp_pi = gaussian_likelihood(pi_, mu_, log_std)
        return apply_squashing_func(mu_, pi_, logp_pi)

    def make_critics(self, obs=None, action=None, reuse=False, scope="values_fn", create_vf=True, create_qf=True):
        if not self.critic_heads:
            names = (["vf"] if create_vf else []) + (self.qf_names if create_qf else [])
            self._build_critics(scope, names, [name != "vf" for name in names])
        if obs is None:
            return None
        features = self.critic_features(obs)
        value_fn = self.critic("vf", features) if "vf" in self.critic_heads else None
        qf1 = qf2 = None
        if action is not None and "qf1" in self.critic_heads:
            qf1 = self.critic("qf1", features, action)
            qf2 = self.critic("qf2", features, action) if "qf2" in self.critic_heads else None
        return qf1, qf2, value_fn

    def q_values(self, features, action) -> list:
        """The outputs (batch, 1) of every Q critic (``qf_names`` order) on critic features and actions."""
        return [self.critic(name, features, action) for name in self.qf_names if name in self.critic_heads]

    # ------------------------------------------------------------------ maths
    def actor_mu_log_std(self, obs, ops=TF_OPS):
        """Mean and clipped log-std of the pre-squash Gaussian for a batch of observations (backend ``ops``); with
        gSDE the log-std is ``0.5 * log(latent**2 @ std**2 + 1e-6)``."""
        if self.use_sde:
            mean, latent, std = self.actor_sde(obs, ops)
            return mean, sde_log_std(latent, std, numpy=ops.is_numpy)
        mu_, log_std = self.actor_head_outputs(obs, ops)
        return mu_, ops.clip(log_std, LOG_STD_MIN, LOG_STD_MAX)

    def actor_sde(self, obs, ops=TF_OPS):
        """gSDE actor: (mean clipped to +-clip_mean, latent features, std matrix (latent_dim, n_act))."""
        latent = self.actor_latent(obs, ops)
        mean = ops.layer(self.actor_heads[0], latent)
        clip_mean = self.sde_settings["clip_mean"]
        if clip_mean > 0:
            mean = ops.clip(mean, -clip_mean, clip_mean)
        std = sde_std(ops.layer(self.sde_log_std_layer, latent), self.n_act, self.sde_settings["use_expln"],
                      self.sde_settings["full_std"], numpy=ops.is_numpy)
        return mean, latent, std

    def call(self, inputs, training=None):
        return tf.tanh(self.actor_mu_log_std(inputs)[0])

    # ------------------------------------------------------------------ acting
    def _acting_functions(self) -> dict:
        functions = {"mu_log_std": (lambda ops, obs: self.actor_mu_log_std(obs, ops), [self.obs_signature()])}
        if self.use_sde:
            functions["sde"] = (lambda ops, obs: self.actor_sde(obs, ops), [self.obs_signature()])
        return functions

    def sde_std_matrix(self) -> np.ndarray:
        """The std of the gSDE exploration matrices (latent_dim, n_act), NumPy."""
        return np.asarray(self._acting("sde", np.zeros((1,) + self.obs_shape, self.obs_dtype))[2])

    def reset_noise(self, n_envs: int = 1) -> None:
        """Sample new gSDE exploration matrices (SB3's ``reset_noise``)."""
        self.sde_noise.reset(self.sde_std_matrix(), n_envs)

    def step(self, obs, state=None, mask=None, deterministic=False):
        if self.use_sde:
            mean, latent, std = self._run_acting("sde", obs)
            if deterministic:
                return np.tanh(mean)
            self.sde_noise.before_step(lambda: std, len(latent))
            return np.tanh(mean + self.sde_noise.noise(latent))
        mu_, log_std = self._run_acting("mu_log_std", obs)
        if deterministic:
            return np.tanh(mu_)
        return np.tanh(mu_ + self.np_random.standard_normal(mu_.shape).astype(np.float32) * np.exp(log_std))

    def proba_step(self, obs, state=None, mask=None):
        mu_, log_std = self._run_acting("mu_log_std", obs)
        return [mu_, np.exp(log_std)]


CnnPolicy, LnCnnPolicy, MlpPolicy, LnMlpPolicy = make_actor_critic_policies(FeedForwardPolicy, __name__)


class MultiInputPolicy(FeedForwardPolicy):
    """
    SAC policy for Dict observations (SB3's ``MultiInputPolicy``): a ``CombinedExtractor`` (a NatureCNN per image
    key, the other keys flattened; ``features_extractor_kwargs=dict(cnn_output_dim=..., normalized_image=...)``) for
    the actor and for the critics, then ``net_arch`` (SB3's default [256, 256]) and the heads.

    :param _kwargs: (dict) the policy_kwargs (SB3's and SB2's, see ``FeedForwardPolicy``)
    """

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, reuse=False,
                 **_kwargs):
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, reuse, feature_extraction="mlp",
                         **multi_input_kwargs("SAC", _kwargs))

register_policy_base(SACPolicy, {
    "CnnPolicy": CnnPolicy,
    "LnCnnPolicy": LnCnnPolicy,
    "MlpPolicy": MlpPolicy,
    "LnMlpPolicy": LnMlpPolicy,
    "MultiInputPolicy": MultiInputPolicy,
})

__all__ = ["SACPolicy", "FeedForwardPolicy", "CnnPolicy", "LnCnnPolicy", "MlpPolicy", "LnMlpPolicy",
           "MultiInputPolicy",
           "gaussian_likelihood", "gaussian_entropy", "clip_but_pass_gradient", "apply_squashing_func", "EPS",
           "LOG_STD_MIN", "LOG_STD_MAX"]
