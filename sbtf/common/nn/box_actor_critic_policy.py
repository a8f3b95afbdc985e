"""The SB2 base of the off-policy actor-critic policies on a Box action space (DDPG, TD3, SAC).

``BoxActorCriticPolicy`` checks the spaces (a Box action space; any observation space, Dict ones through a
``MultiInputPolicy``) and declares SB2's abstract building API (``make_actor``, ``step``, ``proba_step``); each
algorithm's ``<ALGO>Policy`` adds its critics (``make_critics`` / ``make_critic``) and its own acting.
"""
from __future__ import annotations

import gymnasium as gym

from sbtf.common.input import check_obs_space
from sbtf.common.policies import BasePolicy


class BoxActorCriticPolicy(BasePolicy):
    """
    Policy object that implements an off-policy actor critic on a Box action space

    :param sess: (None) kept for SB2 compatibility
    :param ob_space: (gymnasium.Space) The observation space of the environment
    :param ac_space: (gymnasium.Space) The action space of the environment (Box)
    :param n_env: (int) The number of environments to run
    :param n_steps: (int) The number of steps to run for each environment
    :param n_batch: (int) The number of batch to run (n_envs * n_steps)
    :param reuse: (bool) ignored (TF2)
    :param scale: (bool) whether or not to scale the input
    """

    #: the algorithm's name (in errors); set by each ``<ALGO>Policy``
    algo_name = "off-policy"

    def __init__(self, sess=None, ob_space=None, ac_space=None, n_env=1, n_steps=1, n_batch=None, reuse=False,
                 scale=False):
        super().__init__(sess, ob_space, ac_space, n_env, n_steps, n_batch, reuse=reuse, scale=scale)
        if not isinstance(ac_space, gym.spaces.Box):
            raise NotImplementedError(f"Error: {self.algo_name} policies need a Box action space, got {ac_space!r} "
                                      f"({type(ac_space).__name__}).")
        check_obs_space(ob_space, self.algo_name, allow_dict=True)  # Dict: MultiInputPolicy

    def make_actor(self, obs=None, reuse=False, scope="pi"):
        """
        Creates an actor object

        :param obs: (TensorFlow Tensor) a batch of observations (None: only create the variables)
        :param reuse: (bool) ignored (TF2)
        :param scope: (str) the scope name of the actor
        :return: (TensorFlow Tensor) the output tensor
        """
        raise NotImplementedError

    def step(self, obs, state=None, mask=None):
        """
        Returns the policy for a single step

        :param obs: ([float] or [int]) The current observation of the environment
        :param state: ([float]) The last states (used in recurrent policies)
        :param mask: ([float]) The last masks (used in recurrent policies)
        :return: ([float]) actions
        """
        raise NotImplementedError

    def proba_step(self, obs, state=None, mask=None):
        """
        Returns the policy for a single step (a deterministic actor has no probabilities: the actions)

        :param obs: ([float] or [int]) The current observation of the environment
        :param state: ([float]) The last states (used in recurrent policies)
        :param mask: ([float]) The last masks (used in recurrent policies)
        :return: ([float]) actions
        """
        return self.step(obs, state, mask)


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


__all__ = ["make_actor_critic_policies", "BoxActorCriticPolicy"]
