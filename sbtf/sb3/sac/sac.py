"""Soft Actor-Critic as stable-baselines3 2.x writes it (``stable_baselines3.SAC``), on sbtf's off-policy core.

Unlike stable-baselines 2's SAC (``sbtf.sac``) there is no value network: twin Q-critics with target critics. One
gradient step, in sb3's order: the entropy coefficient update (``ent_coef="auto"``: ``log_ent_coef`` towards
``target_entropy = -dim(A)``), the critic update
``0.5 * sum_i mean((Q_i(s, a) - y)^2)``, ``y = r + gamma * (1 - d) * (min_i Q_targ_i(s', a') - alpha * log pi(a'|s'))``,
the actor update ``mean(alpha * log pi(a~|s) - min_i Q_i(s, a~))`` against the updated critics, and the Polyak update
of the target critics after the gradient steps whose index in the training is a multiple of
``target_update_interval``. The ``gradient_steps`` steps of a training run in one compiled call (traced once per
count); an Mlp actor acts in NumPy on weights the train call returns.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple, Union

import tensorflow as tf

from sbtf.common.fileio import model_schema as ms
from sbtf.common.compile.fast_call import TrainStep
from sbtf.common.algo.off_policy_algorithm import learn_doc
from sbtf.sb3.common.off_policy_algorithm import EntropyRegularisedAlgorithm, contrib_save_schema
from sbtf.sb3.sac.policies import SACPolicy
from sbtf.common.arg_checks import check_hyperparameters


def q_regression_loss(current_q, target_q):
    """sb3's twin-critic loss ``sum_i mse(Q_i, y)`` on (batch, n_critics) Q-values and a (batch,) target (TF)."""
    return tf.reduce_sum(tf.reduce_mean(tf.square(current_q - target_q[:, None]), axis=0))


