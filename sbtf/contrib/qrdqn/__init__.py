"""QR-DQN (sb3-contrib ``sb3_contrib.qrdqn``): ``QRDQN`` and its ``MlpPolicy`` / ``CnnPolicy``."""
from sbtf.contrib.qrdqn.policies import CnnPolicy, MlpPolicy, QRDQNPolicy
from sbtf.contrib.qrdqn.qrdqn import QRDQN

__all__ = ["QRDQN", "QRDQNPolicy", "MlpPolicy", "CnnPolicy"]
