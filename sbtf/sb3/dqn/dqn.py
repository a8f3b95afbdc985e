"""stable-baselines3's DQN (``stable_baselines3.DQN``) on sbtf's off-policy core.

Vanilla DQN as SB3 2.x has it (no double Q-learning, dueling or prioritized replay: those are stable-baselines 2's
``sbtf.DQN``): the TD target ``r + gamma * (1 - done) * max_a' Q_target(s', a')``, the smooth L1 (Huber) loss on
``Q(s, a)``, gradients clipped to ``max_grad_norm`` (``torch.nn.utils.clip_grad_norm_``), PyTorch's Adam. The
``gradient_steps`` steps of a training run in one compiled call, which also returns the acting weights. The target
network follows every ``max(target_update_interval // n_envs, 1)`` VecEnv steps (Polyak with ``tau``; a copy by
default); ``exploration_rate`` follows SB3's linear schedule after every step. Exploration, target network and
compiled steps are shared with sb3-contrib's QR-DQN (``sbtf.sb3.dqn.q_learning``).
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple, Union

import tensorflow as tf

from sbtf.common.algo.off_policy_algorithm import learn_doc
from sbtf.sb3.dqn.q_learning import QLearningAlgorithm, q_learning_save_schema
from sbtf.sb3.dqn.policies import DQNPolicy
from sbtf.common.arg_checks import check_hyperparameters


def smooth_l1_loss(current: tf.Tensor, target: tf.Tensor) -> tf.Tensor:
    """PyTorch's ``F.smooth_l1_loss`` (beta 1, mean): ``0.5 x^2`` where ``|x| < 1``, else ``|x| - 0.5``."""
    error = tf.abs(current - target)
    return tf.reduce_mean(tf.where(error < 1.0, 0.5 * tf.square(error), error - 0.5))


