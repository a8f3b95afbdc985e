"""Rollout collection shared by the on-policy algorithms (SB2 ``common/runners.py``): runners fill a
``RolloutBuffer`` and return a named ``RolloutBatch`` (``sbtf.common.storage.rollout``); ``traj_segment_generator``
yields the MPI family's ``TrajectorySegment`` items."""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Optional

import gymnasium as gym
import numpy as np

from sbtf.common.storage.rollout import RolloutBatch, RolloutBuffer, TrajectorySegment, swap_and_flatten


class AbstractEnvRunner(ABC):
    """
    Collects experience batches from a VecEnv with a model's policy.

    :param env: (VecEnv) the environment
    :param model: (BaseRLModel) the model (its ``policy_tf`` acts)
    :param n_steps: (int) steps per environment per batch
    """

    def __init__(self, *, env, model, n_steps: int):
        self.env = env
        self.model = model
        n_envs = env.num_envs
        self.batch_ob_shape = (n_envs * n_steps,) + env.observation_space.shape
        self.obs = np.zeros((n_envs,) + env.observation_space.shape, dtype=env.observation_space.dtype)
        self.obs[:] = env.reset()
        self.n_steps = n_steps
        self.states = model.initial_state
        self.dones = np.zeros(n_envs, dtype=bool)
        self.callback = None
        self.continue_training = True
        self.n_envs = n_envs

    def run(self, callback=None):
        """Collect one batch; ``callback.on_step()`` returning False stops (``continue_training`` = False)."""
        self.callback = callback
        self.continue_training = True
        return self._run()

    @abstractmethod
    def _run(self):
        raise NotImplementedError

    # ------------------------------------------------------------------ helpers
    def _clip_actions(self, actions: np.ndarray) -> np.ndarray:
        space = self.env.action_space
        if isinstance(space, gym.spaces.Box):
            return np.clip(actions, space.low, space.high)
        return actions

    def _bootstrap_truncated(self, rewards: np.ndarray, dones: np.ndarray, infos: list, gamma: float,
                             states_before: Optional[np.ndarray]) -> np.ndarray:
        """
        Add ``gamma * V(terminal_observation)`` to the reward of episodes cut by a time limit, so that a
        truncation is not learnt as a termination (``infos[i]["TimeLimit.truncated"]``).
        """
        truncated = [i for i in np.flatnonzero(dones)
                     if infos[i].get("TimeLimit.truncated", False) and infos[i].get("terminal_observation") is not None]
        if not truncated:
            return rewards
        terminal_obs = np.stack([np.asarray(infos[i]["terminal_observation"]) for i in truncated])
        policy = self.model.policy_tf
        if getattr(policy, "recurrent", False):
            state = states_before[truncated]
            values = policy.value(terminal_obs, state, np.zeros(len(truncated), np.float32))
        else:
            values = policy.value(terminal_obs)
        rewards = rewards.astype(np.float32, copy=True)
        rewards[truncated] += gamma * values.astype(np.float32)
        return rewards

    def _on_env_step(self, local_vars: dict, infos: list, ep_infos: list) -> bool:
        """
        After every env stepped once: count the steps, call the callback and keep the Monitor infos of the episodes
        that ended.

        :param local_vars: (dict) the rollout's ``locals()`` (what the callback sees)
        :param infos: ([dict]) the infos the envs returned
        :param ep_infos: ([dict]) the rollout's finished-episode infos (appended to)
        :return: (bool) False when the callback stopped training (nothing is appended then)
        """
        self.model.num_timesteps += self.n_envs
        if not self._step_callback(local_vars):
            return False
        for info in infos:
            maybe_ep_info = info.get("episode")
            if maybe_ep_info is not None:
                ep_infos.append(maybe_ep_info)
        dones = local_vars.get("dones")
        if dones is not None:
            for i in np.flatnonzero(dones):
                self.model._record_episode_end(infos[i])  # its info["is_success"] (ep_success_buffer)
        return True

    def _step_callback(self, local_vars: dict) -> bool:
        if self.callback is None:
            return True
        # old-style callbacks read the model as ``locals_["self"]`` (SB2 <= 2.9 passed learn()'s locals)
        local_vars = dict(local_vars, self=self.model, runner=self)
        self.callback.update_locals(local_vars)
        if self.callback.on_step() is False:
            self.continue_training = False
            return False
        return True


