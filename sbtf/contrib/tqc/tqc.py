"""Truncated Quantile Critics (sb3-contrib ``TQC``) on sbtf's off-policy core.

One gradient step is sb3-contrib's: the entropy coefficient update (``ent_coef='auto'``), the critic update towards
the truncated quantile target (the next-state quantiles of all target critics pooled and sorted, the top
``top_quantiles_to_drop_per_net * n_critics`` dropped, the entropy term subtracted), the actor update against the
updated critic's mean quantile, and the Polyak update of the target critic every ``target_update_interval`` gradient
steps. The ``gradient_steps`` steps of a training run in one compiled call, traced once per count; acting with an Mlp
actor is a NumPy forward pass on weights the train call returns.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import tensorflow as tf

from sbtf.common.fileio import model_schema as ms
from sbtf.common.compile.fast_call import TrainStep
from sbtf.common.algo.off_policy_algorithm import learn_doc
from sbtf.contrib.common.quantiles import quantile_huber_loss, truncated_quantile_target
from sbtf.contrib.tqc.policies import TQCPolicy
from sbtf.sb3.common.actor_critic import squashed_gaussian_sample, squashed_sde_sample
from sbtf.sb3.common.off_policy_algorithm import EntropyRegularisedAlgorithm, contrib_save_schema
from sbtf.common.arg_checks import check_hyperparameters


class TQC(EntropyRegularisedAlgorithm):
    """
    Controlling Overestimation Bias with Truncated Mixture of Continuous Distributional Quantile Critics.
    Paper: https://arxiv.org/abs/2005.04269

    :param policy: (TQCPolicy or str) The policy model to use (MlpPolicy, CnnPolicy)
    :param env: (gymnasium.Env, VecEnv or str) The environment to learn from (if registered in Gym, can be str)
    :param learning_rate: (float or callable) learning rate for adam optimizer, the same learning rate will be used
        for all networks (Q-Values, Actor and Value function); it can be a function of the current progress remaining
        (from 1 to 0)
    :param buffer_size: (int) size of the replay buffer
    :param learning_starts: (int) how many steps of the model to collect transitions for before learning starts
    :param batch_size: (int) Minibatch size for each gradient update
    :param tau: (float) the soft update coefficient ("Polyak update", between 0 and 1)
    :param gamma: (float) the discount factor
    :param train_freq: (int or (int, str)) Update the model every ``train_freq`` steps. Alternatively pass a tuple of
        frequency and unit like ``(5, "step")`` or ``(2, "episode")``.
    :param gradient_steps: (int) How many gradient update after each step (``-1``: as many as env steps collected)
    :param action_noise: (ActionNoise) the action noise type (None by default)
    :param replay_buffer_class: (type) Replay buffer class to use (e.g. ``HerReplayBuffer``; default ``ReplayBuffer``)
    :param replay_buffer_kwargs: (dict) Keyword arguments to pass to the replay buffer on creation
    :param optimize_memory_usage: (bool) store each observation once (the next observation is read from the next
        slot; sbtf keeps the terminal observations of finished episodes apart, so time limits are handled)
    :param n_steps: must be 1 (n-step returns are not implemented)
    :param ent_coef: (str or float) Entropy regularization coefficient; 'auto' to learn it (and 'auto_0.1' for using
        0.1 as initial value)
    :param target_update_interval: (int) update the target network every ``target_update_interval`` gradient steps
    :param target_entropy: (str or float) target entropy when learning ``ent_coef`` (``ent_coef = 'auto'``)
    :param top_quantiles_to_drop_per_net: (int) Number of quantiles to drop per network
    :param use_sde: (bool) generalized State-Dependent Exploration (gSDE) instead of independent Gaussian noise (see
        ``sbtf.common.nn.sde`` and docs/gsde.md; policy_kwargs ``log_std_init``, ``use_expln``, ``full_std``,
        ``clip_mean``)
    :param sde_sample_freq: (int) resample the gSDE exploration matrix every n steps (-1: only when a collection of
        ``train_freq`` steps starts)
    :param use_sde_at_warmup: (bool) act with gSDE instead of uniform random actions before ``learning_starts``
    :param stats_window_size: (int) Window size for the rollout logging (episodes)
    :param tensorboard_log: (str) the log location for tensorboard (if None, no logging)
    :param policy_kwargs: (dict) additional arguments to be passed to the policy on creation
    :param verbose: (int) the verbosity level: 0 no output, 1 info, 2 debug
    :param seed: (int) Seed for the pseudo random generators
    :param device: (str) kept for sb3-contrib's signature: sbtf runs on TensorFlow's default device
    :param _init_setup_model: (bool) Whether or not to build the network at the creation of the instance
    """

    _save_schema = contrib_save_schema(
        action_noise=ms.Noise(), ent_coef=ms.AnyOf(ms.Real(), ms.Text(("auto",), prefixes=True)),
        target_update_interval=ms.Integer(1), target_entropy=ms.AnyOf(ms.Real(), ms.Text(("auto",))),
        top_quantiles_to_drop_per_net=ms.Integer(0), use_sde=ms.Flag(), sde_sample_freq=ms.Integer(),
        use_sde_at_warmup=ms.Flag())

    def __init__(self, policy, env, learning_rate=3e-4, buffer_size: int = 1000000, learning_starts: int = 100,
                 batch_size: int = 256, tau: float = 0.005, gamma: float = 0.99, train_freq=1,
                 gradient_steps: int = 1, action_noise=None, replay_buffer_class=None,
                 replay_buffer_kwargs: Optional[Dict[str, Any]] = None, optimize_memory_usage: bool = False,
                 n_steps: int = 1, ent_coef="auto", target_update_interval: int = 1, target_entropy="auto",
                 top_quantiles_to_drop_per_net: int = 2, use_sde: bool = False, sde_sample_freq: int = -1,
                 use_sde_at_warmup: bool = False, stats_window_size: int = 100, tensorboard_log: Optional[str] = None,
                 policy_kwargs: Optional[Dict[str, Any]] = None, verbose: int = 0, seed: Optional[int] = None,
                 device: str = "auto", _init_setup_model: bool = True):
        check_hyperparameters(type(self).__name__, locals())
        super().__init__(policy, env, TQCPolicy, learning_rate=learning_rate, buffer_size=buffer_size,
                         learning_starts=learning_starts, batch_size=batch_size, tau=tau, gamma=gamma,
                         train_freq=train_freq, gradient_steps=gradient_steps, action_noise=action_noise,
                         replay_buffer_class=replay_buffer_class, replay_buffer_kwargs=replay_buffer_kwargs,
                         optimize_memory_usage=optimize_memory_usage, n_steps=n_steps,
                         stats_window_size=stats_window_size, tensorboard_log=tensorboard_log,
                         policy_kwargs=policy_kwargs, verbose=verbose, seed=seed, device=device)
        self.target_entropy = target_entropy
        self.log_ent_coef = None
        self.ent_coef = ent_coef
        self.target_update_interval = target_update_interval
        self.top_quantiles_to_drop_per_net = top_quantiles_to_drop_per_net
        self.use_sde = use_sde
        self.sde_sample_freq = sde_sample_freq
        self.use_sde_at_warmup = use_sde_at_warmup
        self.ent_coef_optimizer = None
        if _init_setup_model:
            self.setup_model()

    # ------------------------------------------------------------------ setup
    def setup_model(self):
        """
        Build the networks, optimizers and compiled train steps for the model's spaces (the constructor calls it
        unless ``_init_setup_model=False``; ``load`` calls it before restoring the parameters).
        """
        policy = self._build_policy(TQCPolicy)
        n_target = policy.critic.quantiles_total - int(self.top_quantiles_to_drop_per_net) * policy.n_critics
        if not 0 < n_target <= policy.critic.quantiles_total:
            raise ValueError(f"Error: top_quantiles_to_drop_per_net={self.top_quantiles_to_drop_per_net} leaves "
                             f"{n_target} of the {policy.critic.quantiles_total} target quantiles; it must leave at "
                             "least one.")
        self._setup_entropy()
        self._setup_actor_critic()
        self._finish_setup()

    # ------------------------------------------------------------------ train step
    def _build_train_step(self, n_steps: int, variant) -> TrainStep:
        """sb3-contrib's TQC step: the critic regresses on the truncated quantile target (the next-state quantiles
        of all target critics pooled and sorted, the top ``top_quantiles_to_drop_per_net * n_critics`` dropped, the
        entropy term subtracted) with the quantile Huber loss; the actor maximises the mean quantile."""
        policy = self.policy_tf
        critic, critic_target = policy.critic, policy.critic_target
        n_target = critic.quantiles_total - int(self.top_quantiles_to_drop_per_net) * policy.n_critics
        gamma = float(self.gamma)

        def target_fn(batch, next_actions, entropy_term):
            return truncated_quantile_target(critic_target.quantiles(batch["next_obs"], next_actions), n_target,
                                             batch["rewards"], batch["dones"], gamma, entropy_term)

        def critic_loss_fn(obs, actions, target):
            return quantile_huber_loss(critic.quantiles(obs, actions), target, sum_over_quantiles=False)

        def actor_value_fn(obs, actions):
            return tf.reduce_mean(critic.quantiles(obs, actions), axis=[1, 2])

        return self._entropy_train_step(n_steps, target_fn, critic_loss_fn, actor_value_fn, name="tqc_train")

    @learn_doc("TQC")
    def learn(self, total_timesteps, callback=None, log_interval=4, tb_log_name="TQC", reset_num_timesteps=True,
              progress_bar: bool = False):
        return self._learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, None,
                           progress_bar)


__all__ = ["TQC", "squashed_gaussian_sample", "squashed_sde_sample"]
