"""``evaluate_policy``: run a model for some episodes and report the episode rewards."""
from __future__ import annotations

import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import gymnasium
import numpy as np

from sbtf.common.envs.gym_compat import wrap_env
from sbtf.common.monitor import Monitor
from sbtf.common.vec_env import DummyVecEnv, VecEnv, VecEnvWrapper, VecMonitor

__all__ = ["evaluate_policy"]


def _as_vec_env(env: Any) -> Any:
    """A VecEnv for ``env``: VecEnvs are returned unchanged, a single env is put in a ``DummyVecEnv``."""

    if isinstance(env, VecEnv):
        return env

    single_env = wrap_env(env)
    return DummyVecEnv([lambda: single_env])


def _is_monitor_wrapped(venv: Any) -> Optional[bool]:
    """
    Whether the envs inside ``venv`` are wrapped in a ``Monitor``.

    :return: (bool or None) None when it cannot be told (e.g. envs living in subprocesses)
    """

    inner = venv
    while isinstance(inner, VecEnvWrapper):
        if isinstance(inner, VecMonitor):  # it writes info["episode"] as Monitor does
            return True
        inner = inner.venv
    checker = getattr(venv, "env_is_wrapped", None)
    if callable(checker):
        try:
            return bool(all(checker(Monitor)))
        except Exception:  # a VecEnv that cannot answer
            pass
    envs = getattr(inner, "envs", None)
    if not isinstance(envs, (list, tuple)) or not envs:
        return None
    return all(_monitor_in_chain(env) for env in envs)


def _monitor_in_chain(env: Any) -> bool:
    """Whether a ``Monitor`` is in the wrapper chain of a single env (followed through ``.env``)."""

    while True:
        if isinstance(env, Monitor):
            return True
        if isinstance(env, gymnasium.Wrapper) or hasattr(env, "env"):
            nxt = getattr(env, "env", None)
            if nxt is None or nxt is env:
                return False
            env = nxt
        else:
            return False