class RolloutRunner(AbstractEnvRunner):
    """
    Collects ``n_steps`` per env into a :class:`RolloutBuffer` and returns the rollout as a :class:`RolloutBatch`:
    discounted n-step returns bootstrapped from the value of the last observation (``lam=None``, SB2's
    ``A2CRunner``) or GAE(lambda) returns (SB2's ``ppo2.Runner``). A time-limit truncation adds
    ``gamma * V(terminal_observation)`` to the reward of its step.

    :param env: (VecEnv) the environment
    :param model: (BaseRLModel) the model (its ``policy_tf`` acts)
    :param n_steps: (int) steps per environment per rollout
    :param gamma: (float) discount factor
    :param lam: (float) GAE factor; None for n-step returns
    :param with_neg_log_probs: (bool) record the actions' negative log-likelihoods (PPO2's ratio needs them)
    """

    def __init__(self, *, env, model, n_steps: int, gamma: float, lam: Optional[float] = None,
                 with_neg_log_probs: bool = False):
        super().__init__(env=env, model=model, n_steps=n_steps)
        self.gamma = gamma
        self.lam = lam
        self.with_neg_log_probs = with_neg_log_probs
        policy = model.policy_tf
        is_box = isinstance(env.action_space, gym.spaces.Box)
        self.buffer = RolloutBuffer(n_steps, self.n_envs, self.obs.shape[1:], self.obs.dtype,
                                    tuple(policy.pdtype.sample_shape()), np.float32 if is_box else np.int64)

    def _run(self) -> Optional[RolloutBatch]:
        """One rollout (None when a callback stopped training during it)."""
        policy = self.model.policy_tf
        buffer = self.buffer
        space = self.env.action_space
        is_box = isinstance(space, gym.spaces.Box)
        buffer.reset(self.states)
        ep_infos: list = []
        for step in range(self.n_steps):  # noqa: B007  # callbacks receive locals(), step included
            states_before = self.states
            if self.with_neg_log_probs:
                actions, values, states, neglogpacs = policy.step(self.obs, self.states, self.dones)
            else:
                (actions, values, states), neglogpacs = policy.act(self.obs, self.states, self.dones), None
            buffer.add(self.obs, actions, values, self.dones, neglogpacs)
            if is_box and getattr(policy, "squash_output", False):  # SB3: rescale [-1, 1] to the bounds
                clipped_actions = policy.unscale_action(actions).astype(np.float32)
            else:
                clipped_actions = np.clip(actions, space.low, space.high) if is_box else actions
            obs, rewards, dones, infos = self.env.step(clipped_actions)
            self.states = states
            self.dones = dones
            self.obs[:] = obs
            if not self._on_env_step(locals(), infos, ep_infos):
                return None
            buffer.add_rewards(self._bootstrap_truncated(rewards, dones, infos, self.gamma, states_before), rewards)
        last_values = policy.value(self.obs, self.states, self.dones)
        if self.lam is None:
            buffer.compute_nstep_returns(last_values, self.dones, self.gamma)
        else:
            buffer.compute_gae(last_values, self.dones, self.gamma, self.lam)
        return buffer.get(ep_infos)


def _as_single_vec_env(env):
    """A VecEnv with one environment for ``traj_segment_generator`` (a plain env is wrapped in a DummyVecEnv)."""
    from sbtf.common.vec_env import DummyVecEnv, VecEnv  # pylint: disable=import-outside-toplevel

    if not isinstance(env, VecEnv):
        from sbtf.common.envs.gym_compat import wrap_env  # pylint: disable=import-outside-toplevel

        single = wrap_env(env)
        env = DummyVecEnv([lambda: single])
    if env.num_envs != 1:
        raise ValueError(f"Error: traj_segment_generator runs one environment, got a VecEnv with {env.num_envs}; "
                         "PPO1, TRPO and GAIL collect data in parallel with MPI (mpirun -np N) instead.")
    return env


