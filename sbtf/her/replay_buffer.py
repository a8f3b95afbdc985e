"""The HER replay wrapper (stable-baselines 2.x ``her/replay_buffer.py``).

``HindsightExperienceReplayWrapper`` keeps the transitions of the current episode; when the episode ends it stores
them in the wrapped replay buffer together with ``n_sampled_goal`` virtual transitions per transition, whose desired
goal is replaced by a goal achieved elsewhere (chosen by the goal selection strategy) and whose reward is recomputed
with the env's ``compute_reward(achieved_goal, new_goal, info)``. Sampling is the wrapped buffer's.
"""
from __future__ import annotations

import enum
from enum import Enum
from typing import List, Union

import numpy as np

from sbtf.common.file_errors import describe_value
from sbtf.common.registry import register_class


class GoalSelectionStrategy(Enum):
    """
    The strategies for selecting new goals when
    creating artificial transitions.
    """
    # Select a goal that was achieved
    # after the current step, in the same episode
    FUTURE = 0
    # Select the goal that was achieved
    # at the end of the episode
    FINAL = 1
    # Select a goal that was achieved in the episode
    EPISODE = 2
    # Select a goal that was achieved
    # at some point in the training procedure
    # (and that is present in the replay buffer)
    RANDOM = 3


# model files store the strategy by name (HER's goal_selection_strategy)
register_class(GoalSelectionStrategy, "enum")

# For convenience
# that way, we can use string to select a strategy
KEY_TO_GOAL_STRATEGY = {
    'future': GoalSelectionStrategy.FUTURE,
    'final': GoalSelectionStrategy.FINAL,
    'episode': GoalSelectionStrategy.EPISODE,
    'random': GoalSelectionStrategy.RANDOM
}


def goal_selection_strategy_from(value: Union[str, Enum, int]) -> GoalSelectionStrategy:
    """
    A ``GoalSelectionStrategy`` from its name (``"future"``), itself, another enum with the same member name (e.g. the
    stable-baselines 2.x one read from an old file) or its integer value.
    """
    if isinstance(value, GoalSelectionStrategy):
        return value
    if isinstance(value, enum.Enum):
        value = value.name
    if isinstance(value, str):
        key = value.lower()
        if key.startswith("goalselectionstrategy."):
            key = key.split(".", 1)[1]
        if key not in KEY_TO_GOAL_STRATEGY:
            raise ValueError(f"Error: unknown goal selection strategy {describe_value(value)}; use one of "
                             f"{sorted(KEY_TO_GOAL_STRATEGY)} or a GoalSelectionStrategy.")
        return KEY_TO_GOAL_STRATEGY[key]
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        try:
            return GoalSelectionStrategy(int(value))
        except ValueError:
            pass
    raise ValueError(f"Error: invalid goal selection strategy {describe_value(value)}, please use one of "
                     f"{list(GoalSelectionStrategy)} or their names {sorted(KEY_TO_GOAL_STRATEGY)}.")


