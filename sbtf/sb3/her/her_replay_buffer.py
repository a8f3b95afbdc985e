"""stable-baselines3's ``her.her_replay_buffer`` module path."""
from sbtf.her.her_replay_buffer import HerReplayBuffer

__all__ = ["HerReplayBuffer"]
