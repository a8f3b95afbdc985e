"""DQN (stable-baselines 2.x ``stable_baselines.deepq``)."""
from sbtf.common.buffers import PrioritizedReplayBuffer, ReplayBuffer
from sbtf.deepq.dqn import DQN
from sbtf.deepq.policies import CnnPolicy, LnCnnPolicy, LnMlpPolicy, MlpPolicy


def wrap_atari_dqn(env):
    """
    wrap the environment in atari wrappers for DQN

    :param env: (Gym Environment) the environment
    :return: (Gym Environment) the wrapped environment
    """
    from sbtf.common.atari_wrappers import wrap_deepmind
    return wrap_deepmind(env, frame_stack=True, scale=False)


__all__ = ["DQN", "MlpPolicy", "CnnPolicy", "LnMlpPolicy", "LnCnnPolicy", "ReplayBuffer", "PrioritizedReplayBuffer",
           "wrap_atari_dqn"]
