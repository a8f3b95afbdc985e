"""TD3 policies (stable-baselines 2.x ``td3/policies.py``) as Keras models.

``make_actor()`` creates the deterministic actor ``pi/`` (hidden stack ``fc{i}`` [+ ``LayerNorm{_i}``], output
``dense`` with tanh, in [-1, 1]); ``make_critics()`` creates the twin critics ``values_fn/qf1``, ``values_fn/qf2`` on
``concat[features, action]``, all with SB2's variable names. The actor is written once (``actor``); acting (``step``)
runs it through the policy's acting path: in NumPy on copies of the weights for Mlp actors, else through one compiled
TF call.
"""
from __future__ import annotations

import tensorflow as tf

from sbtf.common.nn.box_actor_critic_policy import BoxActorCriticPolicy, make_actor_critic_policies
from sbtf.common.nn.network_ops import TF_OPS
from sbtf.common.nn.off_policy_networks import (ActorCriticNetworks, image_scaling, init_sb3_settings,
                                             multi_input_kwargs, resolve_off_policy_arch)
from sbtf.common.policies import nature_cnn, register_policy_base


class TD3Policy(BoxActorCriticPolicy):
    """
    Policy object that implements a TD3-like actor critic (the arguments of ``BoxActorCriticPolicy``)
    """

    algo_name = "TD3"

    def make_critics(self, obs=None, action=None, reuse=False, scope="values_fn"):
        """
        Creates the two Q-Values approximator

        :param obs: (TensorFlow Tensor) a batch of observations (None: only create the variables)
        :param action: (TensorFlow Tensor) a batch of actions in [-1, 1]
        :param reuse: (bool) ignored (TF2)
        :param scope: (str) the scope name
        :return: ([tf.Tensor]) the output tensors
        """
        raise NotImplementedError


class FeedForwardPolicy(ActorCriticNetworks, TD3Policy):
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
    :param act_fun: (tf.func) the activation function to use in the neural network.
    :param net_arch: ([int] or dict) SB3's layer sizes: ``[400, 300]`` for the actor and each critic, or
        ``dict(pi=[...], qf=[...])``; instead of ``layers``
    :param activation_fn: SB3's name of ``act_fun`` (a TF/Keras function, a name, or a Keras layer class)
    :param n_critics: (int) the number of Q critics ``qf1``, ``qf2``, ... (SB3's default 2, as SB2)
    :param share_features_extractor: (bool) the critics use the actor's feature extractor (SB3's default False: each
        has its own, SB2's layout)
    :param normalize_images: (bool) rescale image observations to [0, 1] (None: SB2's rule, CNN policies do)
    :param features_extractor_class: (type) SB3's feature extractor: a Keras layer class with a ``features_dim``,
        built as ``features_extractor_class(ob_space, **features_extractor_kwargs)`` for the actor and (unless
        shared) the critics, variables ``<scope>/features_extractor/...``; replaces SB2's CNN / flattening
    :param features_extractor_kwargs: (dict) its keyword arguments
    :param kwargs: (dict) Extra keyword arguments for the nature CNN feature extraction
    """

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, reuse=False,
                 layers=None, cnn_extractor=nature_cnn, feature_extraction="cnn", layer_norm=False,
                 act_fun=tf.nn.relu, net_arch=None, activation_fn=None, n_critics=2, share_features_extractor=False,
                 normalize_images=None, features_extractor_class=None, features_extractor_kwargs=None, **kwargs):
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, reuse=reuse,
                         scale=image_scaling(ob_space, feature_extraction, normalize_images,
                                             features_extractor_class))
        init_sb3_settings(self, "TD3", net_arch, normalize_images, features_extractor_class,
                          features_extractor_kwargs)
        arch = resolve_off_policy_arch(
            "TD3", type(self), self.obs_shape, layers=layers, net_arch=net_arch, feature_extraction=feature_extraction,
            act_fun=act_fun, activation_fn=activation_fn, n_critics=n_critics,
            share_features_extractor=share_features_extractor, cnn_extractor=cnn_extractor, cnn_kwargs=kwargs,
            features_extractor_class=features_extractor_class)
        self._init_networks(arch, cnn_extractor, feature_extraction, layer_norm, kwargs)

    def make_actor(self, obs=None, reuse=False, scope="pi"):
        if self.actor_mlp is None:
            self._build_actor(scope, [("dense", "tanh")])
        if obs is None:
            return None
        return self.actor(obs)

    def make_critics(self, obs=None, action=None, reuse=False, scope="values_fn"):
        if not self.critic_heads:
            self._build_critics(scope, self.qf_names, [True] * self.n_critics)
        if obs is None or action is None:
            return None
        return tuple(self.q_values(self.critic_features(obs), action))

    def q_values(self, features, action) -> list:
        """The outputs (batch, 1) of every Q critic (``qf_names`` order) on critic features and actions."""
        return [self.critic(name, features, action) for name in self.qf_names]

    def actor(self, obs, ops=TF_OPS):
        """The deterministic action in [-1, 1] for a batch of observations (backend ``ops``)."""
        return self.actor_head_outputs(obs, ops)[0]

    def call(self, inputs, training=None):
        return self.actor(inputs)

    def _acting_functions(self) -> dict:
        return {"actor": (lambda ops, obs: self.actor(obs, ops), [self.obs_signature()])}

    def step(self, obs, state=None, mask=None):
        return self._run_acting("actor", obs)


CnnPolicy, LnCnnPolicy, MlpPolicy, LnMlpPolicy = make_actor_critic_policies(FeedForwardPolicy, __name__)


class MultiInputPolicy(FeedForwardPolicy):
    """
    TD3 policy for Dict observations (SB3's ``MultiInputPolicy``): a ``CombinedExtractor`` (a NatureCNN per image
    key, the other keys flattened; ``features_extractor_kwargs=dict(cnn_output_dim=..., normalized_image=...)``) for
    the actor and for the critics, then ``net_arch`` (SB3's default [400, 300]) and the heads.

    :param _kwargs: (dict) the policy_kwargs (SB3's and SB2's, see ``FeedForwardPolicy``)
    """

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, reuse=False,
                 **_kwargs):
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, reuse, feature_extraction="mlp",
                         **multi_input_kwargs("TD3", _kwargs))

register_policy_base(TD3Policy, {
    "CnnPolicy": CnnPolicy,
    "LnCnnPolicy": LnCnnPolicy,
    "MlpPolicy": MlpPolicy,
    "LnMlpPolicy": LnMlpPolicy,
    "MultiInputPolicy": MultiInputPolicy,
})

__all__ = ["TD3Policy", "FeedForwardPolicy", "CnnPolicy", "LnCnnPolicy", "MlpPolicy", "LnMlpPolicy",
           "MultiInputPolicy"]