class SAC(EntropyRegularisedAlgorithm):
    """
    Soft Actor-Critic (SAC): Off-Policy Maximum Entropy Deep Reinforcement Learning with a Stochastic Actor
    (stable-baselines3's class and arguments). Papers: https://arxiv.org/abs/1801.01290,
    https://arxiv.org/abs/1812.05905

    :param policy: (SACPolicy or str) The policy model to use (MlpPolicy, CnnPolicy, MultiInputPolicy)
    :param env: (gymnasium.Env, VecEnv or str) The environment to learn from (if registered in Gym, can be str)
    :param learning_rate: (float or callable) learning rate for the Adam optimizers (actor, critics, entropy
        coefficient); a callable gets the progress remaining (from 1 to 0)
    :param buffer_size: (int) size of the replay buffer
    :param learning_starts: (int) how many steps of the model to collect transitions for before learning starts
    :param batch_size: (int) Minibatch size for each gradient update
    :param tau: (float) the soft update coefficient ("Polyak update", between 0 and 1)
    :param gamma: (float) the discount factor
    :param train_freq: (int or (int, str)) Update the model every ``train_freq`` steps, or a pair such as
        ``(5, "step")`` or ``(2, "episode")``
    :param gradient_steps: (int) How many gradient steps after each rollout (``-1``: as many as env steps collected)
    :param action_noise: (ActionNoise) the action noise added to the squashed actions (None by default)
    :param replay_buffer_class: (type) Replay buffer class (e.g. ``HerReplayBuffer``; default ``ReplayBuffer``)
    :param replay_buffer_kwargs: (dict) Keyword arguments to pass to the replay buffer on creation
    :param optimize_memory_usage: (bool) store each observation once (the next observation is read from the next
        slot; terminal observations of finished episodes are kept apart, so time limits are handled)
    :param ent_coef: (str or float) Entropy regularization coefficient (the inverse of the reward scale); ``"auto"``
        to learn it (``"auto_0.1"``: learn it from the initial value 0.1)
    :param target_update_interval: (int) update the target networks every ``target_update_interval`` gradient steps
    :param target_entropy: (str or float) target entropy when learning ``ent_coef`` (``"auto"``: ``-dim(A)``)
    :param use_sde: (bool) generalized State-Dependent Exploration (gSDE) instead of action noise exploration
    :param sde_sample_freq: (int) Sample a new noise matrix every n steps with gSDE (-1: only at the beginning of the
        rollout)
    :param use_sde_at_warmup: (bool) use gSDE instead of uniform sampling during the warm up phase
    :param stats_window_size: (int) Window size for the rollout logging (episodes)
    :param tensorboard_log: (str) the log location for tensorboard (if None, no logging)
    :param policy_kwargs: (dict) additional arguments to be passed to the policy on creation
    :param verbose: (int) the verbosity level: 0 no output, 1 info, 2 debug
    :param seed: (int) Seed for the pseudo random generators
    :param device: (str) kept for sb3's signature: sbtf runs on TensorFlow's default device
    :param _init_setup_model: (bool) Whether or not to build the network at the creation of the instance
    """

    _save_schema = contrib_save_schema(
        action_noise=ms.Noise(), ent_coef=ms.AnyOf(ms.Real(), ms.Text(("auto",), prefixes=True)),
        target_update_interval=ms.Integer(1), target_entropy=ms.AnyOf(ms.Real(), ms.Text(("auto",))),
        use_sde=ms.Flag(), sde_sample_freq=ms.Integer(), use_sde_at_warmup=ms.Flag())

    def __init__(self, policy, env, learning_rate: Union[float, Any] = 3e-4, buffer_size: int = 1_000_000,
                 learning_starts: int = 100, batch_size: int = 256, tau: float = 0.005, gamma: float = 0.99,
                 train_freq: Union[int, Tuple[int, str]] = 1, gradient_steps: int = 1, action_noise=None,
                 replay_buffer_class=None, replay_buffer_kwargs: Optional[Dict[str, Any]] = None,
                 optimize_memory_usage: bool = False, ent_coef: Union[str, float] = "auto",
                 target_update_interval: int = 1, target_entropy: Union[str, float] = "auto", use_sde: bool = False,
                 sde_sample_freq: int = -1, use_sde_at_warmup: bool = False, stats_window_size: int = 100,
                 tensorboard_log: Optional[str] = None, policy_kwargs: Optional[Dict[str, Any]] = None,
                 verbose: int = 0, seed: Optional[int] = None, device: str = "auto", _init_setup_model: bool = True):
        check_hyperparameters(type(self).__name__, locals())
        super().__init__(policy, env, SACPolicy, learning_rate=learning_rate, buffer_size=buffer_size,
                         learning_starts=learning_starts, batch_size=batch_size, tau=tau, gamma=gamma,
                         train_freq=train_freq, gradient_steps=gradient_steps, action_noise=action_noise,
                         replay_buffer_class=replay_buffer_class, replay_buffer_kwargs=replay_buffer_kwargs,
                         optimize_memory_usage=optimize_memory_usage, n_steps=1,
                         stats_window_size=stats_window_size, tensorboard_log=tensorboard_log,
                         policy_kwargs=policy_kwargs, verbose=verbose, seed=seed, device=device)
        self.target_entropy = target_entropy
        self.ent_coef = ent_coef
        self.target_update_interval = target_update_interval
        self.use_sde = use_sde
        self.sde_sample_freq = sde_sample_freq
        self.use_sde_at_warmup = use_sde_at_warmup
        if _init_setup_model:
            self.setup_model()

    def setup_model(self) -> None:
        """Build the policy, the entropy coefficient, the optimizers and the replay buffer."""
        self._build_policy(SACPolicy)
        self._setup_entropy()
        self._setup_actor_critic()
        self._finish_setup()

    def _build_train_step(self, n_steps: int, variant) -> TrainStep:
        critic, critic_target = self.policy_tf.critic, self.policy_tf.critic_target
        gamma = float(self.gamma)

        def target_fn(batch, next_actions, entropy_term):
            next_q = tf.reduce_min(critic_target.q_values(batch["next_obs"], next_actions), axis=1) - entropy_term
            return batch["rewards"] + (1.0 - batch["dones"]) * gamma * next_q

        def critic_loss_fn(obs, actions, target):
            return 0.5 * q_regression_loss(critic.q_values(obs, actions), target)

        def actor_value_fn(obs, actions):
            return tf.reduce_min(critic.q_values(obs, actions), axis=1)

        return self._entropy_train_step(n_steps, target_fn, critic_loss_fn, actor_value_fn, name="sac_train")

    @learn_doc("SAC")
    def learn(self, total_timesteps: int, callback=None, log_interval: int = 4, tb_log_name: str = "SAC",
              reset_num_timesteps: bool = True, progress_bar: bool = False):
        return self._learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, None,
                           progress_bar)


__all__ = ["SAC", "q_regression_loss"]
