"""QR-DQN (sb3-contrib ``sb3_contrib.qrdqn``): ``QRDQN`` and its ``MlpPolicy``, ``CnnPolicy``, ``MultiInputPolicy``."""
from sbtf.contrib.qrdqn.policies import CnnPolicy, MlpPolicy, MultiInputPolicy, QRDQNPolicy
from sbtf.contrib.qrdqn.qrdqn import QRDQN

__all__ = ["QRDQN", "QRDQNPolicy", "MlpPolicy", "CnnPolicy", "MultiInputPolicy"]
