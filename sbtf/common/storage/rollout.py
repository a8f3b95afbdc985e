"""On-policy rollout storage: what a runner collects in one rollout, and the named batch the train step reads.

``RolloutBuffer`` holds ``n_steps x n_envs`` of observations, actions, rewards (with time-limit bootstraps), the
environment's own rewards, values, negative log-probabilities and episode-start flags, plus the recurrent states at
the start of the rollout. ``compute_gae`` (PPO2, ACKTR with ``gae_lambda``) or ``compute_nstep_returns`` (A2C, ACKTR)
fills the returns and advantages; ``get()`` returns a :class:`RolloutBatch` laid out env-major (the rows of env 0
first, as stable-baselines 2). ``TrajectorySegment`` is the MPI family's (PPO1, TRPO, GAIL) one-environment segment
in named form; it still reads and writes like SB2's segment dict (``seg["adv"]``).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np


def swap_and_flatten(arr: np.ndarray) -> np.ndarray:
    """(n_steps, n_envs, ...) -> (n_envs * n_steps, ...), env-major (SB2 layout)."""
    shape = arr.shape
    return arr.swapaxes(0, 1).reshape(shape[0] * shape[1], *shape[2:])


@dataclass
class RolloutBatch:
    """
    One rollout, env-major (``n_envs * n_steps`` rows), as the train step reads it.

    :param observations: the observations the actions were taken on
    :param actions: the actions as sampled (before clipping to a Box)
    :param returns: the targets of the value function (n-step or GAE(lambda) returns)
    :param advantages: the advantages (``returns - values``)
    :param values: the value estimates when acting
    :param neg_log_probs: the negative log-likelihoods of the actions when acting (None when not collected)
    :param masks: True where an episode starts at that step (the done flag before it; resets recurrent states)
    :param states: the recurrent states at the start of the rollout (None for feed-forward policies)
    :param episode_infos: the Monitor infos (``{"r", "l", ...}``) of the episodes that ended in the rollout
    :param true_rewards: the environment's rewards (no time-limit bootstrap)
    :param rewards: the rewards the returns were computed from (with time-limit bootstraps)
    """

    observations: np.ndarray
    actions: np.ndarray
    returns: np.ndarray
    advantages: np.ndarray
    values: np.ndarray
    neg_log_probs: Optional[np.ndarray]
    masks: np.ndarray
    states: Optional[np.ndarray]
    episode_infos: List[dict]
    true_rewards: np.ndarray
    rewards: Optional[np.ndarray] = None

    def __len__(self) -> int:
        return int(self.observations.shape[0])


class RolloutBuffer:
    """
    Storage of one on-policy rollout of ``n_steps`` per environment (step-major while filling).

    :param n_steps: (int) steps per environment
    :param n_envs: (int) environments
    :param obs_shape: the shape of one observation
    :param obs_dtype: the observations' dtype
    :param action_shape: the shape of one action (as the policy samples it)
    :param action_dtype: the actions' dtype
    """

    def __init__(self, n_steps: int, n_envs: int, obs_shape: Sequence[int], obs_dtype, action_shape: Sequence[int],
                 action_dtype):
        self.n_steps = int(n_steps)
        self.n_envs = int(n_envs)
        shape = (self.n_steps, self.n_envs)
        self.observations = np.zeros(shape + tuple(obs_shape), dtype=obs_dtype)
        self.actions = np.zeros(shape + tuple(action_shape), dtype=action_dtype)
        self.rewards = np.zeros(shape, dtype=np.float32)
        self.true_rewards = np.zeros(shape, dtype=np.float32)
        self.values = np.zeros(shape, dtype=np.float32)
        self.neg_log_probs = np.zeros(shape, dtype=np.float32)
        self.episode_starts = np.zeros(shape, dtype=bool)
        self.returns = np.zeros(shape, dtype=np.float32)
        self.advantages = np.zeros(shape, dtype=np.float32)
        self.start_states: Optional[np.ndarray] = None
        self.pos = 0
        self.has_neg_log_probs = False

    def reset(self, start_states: Optional[np.ndarray] = None) -> None:
        """Start a new rollout from the recurrent states ``start_states`` (None: feed-forward)."""
        self.pos = 0
        self.start_states = start_states
        self.has_neg_log_probs = False

    @property
    def full(self) -> bool:
        return self.pos == self.n_steps

    def add(self, observations: np.ndarray, actions: np.ndarray, values: np.ndarray, episode_starts: np.ndarray,
            neg_log_probs: Optional[np.ndarray] = None) -> None:
        """Store what was known when acting at the current step (the rewards come with :meth:`add_rewards`)."""
        pos = self.pos
        self.observations[pos] = observations
        self.actions[pos] = actions
        self.values[pos] = values
        self.episode_starts[pos] = episode_starts
        if neg_log_probs is not None:
            self.neg_log_probs[pos] = neg_log_probs
            self.has_neg_log_probs = True

    def add_rewards(self, rewards: np.ndarray, true_rewards: np.ndarray) -> None:
        """Store the current step's rewards (``rewards`` with time-limit bootstraps) and move to the next step."""
        self.true_rewards[self.pos] = true_rewards
        self.rewards[self.pos] = rewards
        self.pos += 1

    def compute_gae(self, last_values: np.ndarray, last_dones: np.ndarray, gamma: float, lam: float) -> None:
        """
        GAE(lambda) advantages and ``returns = advantages + values``, bootstrapped from ``last_values`` unless the
        environment is done after the last step (``last_dones``).
        """
        last_gae_lam = 0.0
        for step in reversed(range(self.n_steps)):
            if step == self.n_steps - 1:
                nextnonterminal = 1.0 - np.asarray(last_dones).astype(np.float32)
                nextvalues = last_values
            else:
                nextnonterminal = 1.0 - self.episode_starts[step + 1].astype(np.float32)
                nextvalues = self.values[step + 1]
            delta = self.rewards[step] + gamma * nextvalues * nextnonterminal - self.values[step]
            self.advantages[step] = last_gae_lam = delta + gamma * lam * nextnonterminal * last_gae_lam
        self.returns[:] = self.advantages + self.values

    def compute_nstep_returns(self, last_values: np.ndarray, last_dones: np.ndarray, gamma: float) -> None:
        """
        Discounted n-step returns (a done resets the sum; the last step bootstraps from ``last_values`` unless
        done) and ``advantages = returns - values``.
        """
        running = last_values * (1.0 - np.asarray(last_dones).astype(np.float32))
        for step in reversed(range(self.n_steps)):
            if step < self.n_steps - 1:
                running = running * (1.0 - self.episode_starts[step + 1].astype(np.float32))
            running = self.rewards[step] + gamma * running
            self.returns[step] = running
        self.advantages[:] = self.returns - self.values

    def get(self, episode_infos: List[dict]) -> RolloutBatch:
        """The rollout as a named, env-major batch (copies: the buffer is refilled by the next rollout)."""
        if not self.full:
            raise RuntimeError(f"RolloutBuffer.get: only {self.pos} of {self.n_steps} steps were stored")
        return RolloutBatch(
            observations=swap_and_flatten(self.observations), actions=swap_and_flatten(self.actions),
            returns=swap_and_flatten(self.returns), advantages=swap_and_flatten(self.advantages),
            values=swap_and_flatten(self.values),
            neg_log_probs=swap_and_flatten(self.neg_log_probs) if self.has_neg_log_probs else None,
            masks=swap_and_flatten(self.episode_starts), states=self.start_states, episode_infos=list(episode_infos),
            true_rewards=swap_and_flatten(self.true_rewards), rewards=swap_and_flatten(self.rewards))


