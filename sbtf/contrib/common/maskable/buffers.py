"""Rollouts with action masks (sb3-contrib ``common/maskable/buffers.py``): the runner that reads the masks of every
step from the environment and the batch that carries them to the train step."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from sbtf.common.storage.rollout import RolloutBatch, RolloutBuffer, swap_and_flatten
from sbtf.common.runners import AbstractEnvRunner
from sbtf.contrib.common.maskable.utils import get_action_masks, is_masking_supported

__all__ = ["MaskableRolloutBatch", "MaskableRolloutRunner"]


@dataclass
class MaskableRolloutBatch(RolloutBatch):
    """A :class:`~sbtf.common.storage.rollout.RolloutBatch` with the action masks of every step (env-major, bool)."""

    action_masks: Optional[np.ndarray] = None


class MaskableRolloutRunner(AbstractEnvRunner):
    """
    Collects ``n_steps`` per env with a maskable policy: at every step the masks come from the env's
    ``action_masks()`` (when ``use_masking``), the actions are sampled from the masked distribution, and the masks
    are stored; GAE(lambda) returns, time-limit truncations bootstrapped from the value of the terminal observation.

    :param env: (VecEnv) the environment
    :param model: (MaskablePPO) the model (its ``policy_tf`` acts)
    :param n_steps: (int) steps per environment per rollout
    :param gamma: (float) discount factor
    :param gae_lambda: (float) GAE's lambda
    """

    def __init__(self, *, env, model, n_steps: int, gamma: float, gae_lambda: float):
        super().__init__(env=env, model=model, n_steps=n_steps)
        self.gamma = gamma
        self.gae_lambda = gae_lambda
        dist = model.policy_tf.dist
        self.buffer = RolloutBuffer(n_steps, self.n_envs, self.obs.shape[1:], self.obs.dtype, dist.action_shape,
                                    np.int64)
        self.masks = np.ones((n_steps, self.n_envs, dist.n_logits), dtype=bool)
        self.use_masking = True

    def _run(self) -> Optional[MaskableRolloutBatch]:
        policy = self.model.policy_tf
        buffer = self.buffer
        if self.use_masking and not is_masking_supported(self.env):
            raise ValueError("Environment does not support action masking. Consider using ActionMasker wrapper")
        buffer.reset(None)
        self.masks[:] = True
        ep_infos: list = []
        for step in range(self.n_steps):
            action_masks = get_action_masks(self.env) if self.use_masking else None
            actions, values, neglogpacs = policy.step_masked(self.obs, action_masks)
            buffer.add(self.obs, actions, values, self.dones, neglogpacs)
            if action_masks is not None:
                self.masks[step] = action_masks.reshape(self.n_envs, -1)
            obs, rewards, dones, infos = self.env.step(actions)
            self.dones = dones
            self.obs[:] = obs
            if not self._on_env_step(locals(), infos, ep_infos):
                return None
            buffer.add_rewards(self._bootstrap_truncated(rewards, dones, infos, self.gamma, None), rewards)
        buffer.compute_gae(policy.value(self.obs), self.dones, self.gamma, self.gae_lambda)
        batch = buffer.get(ep_infos)
        return MaskableRolloutBatch(**vars(batch), action_masks=swap_and_flatten(self.masks))