def traj_segment_generator(policy, env, horizon, reward_giver=None, gail=False, callback=None, *, model=None,
                           timestep_increment: int = 1):
    """
    Collect trajectory segments of ``horizon`` steps from one environment (PPO1, TRPO, GAIL; SB2 semantics).

    Each ``next()`` returns a :class:`TrajectorySegment` (named fields, also readable as SB2's dict:
    ``seg["observations"]``; its arrays are reused by the next segment: copy what you keep):

    - observations: (np.ndarray) observations, shape ``(horizon,) + obs_shape``
    - rewards: (np.ndarray) rewards (the discriminator's reward when ``gail``)
    - true_rewards: (np.ndarray) the environment's rewards
    - vpred: (np.ndarray) value estimates
    - dones: (np.ndarray) done flags (end of an episode after this step)
    - episode_starts: (np.ndarray) True on the first step of an episode (used for GAE)
    - actions: (np.ndarray) actions (as sampled, before clipping)
    - nextvpred: (float) value of the observation after the segment (0 if an episode just ended)
    - truncated_values: (np.ndarray) value of the terminal observation where an episode was cut by a time limit
      (``infos["TimeLimit.truncated"]``), 0 elsewhere: ``add_vtarg_and_adv`` bootstraps from it (an sbtf addition;
      SB2 treated a time-limit cut as a termination)
    - ep_rets / ep_lens / ep_true_rets: ([float]) returns (Monitor's when available), lengths and true returns of
      the episodes that ended in this segment
    - total_timestep: (int) steps in this segment (when the callback stops training: the steps taken, the last one
      included, although its data is not in the arrays)
    - continue_training: (bool) False when the callback asked to stop (the segment is then incomplete)

    Unlike SB2, the action that starts a segment is sampled again after the model was updated (SB2 kept the one
    drawn with the previous parameters, refreshing only the value).

    :param policy: (ActorCriticPolicy) the policy (acts through its NumPy fast path)
    :param env: (VecEnv or gymnasium.Env) one environment
    :param horizon: (int) the number of timesteps per segment
    :param reward_giver: (TransitionClassifier) the reward predicter from observation and action (GAIL)
    :param gail: (bool) whether the reward comes from ``reward_giver``
    :param callback: (BaseCallback) called after every step (``on_step``; False stops), ``on_rollout_start/end``
    :param model: (BaseRLModel) its ``num_timesteps`` is increased by ``timestep_increment`` per step
    :param timestep_increment: (int) steps counted per local step (the number of MPI workers, which all step
        together, so that ``num_timesteps`` counts the steps of the whole job)
    :return: (generator) of TrajectorySegment
    """
    if gail and reward_giver is None:
        raise ValueError("You must pass a reward giver when using GAIL")
    env = _as_single_vec_env(env)
    horizon = int(horizon)
    if horizon <= 0:
        raise ValueError(f"horizon must be positive, got {horizon}")
    action_space = env.action_space
    is_box = isinstance(action_space, gym.spaces.Box)
    low, high = (action_space.low, action_space.high) if is_box else (None, None)
    act_shape = tuple(policy.pdtype.sample_shape())
    act_dtype = np.float32 if isinstance(action_space, (gym.spaces.Box, gym.spaces.MultiBinary)) else np.int64

    observation = env.reset()
    cur_ep_ret = 0.0  # return in current episode
    current_it_len = 0  # len of current iteration
    current_ep_len = 0  # len of current episode
    cur_ep_true_ret = 0.0
    ep_true_rets: list = []
    ep_rets: list = []  # returns of completed episodes in this segment
    ep_lens: list = []  # episode lengths

    observations = np.zeros((horizon,) + observation.shape[1:], dtype=observation.dtype)
    true_rewards = np.zeros(horizon, np.float32)
    rewards = np.zeros(horizon, np.float32)
    vpreds = np.zeros(horizon, np.float32)
    truncated_values = np.zeros(horizon, np.float32)
    episode_starts = np.zeros(horizon, bool)
    dones = np.zeros(horizon, bool)
    actions = np.zeros((horizon,) + act_shape, dtype=act_dtype)
    states = policy.initial_state
    recurrent = bool(getattr(policy, "recurrent", False))
    episode_start = True  # marks if we're on first timestep of an episode
    done_mask = np.zeros(1, np.float32)
    step = 0

    def _segment(continue_training: bool) -> TrajectorySegment:
        return TrajectorySegment(
            observations=observations, rewards=rewards, dones=dones, episode_starts=episode_starts,
            true_rewards=true_rewards, vpred=vpreds, actions=actions,
            nextvpred=float(vpred[0]) * (1 - episode_start), truncated_values=truncated_values, ep_rets=ep_rets,
            ep_lens=ep_lens, ep_true_rets=ep_true_rets, total_timestep=current_it_len,
            continue_training=continue_training)

    # ``act`` skips the log-likelihood that ``step`` also computes (not needed here)
    act = policy.act if hasattr(policy, "act") else (lambda o, s, m: policy.step(o, s, m)[:3])
    if callback is not None:
        callback.on_rollout_start()
    while True:
        action, vpred, new_states = act(observation, states, done_mask)
        # The value at time T is needed before returning segment [0, T-1] (the bootstrap value).
        if step > 0 and step % horizon == 0:
            if callback is not None:
                callback.update_locals(locals())
                callback.on_rollout_end()
            yield _segment(True)
            # The model was updated: act again with the new parameters.
            action, vpred, new_states = act(observation, states, done_mask)
            ep_rets = []
            ep_true_rets = []
            ep_lens = []
            current_it_len = 0
            if callback is not None:
                callback.on_rollout_start()
        if recurrent:
            states = new_states
        i = step % horizon
        observations[i] = observation[0]
        vpreds[i] = vpred[0]
        actions[i] = action[0]
        episode_starts[i] = episode_start
        truncated_values[i] = 0.0

        clipped_action = np.clip(action, low, high) if is_box else action
        if gail:
            reward = float(np.asarray(reward_giver.get_reward(observation, clipped_action)).ravel()[0])
            observation, env_rewards, env_dones, infos = env.step(clipped_action)
            true_reward = float(env_rewards[0])
        else:
            observation, env_rewards, env_dones, infos = env.step(clipped_action)
            reward = true_reward = float(env_rewards[0])
        done = bool(env_dones[0])
        info = infos[0]
        if model is not None:
            model.num_timesteps += timestep_increment
        current_it_len += 1

        if callback is not None:
            callback.update_locals(locals())
            if callback.on_step() is False:
                yield _segment(False)
                return

        rewards[i] = reward
        true_rewards[i] = true_reward
        dones[i] = done
        episode_start = done
        done_mask[0] = float(done)

        cur_ep_ret += reward
        cur_ep_true_ret += true_reward
        current_ep_len += 1
        if done:
            if info.get("TimeLimit.truncated", False) and info.get("terminal_observation") is not None:
                terminal_obs = np.asarray(info["terminal_observation"])[None]
                truncated_values[i] = policy.value(terminal_obs, states, np.zeros(1, np.float32))[0]
            # Retrieve the unnormalized reward if using the Monitor wrapper
            maybe_ep_info = info.get("episode")
            if maybe_ep_info is not None:
                if not gail:
                    cur_ep_ret = maybe_ep_info["r"]
                cur_ep_true_ret = maybe_ep_info["r"]
            ep_rets.append(cur_ep_ret)
            ep_true_rets.append(cur_ep_true_ret)
            ep_lens.append(current_ep_len)
            cur_ep_ret = 0.0
            cur_ep_true_ret = 0.0
            current_ep_len = 0
            if recurrent:
                states = policy.initial_state
        step += 1


__all__ = ["AbstractEnvRunner", "RolloutRunner", "traj_segment_generator", "swap_and_flatten"]