@dataclass
class TrajectorySegment:
    """
    A segment of ``horizon`` steps of one environment (PPO1, TRPO, GAIL; ``traj_segment_generator``). Reads and
    writes like SB2's segment dict as well (``seg["observations"]``, ``seg["adv"] = ...``).

    :param observations: observations, ``(horizon,) + obs_shape``
    :param rewards: rewards (the discriminator's reward for GAIL)
    :param dones: done flags (an episode ended after this step)
    :param episode_starts: True on the first step of an episode
    :param true_rewards: the environment's rewards
    :param vpred: value estimates
    :param actions: actions (as sampled, before clipping)
    :param nextvpred: value of the observation after the segment (0 if an episode just ended)
    :param truncated_values: value of the terminal observation where a time limit cut an episode, else 0
    :param ep_rets: returns (Monitor's when available) of the episodes that ended in the segment
    :param ep_lens: their lengths
    :param ep_true_rets: their environment returns
    :param total_timestep: the steps taken for this segment
    :param continue_training: False when a callback stopped training (the segment is then incomplete)
    :param adv: GAE(lambda) advantages (set by ``add_vtarg_and_adv``)
    :param tdlamret: TD(lambda) returns (set by ``add_vtarg_and_adv``)
    """

    observations: np.ndarray
    rewards: np.ndarray
    dones: np.ndarray
    episode_starts: np.ndarray
    true_rewards: np.ndarray
    vpred: np.ndarray
    actions: np.ndarray
    nextvpred: float
    truncated_values: np.ndarray
    ep_rets: list
    ep_lens: list
    ep_true_rets: list
    total_timestep: int
    continue_training: bool
    adv: Optional[np.ndarray] = None
    tdlamret: Optional[np.ndarray] = None
    extra: dict = field(default_factory=dict)

    # ------------------------------------------------------------------ SB2's dict access
    def _names(self) -> Tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(self) if f.name != "extra")

    def __getitem__(self, key: str) -> Any:
        if key in self._names():
            value = getattr(self, key)
            if value is None and key in ("adv", "tdlamret"):
                raise KeyError(key)
            return value
        return self.extra[key]

    def __setitem__(self, key: str, value: Any) -> None:
        if key in self._names():
            setattr(self, key, value)
        else:
            self.extra[key] = value

    def __contains__(self, key: object) -> bool:
        try:
            self[key]  # type: ignore[index]
        except KeyError:
            return False
        return True

    def get(self, key: str, default: Any = None) -> Any:
        """``seg[key]`` or ``default``."""
        try:
            return self[key]
        except KeyError:
            return default

    def keys(self) -> List[str]:
        return [key for key in self._names() if key in self] + list(self.extra)

    def to_batch(self, obs_dtype, standardize_advantages: bool = True) -> RolloutBatch:
        """
        The segment (after ``add_vtarg_and_adv``) as a named batch: observations in the policy's dtype, the
        advantages standardized (PPO1/TRPO), the TD(lambda) returns and a copy of the values before the update.
        """
        if self.adv is None or self.tdlamret is None:
            raise ValueError("TrajectorySegment.to_batch: run add_vtarg_and_adv on the segment first")
        adv = self.adv
        if standardize_advantages:
            adv = ((adv - adv.mean()) / (adv.std() + 1e-8)).astype(np.float32)
        return RolloutBatch(observations=self.observations.astype(obs_dtype, copy=False), actions=self.actions,
                            returns=self.tdlamret, advantages=adv, values=self.vpred.copy(), neg_log_probs=None,
                            masks=self.episode_starts, states=None,
                            episode_infos=[{"r": r, "l": length} for r, length in zip(self.ep_rets, self.ep_lens)],
                            true_rewards=self.true_rewards, rewards=self.rewards)