class DQN(QLearningAlgorithm):
    """
    Deep Q-Network (DQN)

    Paper: https://arxiv.org/abs/1312.5602, https://www.nature.com/articles/nature14236
    Default hyperparameters are taken from the Nature paper,
    except for the optimizer and learning rate that were taken from Stable Baselines defaults.

    :param policy: The policy model to use (MlpPolicy, CnnPolicy, MultiInputPolicy, or a DQNPolicy subclass)
    :param env: The environment to learn from (if registered in Gym, can be str)
    :param learning_rate: The learning rate, it can be a function of the current progress remaining (from 1 to 0)
    :param buffer_size: size of the replay buffer
    :param learning_starts: how many steps of the model to collect transitions for before learning starts
    :param batch_size: Minibatch size for each gradient update
    :param tau: the soft update coefficient ("Polyak update", between 0 and 1) default 1 for hard update
    :param gamma: the discount factor
    :param train_freq: Update the model every ``train_freq`` steps. Alternatively pass a tuple of frequency and unit
        like ``(5, "step")`` or ``(2, "episode")``.
    :param gradient_steps: How many gradient steps to do after each rollout (see ``train_freq``).
        Set to ``-1`` means to do as many gradient steps as steps done in the environment during the rollout.
    :param replay_buffer_class: Replay buffer class to use (None: sbtf's ``ReplayBuffer``)
    :param replay_buffer_kwargs: Keyword arguments to pass to the replay buffer on creation
    :param optimize_memory_usage: Enable a memory efficient variant of the replay buffer at a cost of more complexity
    :param target_update_interval: update the target network every ``target_update_interval`` environment steps
    :param exploration_fraction: fraction of entire training period over which the exploration rate is reduced
    :param exploration_initial_eps: initial value of random action probability
    :param exploration_final_eps: final value of random action probability
    :param max_grad_norm: The maximum value for the gradient clipping
    :param stats_window_size: Window size for the rollout logging, specifying the number of episodes to average
        the reported success rate, mean episode length, and mean reward over
    :param tensorboard_log: the log location for tensorboard (if None, no logging)
    :param policy_kwargs: additional arguments to be passed to the policy on creation (``net_arch``,
        ``activation_fn``, ``features_extractor_class``, ``features_extractor_kwargs``, ``normalize_images``,
        ``optimizer_class``, ``optimizer_kwargs``)
    :param verbose: Verbosity level: 0 for no output, 1 for info messages, 2 for debug messages
    :param seed: Seed for the pseudo random generators
    :param device: kept for SB3's signature: sbtf runs on TensorFlow's default device
    :param _init_setup_model: Whether or not to build the network at the creation of the instance
    """

    #: files name the algorithm ``dqn_sb3`` (``DQN`` is stable-baselines 2's, ``sbtf.DQN``)
    FILE_ALGO_NAME = "dqn_sb3"
    _save_schema = {key: field for key, field in q_learning_save_schema().items() if key != "n_steps"}

    def __init__(self, policy: Union[str, type], env, learning_rate: Union[float, Any] = 1e-4,
                 buffer_size: int = 1_000_000, learning_starts: int = 100, batch_size: int = 32, tau: float = 1.0,
                 gamma: float = 0.99, train_freq: Union[int, Tuple[int, str]] = 4, gradient_steps: int = 1,
                 replay_buffer_class: Optional[type] = None, replay_buffer_kwargs: Optional[Dict[str, Any]] = None,
                 optimize_memory_usage: bool = False, target_update_interval: int = 10000,
                 exploration_fraction: float = 0.1, exploration_initial_eps: float = 1.0,
                 exploration_final_eps: float = 0.05, max_grad_norm: float = 10, stats_window_size: int = 100,
                 tensorboard_log: Optional[str] = None, policy_kwargs: Optional[Dict[str, Any]] = None,
                 verbose: int = 0, seed: Optional[int] = None, device: str = "auto", _init_setup_model: bool = True):
        check_hyperparameters(type(self).__name__, locals())
        super().__init__(policy, env, DQNPolicy, learning_rate=learning_rate, buffer_size=buffer_size,
                         learning_starts=learning_starts, batch_size=batch_size, tau=tau, gamma=gamma,
                         train_freq=train_freq, gradient_steps=gradient_steps,
                         replay_buffer_class=replay_buffer_class, replay_buffer_kwargs=replay_buffer_kwargs,
                         optimize_memory_usage=optimize_memory_usage, n_steps=1,
                         target_update_interval=target_update_interval, exploration_fraction=exploration_fraction,
                         exploration_initial_eps=exploration_initial_eps,
                         exploration_final_eps=exploration_final_eps, max_grad_norm=max_grad_norm,
                         stats_window_size=stats_window_size, tensorboard_log=tensorboard_log,
                         policy_kwargs=policy_kwargs, verbose=verbose, seed=seed, device=device)
        self.q_net = None
        self.q_net_target = None
        if _init_setup_model:
            self.setup_model()

    def _create_aliases(self) -> None:
        self.q_net = self.policy_tf.q_net
        self.q_net_target = self.policy_tf.q_net_target

    # ------------------------------------------------------------------ the gradient step
    def _td_target(self, batch: Dict[str, tf.Tensor]) -> tf.Tensor:
        """The 1-step TD target of the greedy next action of the target network, (B,)."""
        next_q_values = tf.reduce_max(self.policy_tf.q_net_target.q_values(batch["next_obs"]), axis=1)
        return batch["rewards"] + (1.0 - batch["dones"]) * float(self.gamma) * next_q_values

    def _td_loss(self, batch: Dict[str, tf.Tensor], target: tf.Tensor) -> tf.Tensor:
        """The Huber loss of the taken actions' Q-values against the target."""
        current = tf.reduce_sum(self.policy_tf.q_net.q_values(batch["obs"]) * self._one_hot_actions(batch), axis=1)
        return smooth_l1_loss(current, target)

    def _train_step_name(self) -> str:
        return "dqn_sb3_train"

    @learn_doc("DQN")
    def learn(self, total_timesteps: int, callback=None, log_interval: int = 4, tb_log_name: str = "DQN",
              reset_num_timesteps: bool = True, progress_bar: bool = False) -> "DQN":
        return self._learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, None,
                           progress_bar)

    # ------------------------------------------------------------------ export
    def _export_outputs(self, obs) -> Dict[str, tf.Tensor]:
        """The exported graph: the greedy action and the Q-values."""
        q_values = self.policy_tf.q_values(obs)
        return {"action": tf.argmax(q_values, axis=1), "q_values": q_values}


__all__ = ["DQN", "smooth_l1_loss"]