class HindsightExperienceReplayWrapper(object):
    """
    Wrapper around a replay buffer in order to use HER.
    This implementation is inspired by to the one found in https://github.com/NervanaSystems/coach/.

    :param replay_buffer: (ReplayBuffer) the buffer to store the real and virtual transitions in (a HER wrapper is
        unwrapped first, so that calling ``learn()`` again does not stack wrappers)
    :param n_sampled_goal: (int) The number of artificial transitions to generate for each actual transition
    :param goal_selection_strategy: (GoalSelectionStrategy or str) The method that will be used to generate
        the goals for the artificial transitions.
    :param wrapped_env: (HERGoalEnvWrapper) the GoalEnv wrapped using HERGoalEnvWrapper,
        that enables to convert observation to dict, and vice versa
    """

    def __init__(self, replay_buffer, n_sampled_goal, goal_selection_strategy, wrapped_env):
        super(HindsightExperienceReplayWrapper, self).__init__()
        if isinstance(replay_buffer, HindsightExperienceReplayWrapper):
            replay_buffer = replay_buffer.replay_buffer
        self.n_sampled_goal = int(n_sampled_goal)
        self.goal_selection_strategy = goal_selection_strategy_from(goal_selection_strategy)
        self.env = wrapped_env
        # Buffer for storing transitions of the current episode
        self.episode_transitions: List[tuple] = []
        self.replay_buffer = replay_buffer

    def add(self, obs_t, action, reward, obs_tp1, done, info):
        """
        add a new transition to the buffer

        The episode is over (and stored with its virtual transitions) when ``done`` is set, or when ``info`` says the
        environment was reset after this step (``terminal_observation``, which sbtf's VecEnvs set when an episode
        ends, also when a time limit cut it and ``done`` is stored as False for bootstrapping).

        :param obs_t: (np.ndarray) the last observation
        :param action: ([float]) the action
        :param reward: (float) the reward of the transition
        :param obs_tp1: (np.ndarray) the new observation
        :param done: (bool) is the episode done
        :param info: (dict) extra values used to compute reward
        """
        assert self.replay_buffer is not None
        # Update current episode buffer
        self.episode_transitions.append((obs_t, action, reward, obs_tp1, done, info))
        episode_over = bool(done) or (isinstance(info, dict) and ("terminal_observation" in info
                                                                  or bool(info.get("TimeLimit.truncated", False))))
        if episode_over:
            # Add transitions (and imagined ones) to buffer only when an episode is over
            self._store_episode()
            # Reset episode buffer
            self.episode_transitions = []

    def sample(self, *args, **kwargs):
        return self.replay_buffer.sample(*args, **kwargs)

    def sample_batch(self, *args, **kwargs):
        """The wrapped buffer's named sample (``ReplayBatch``): the relabelled transitions are stored in it."""
        return self.replay_buffer.sample_batch(*args, **kwargs)

    def can_sample(self, n_samples):
        """
        Check if n_samples samples can be sampled
        from the buffer.

        :param n_samples: (int)
        :return: (bool)
        """
        return self.replay_buffer.can_sample(n_samples)

    def __len__(self):
        return len(self.replay_buffer)

    def save(self, path) -> None:
        """Save the wrapped replay buffer (the transitions of an unfinished episode are not saved)."""
        self.replay_buffer.save(path)

    @property
    def buffer_size(self) -> int:
        return self.replay_buffer.buffer_size

    def _stored_obs(self, index: int) -> np.ndarray:
        """The ``obs_t`` of the transition in slot ``index`` of the wrapped buffer."""
        obs_t = getattr(self.replay_buffer, "_obs_t", None)
        if obs_t is not None:
            return obs_t[index]
        return self.replay_buffer.storage[index][0]

    def _sample_achieved_goal(self, episode_transitions, transition_idx):
        """
        Sample an achieved goal according to the sampling strategy.

        :param episode_transitions: ([tuple]) a list of all the transitions in the current episode
        :param transition_idx: (int) the transition to start sampling from
        :return: (np.ndarray) an achieved goal
        """
        if self.goal_selection_strategy == GoalSelectionStrategy.FUTURE:
            # Sample a goal that was observed in the same episode after the current step
            selected_idx = np.random.choice(np.arange(transition_idx + 1, len(episode_transitions)))
            selected_obs = episode_transitions[selected_idx][0]
        elif self.goal_selection_strategy == GoalSelectionStrategy.FINAL:
            # Choose the goal achieved at the end of the episode
            selected_obs = episode_transitions[-1][0]
        elif self.goal_selection_strategy == GoalSelectionStrategy.EPISODE:
            # Random goal achieved during the episode
            selected_idx = np.random.choice(np.arange(len(episode_transitions)))
            selected_obs = episode_transitions[selected_idx][0]
        elif self.goal_selection_strategy == GoalSelectionStrategy.RANDOM:
            # Random goal achieved, from the entire replay buffer
            selected_idx = np.random.choice(np.arange(len(self.replay_buffer)))
            selected_obs = self._stored_obs(selected_idx)
        else:
            raise ValueError("Invalid goal selection strategy,"
                             "please use one of {}".format(list(GoalSelectionStrategy)))
        return self.env.convert_obs_to_dict(selected_obs)['achieved_goal']

    def _sample_achieved_goals(self, episode_transitions, transition_idx):
        """
        Sample a batch of achieved goals according to the sampling strategy.

        :param episode_transitions: ([tuple]) list of the transitions in the current episode
        :param transition_idx: (int) the transition to start sampling from
        :return: (np.ndarray) an achieved goal
        """
        return [
            self._sample_achieved_goal(episode_transitions, transition_idx)
            for _ in range(self.n_sampled_goal)
        ]

    def _store_episode(self):
        """
        Sample artificial goals and store transition of the current
        episode in the replay buffer.
        This method is called only after each end of episode.
        """
        pending: List[tuple] = []
        random_strategy = self.goal_selection_strategy == GoalSelectionStrategy.RANDOM
        # For each transition in the last episode,
        # create a set of artificial transitions
        for transition_idx, transition in enumerate(self.episode_transitions):
            obs_t, action, reward, obs_tp1, done, info = transition

            # Add to the replay buffer
            pending.append((obs_t, action, reward, obs_tp1, done))
            if random_strategy:  # the goals are drawn from the buffer, this transition included (SB2 order)
                self._flush(pending)

            # We cannot sample a goal from the future in the last step of an episode
            if (transition_idx == len(self.episode_transitions) - 1 and
                    self.goal_selection_strategy == GoalSelectionStrategy.FUTURE):
                break

            # Sampled n goals per transition, where n is `n_sampled_goal`
            # this is called k in the paper
            sampled_goals = self._sample_achieved_goals(self.episode_transitions, transition_idx)
            # Convert concatenated obs to dict, so we can update the goals
            obs_dict = self.env.convert_obs_to_dict(np.array(obs_t, copy=True))
            next_obs_dict = self.env.convert_obs_to_dict(np.array(obs_tp1, copy=True))
            # For each sampled goals, store a new transition
            for goal in sampled_goals:
                # Update the desired goal in the transition
                obs_dict['desired_goal'] = goal
                next_obs_dict['desired_goal'] = goal
                # Update the reward according to the new desired goal
                new_reward = self.env.compute_reward(next_obs_dict['achieved_goal'], goal, info)
                # Transform back to ndarrays; the virtual transition does not end the episode
                pending.append((self.env.convert_dict_to_obs(obs_dict), action, float(new_reward),
                                self.env.convert_dict_to_obs(next_obs_dict), False))
            if random_strategy:
                self._flush(pending)
        self._flush(pending)

    def _flush(self, pending: List[tuple]) -> None:
        """Add the pending transitions to the wrapped buffer (one ``extend`` call when it has one)."""
        if not pending:
            return
        extend = getattr(self.replay_buffer, "extend", None)
        if extend is not None and len(pending) > 1:
            obs_t, actions, rewards, obs_tp1, dones = zip(*pending)
            extend(np.stack([np.asarray(o) for o in obs_t]), np.stack([np.asarray(a) for a in actions]),
                   np.asarray(rewards, dtype=np.float32), np.stack([np.asarray(o) for o in obs_tp1]),
                   np.asarray(dones, dtype=np.float32))
        else:
            for item in pending:
                self.replay_buffer.add(*item)
        pending.clear()


__all__ = ["GoalSelectionStrategy", "KEY_TO_GOAL_STRATEGY", "HindsightExperienceReplayWrapper",
           "goal_selection_strategy_from"]
