"""Deep Deterministic Policy Gradient as stable-baselines3 2.x writes it (``stable_baselines3.DDPG``): TD3 without
its tricks (``policy_delay=1``, target smoothing noise clipped to 0, one critic unless ``policy_kwargs`` says
otherwise), as sb3 does it. Unlike stable-baselines 2's DDPG (``sbtf.ddpg``): no parameter noise, no observation or
return normalisation, no rollout cycles; sb3's ``train_freq`` / ``gradient_steps`` schedule."""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple, Union

from sbtf.common.algo.off_policy_algorithm import learn_doc
from sbtf.sb3.td3.td3 import TD3
from sbtf.common.arg_checks import check_hyperparameters


class DDPG(TD3):
    """
    Deep Deterministic Policy Gradient (DDPG) (stable-baselines3's class and arguments).
    Papers: http://proceedings.mlr.press/v32/silver14.pdf, https://arxiv.org/abs/1509.02971

    :param policy: (TD3Policy or str) The policy model to use (MlpPolicy, CnnPolicy, MultiInputPolicy)
    :param env: (gymnasium.Env, VecEnv or str) The environment to learn from (if registered in Gym, can be str)
    :param learning_rate: (float or callable) learning rate for the Adam optimizers (actor and critic); a callable
        gets the progress remaining (from 1 to 0)
    :param buffer_size: (int) size of the replay buffer
    :param learning_starts: (int) how many steps of the model to collect transitions for before learning starts
    :param batch_size: (int) Minibatch size for each gradient update
    :param tau: (float) the soft update coefficient ("Polyak update", between 0 and 1)
    :param gamma: (float) the discount factor
    :param train_freq: (int or (int, str)) Update the model every ``train_freq`` steps, or a pair such as
        ``(5, "step")`` or ``(2, "episode")``
    :param gradient_steps: (int) How many gradient steps after each rollout (``-1``: as many as env steps collected)
    :param action_noise: (ActionNoise) the action noise added to the actions for exploration (None by default)
    :param replay_buffer_class: (type) Replay buffer class (e.g. ``HerReplayBuffer``; default ``ReplayBuffer``)
    :param replay_buffer_kwargs: (dict) Keyword arguments to pass to the replay buffer on creation
    :param optimize_memory_usage: (bool) store each observation once (see ``TD3``)
    :param tensorboard_log: (str) the log location for tensorboard (if None, no logging)
    :param policy_kwargs: (dict) additional arguments to be passed to the policy on creation (``n_critics`` is 1
        unless given)
    :param verbose: (int) the verbosity level: 0 no output, 1 info, 2 debug
    :param seed: (int) Seed for the pseudo random generators
    :param device: (str) kept for sb3's signature: sbtf runs on TensorFlow's default device
    :param _init_setup_model: (bool) Whether or not to build the network at the creation of the instance
    """

    def __init__(self, policy, env, learning_rate: Union[float, Any] = 1e-3, buffer_size: int = 1_000_000,
                 learning_starts: int = 100, batch_size: int = 256, tau: float = 0.005, gamma: float = 0.99,
                 train_freq: Union[int, Tuple[int, str]] = 1, gradient_steps: int = 1, action_noise=None,
                 replay_buffer_class=None, replay_buffer_kwargs: Optional[Dict[str, Any]] = None,
                 optimize_memory_usage: bool = False, tensorboard_log: Optional[str] = None,
                 policy_kwargs: Optional[Dict[str, Any]] = None, verbose: int = 0, seed: Optional[int] = None,
                 device: str = "auto", _init_setup_model: bool = True):
        check_hyperparameters(type(self).__name__, locals())
        super().__init__(policy, env, learning_rate=learning_rate, buffer_size=buffer_size,
                         learning_starts=learning_starts, batch_size=batch_size, tau=tau, gamma=gamma,
                         train_freq=train_freq, gradient_steps=gradient_steps, action_noise=action_noise,
                         replay_buffer_class=replay_buffer_class, replay_buffer_kwargs=replay_buffer_kwargs,
                         optimize_memory_usage=optimize_memory_usage, tensorboard_log=tensorboard_log,
                         policy_kwargs=policy_kwargs, verbose=verbose, seed=seed, device=device,
                         # Remove all tricks from TD3 to obtain DDPG (sb3: the noise is clipped to 0)
                         policy_delay=1, target_noise_clip=0.0, target_policy_noise=0.1, _init_setup_model=False)
        # one critic, unless the user asks for more (sb3)
        self.policy_kwargs = dict(self.policy_kwargs or {})
        if "n_critics" not in self.policy_kwargs:
            self.policy_kwargs["n_critics"] = 1
        if _init_setup_model:
            self.setup_model()

    @learn_doc("DDPG")
    def learn(self, total_timesteps: int, callback=None, log_interval: int = 4, tb_log_name: str = "DDPG",
              reset_num_timesteps: bool = True, progress_bar: bool = False):
        return self._learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, None,
                           progress_bar)


__all__ = ["DDPG"]