def add_vtarg_and_adv(seg: "TrajectorySegment", gamma: float, lam: float) -> None:
    """
    Compute target value using TD(lambda) estimator, and advantage with GAE(lambda); adds ``seg["adv"]`` and
    ``seg["tdlamret"]``.

    Where an episode was cut by a time limit, ``gamma * seg["truncated_values"]`` (the value of the terminal
    observation) is added to that step's reward, so the cut is not learnt as a termination (sbtf; SB2 had no such
    key and bootstrapped nothing).

    :param seg: (TrajectorySegment or dict) the current segment of the trajectory (see ``traj_segment_generator``)
    :param gamma: (float) Discount factor
    :param lam: (float) GAE factor
    """
    # last element is only used for last vtarg, but we already zeroed it if last new = 1
    episode_starts = np.append(seg["episode_starts"], False)
    vpred = np.append(seg["vpred"], seg["nextvpred"]).astype(np.float64)
    rew_len = len(seg["rewards"])
    rewards = np.asarray(seg["rewards"], np.float64)
    truncated = seg.get("truncated_values")
    if truncated is not None:
        rewards = rewards + gamma * np.asarray(truncated, np.float64)
    nonterminal = 1.0 - episode_starts[1:].astype(np.float64)
    deltas = rewards + gamma * vpred[1:] * nonterminal - vpred[:-1]
    adv = [0.0] * rew_len
    deltas_list, decay = deltas.tolist(), (gamma * lam * nonterminal).tolist()  # plain floats: a fast loop
    lastgaelam = 0.0
    for step in range(rew_len - 1, -1, -1):
        lastgaelam = deltas_list[step] + decay[step] * lastgaelam
        adv[step] = lastgaelam
    seg["adv"] = np.asarray(adv, np.float32)
    seg["tdlamret"] = seg["adv"] + np.asarray(seg["vpred"], np.float32)


__all__ = ["RolloutBatch", "RolloutBuffer", "TrajectorySegment", "add_vtarg_and_adv", "swap_and_flatten"]
