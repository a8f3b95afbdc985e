"""stable-baselines3's DQN (``stable_baselines3.dqn``): ``DQN``, its policies ``MlpPolicy``, ``CnnPolicy``,
``MultiInputPolicy`` (``DQNPolicy``) and the ``QNetwork``."""
from sbtf.sb3.dqn.dqn import DQN
from sbtf.sb3.dqn.policies import CnnPolicy, DQNPolicy, MlpPolicy, MultiInputPolicy, QNetwork

__all__ = ["DQN", "DQNPolicy", "QNetwork", "MlpPolicy", "CnnPolicy", "MultiInputPolicy"]