def evaluate_policy(
    model: Any,
    env: Any,
    n_eval_episodes: int = 10,
    deterministic: bool = True,
    render: bool = False,
    callback: Optional[Callable[[Dict[str, Any], Dict[str, Any]], Any]] = None,
    reward_threshold: Optional[float] = None,
    return_episode_rewards: bool = False,
    warn: bool = True,
) -> Union[Tuple[float, float], Tuple[List[float], List[int]]]:
    """
    Runs policy for ``n_eval_episodes`` episodes and returns average reward.

    Works with a single env or a VecEnv with any number of envs. A single env (gymnasium, or old gym API:
    adapted) is stepped directly, as stable-baselines 2 did: ``predict`` gets one observation and the env
    gets the unbatched action it returns. With a VecEnv, the episodes are spread evenly over the envs (env
    ``i`` runs ``(n_eval_episodes + i) // n_envs`` of them, so short episodes are not over-represented).
    When the envs are wrapped in a ``Monitor``,
    the episode reward and length are taken from ``info["episode"]`` (the raw rewards, not the ones
    scaled by ``VecNormalize``), and a ``done`` without it (e.g. a lost life in Atari) does not end
    an episode. Recurrent policies keep their ``state`` across steps and get ``mask=dones``.

    :param model: (BaseRLModel) The RL agent you want to evaluate.
    :param env: (gym.Env or VecEnv) The environment.
    :param n_eval_episodes: (int) Number of episode to evaluate the agent
    :param deterministic: (bool) Whether to use deterministic or stochastic actions
    :param render: (bool) Whether to render the environment or not
    :param callback: (callable) callback function to do additional checks,
        called after each step with ``(locals(), globals())``.
    :param reward_threshold: (float) Minimum expected reward per episode,
        this will raise an error if the performance is not met
    :param return_episode_rewards: (bool) If True, a list of reward per episode
        will be returned instead of the mean.
    :param warn: (bool) stable-baselines3's: warn when the env is not wrapped in a ``Monitor`` (False: no warning)
    :return: (float, float) Mean reward per episode, std of reward per episode
        returns ([float], [int]) when ``return_episode_rewards`` is True
    """
    if n_eval_episodes < 1:
        raise ValueError("n_eval_episodes must be at least 1, got {}".format(n_eval_episodes))

    if not isinstance(env, VecEnv):
        episode_rewards, episode_lengths = _evaluate_single_env(model, env, n_eval_episodes, deterministic, render,
                                                                callback, warn)
        return _summary(episode_rewards, episode_lengths, reward_threshold, return_episode_rewards)
    n_envs = env.num_envs
    monitor_wrapped = _is_monitor_wrapped(env)
    if monitor_wrapped is False and warn:
        _warn_not_monitored()
    seen_monitor_info = False

    episode_rewards: List[float] = []
    episode_lengths: List[int] = []
    episode_counts = np.zeros(n_envs, dtype=np.int64)
    episode_count_targets = np.array([(n_eval_episodes + i) // n_envs for i in range(n_envs)], dtype=np.int64)
    current_rewards = np.zeros(n_envs, dtype=np.float64)
    current_lengths = np.zeros(n_envs, dtype=np.int64)

    obs = env.reset()
    state = None
    dones = np.zeros(n_envs, dtype=bool)
    while (episode_counts < episode_count_targets).any():
        action, state = model.predict(obs, state=state, mask=dones, deterministic=deterministic)
        obs, rewards, dones, infos = env.step(action)
        dones = np.asarray(dones, dtype=bool).reshape(n_envs)
        current_rewards += np.asarray(rewards, dtype=np.float64).reshape(n_envs)
        current_lengths += 1
        for i in range(n_envs):
            if not dones[i]:
                continue
            info = infos[i] if infos is not None and i < len(infos) else {}
            ep_info = info.get("episode") if isinstance(info, dict) else None
            if episode_counts[i] < episode_count_targets[i]:
                if ep_info is not None:
                    seen_monitor_info = True
                    episode_rewards.append(float(ep_info["r"]))
                    episode_lengths.append(int(ep_info["l"]))
                    episode_counts[i] += 1
                elif monitor_wrapped is False or (monitor_wrapped is None and not seen_monitor_info):
                    episode_rewards.append(float(current_rewards[i]))
                    episode_lengths.append(int(current_lengths[i]))
                    episode_counts[i] += 1
                # else: a done without Monitor info in a monitored env is not the end of the real episode
            current_rewards[i] = 0.0
            current_lengths[i] = 0
        if callback is not None:
            callback(locals(), globals())
        if render:
            env.render()

    return _summary(episode_rewards, episode_lengths, reward_threshold, return_episode_rewards)


def _warn_not_monitored() -> None:
    warnings.warn(
        "The evaluation environment is not wrapped with a ``Monitor`` wrapper: the reported episode "
        "rewards are the sums of the rewards the (possibly normalized or otherwise modified) env returns. "
        "Wrap the env with ``Monitor`` to report the original episode rewards.",
        UserWarning,
    )


def _summary(episode_rewards: List[float], episode_lengths: List[int], reward_threshold: Optional[float],
             return_episode_rewards: bool) -> Union[Tuple[float, float], Tuple[List[float], List[int]]]:
    """What ``evaluate_policy`` returns: the mean and std of the rewards, or the episodes' rewards and lengths."""
    mean_reward = float(np.mean(episode_rewards))
    std_reward = float(np.std(episode_rewards))
    if reward_threshold is not None and not mean_reward > reward_threshold:
        raise AssertionError("Mean reward below threshold: {:.2f} < {:.2f}".format(mean_reward, reward_threshold))
    if return_episode_rewards:
        return episode_rewards, episode_lengths
    return mean_reward, std_reward


def _evaluate_single_env(model: Any, env: Any, n_eval_episodes: int, deterministic: bool, render: bool,
                         callback: Optional[Callable[[Dict[str, Any], Dict[str, Any]], Any]], warn: bool = True
                         ) -> Tuple[List[float], List[int]]:
    """
    Play ``n_eval_episodes`` episodes on one (non-vectorized) env, as stable-baselines 2 did: ``predict`` on a
    single observation, the unbatched action it returns passed to ``env.step``. With a ``Monitor`` in the env's
    wrappers the episode figures are the Monitor's, and a ``done`` without them (a lost life) is not the end of an
    episode: the env is reset and the episode goes on.

    :return: ([float], [int]) the episode rewards and lengths
    """

    env = wrap_env(env)
    monitor_wrapped = _monitor_in_chain(env)
    if not monitor_wrapped and warn:
        _warn_not_monitored()
    episode_rewards: List[float] = []
    episode_lengths: List[int] = []
    while len(episode_rewards) < n_eval_episodes:
        obs, _ = env.reset()
        state = None
        done = False
        episode_reward, episode_length = 0.0, 0
        while not done:
            action, state = model.predict(obs, state=state, mask=np.zeros((1,), dtype=bool),
                                          deterministic=deterministic)
            obs, reward, terminated, truncated, info = env.step(action)
            done = bool(terminated or truncated)
            episode_reward += float(reward)
            episode_length += 1
            if callback is not None:
                callback(locals(), globals())
            if render:
                env.render()
            ep_info = info.get("episode") if isinstance(info, dict) else None
            if done and monitor_wrapped and ep_info is None:
                obs, _ = env.reset()  # a lost life: the Monitor's episode goes on
                done = False
                continue
            if done:
                episode_rewards.append(float(ep_info["r"]) if ep_info is not None else episode_reward)
                episode_lengths.append(int(ep_info["l"]) if ep_info is not None else episode_length)
    return episode_rewards, episode_lengths
