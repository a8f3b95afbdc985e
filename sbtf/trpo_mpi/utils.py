"""GAE(lambda) advantages and TD(lambda) targets of a trajectory segment (stable-baselines 2.x ``trpo_mpi/utils.py``)."""
from __future__ import annotations

import numpy as np


def add_vtarg_and_adv(seg: dict, gamma: float, lam: float) -> None:
    """
    Compute target value using TD(lambda) estimator, and advantage with GAE(lambda); adds ``seg["adv"]`` and
    ``seg["tdlamret"]``.

    Where an episode was cut by a time limit, ``gamma * seg["truncated_values"]`` (the value of the terminal
    observation) is added to that step's reward, so the cut is not learnt as a termination (sbtf; SB2 had no such
    key and bootstrapped nothing).

    :param seg: (dict) the current segment of the trajectory (see ``traj_segment_generator``)
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


__all__ = ["add_vtarg_and_adv"]
