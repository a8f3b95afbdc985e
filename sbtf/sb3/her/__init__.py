"""stable-baselines3's HER (``stable_baselines3.her``): ``HerReplayBuffer`` and ``GoalSelectionStrategy``, given to an
off-policy algorithm through ``replay_buffer_class``::

    from sbtf.sb3 import SAC, HerReplayBuffer
    model = SAC("MultiInputPolicy", env, replay_buffer_class=HerReplayBuffer,
                replay_buffer_kwargs=dict(n_sampled_goal=4, goal_selection_strategy="future"))

The buffer is sbtf's one goal-relabelling buffer (``sbtf.her.her_replay_buffer``), which sbtf's SB2-style DQN, SAC,
TD3 and DDPG take too.
"""
from sbtf.her.her_replay_buffer import HerReplayBuffer
from sbtf.her.replay_buffer import GoalSelectionStrategy

__all__ = ["HerReplayBuffer", "GoalSelectionStrategy"]
