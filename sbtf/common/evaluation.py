"""``evaluate_policy``: run a model for some episodes and report the episode rewards."""
from __future__ import annotations

import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import numpy as np

__all__ = ["evaluate_policy"]


def _as_vec_env(env: Any) -> Any:
    """A VecEnv for ``env``: VecEnvs are returned unchanged, a single env is put in a ``DummyVecEnv``."""
    from sbtf.common.vec_env import DummyVecEnv, VecEnv

    if isinstance(env, VecEnv):
        return env
    from sbtf.common.gym_compat import wrap_env

    single_env = wrap_env(env)
    return DummyVecEnv([lambda: single_env])


def _is_monitor_wrapped(venv: Any) -> Optional[bool]:
    """
    Whether the envs inside ``venv`` are wrapped in a ``Monitor``.

    :return: (bool or None) None when it cannot be told (e.g. envs living in subprocesses)
    """
    import gymnasium

    from sbtf.bench.monitor import Monitor
    from sbtf.common.vec_env import VecEnvWrapper

    checker = getattr(venv, "env_is_wrapped", None)
    if callable(checker):
        try:
            return bool(all(checker(Monitor)))
        except Exception:  # a VecEnv that cannot answer
            pass
    inner = venv
    while isinstance(inner, VecEnvWrapper):
        inner = inner.venv
    envs = getattr(inner, "envs", None)
    if not isinstance(envs, (list, tuple)) or not envs:
        return None

    def wrapped(env: Any) -> bool:
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

    return all(wrapped(env) for env in envs)


def evaluate_policy(
    model: Any,
    env: Any,
    n_eval_episodes: int = 10,
    deterministic: bool = True,
    render: bool = False,
    callback: Optional[Callable[[Dict[str, Any], Dict[str, Any]], Any]] = None,
    reward_threshold: Optional[float] = None,
    return_episode_rewards: bool = False,
) -> Union[Tuple[float, float], Tuple[List[float], List[int]]]:
    """
    Runs policy for ``n_eval_episodes`` episodes and returns average reward.

    Works with a single env (put in a ``DummyVecEnv``) or a VecEnv with any number of envs: the
    episodes are spread evenly over the envs (env ``i`` runs ``(n_eval_episodes + i) // n_envs`` of
    them, so short episodes are not over-represented). When the envs are wrapped in a ``Monitor``,
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
    :return: (float, float) Mean reward per episode, std of reward per episode
        returns ([float], [int]) when ``return_episode_rewards`` is True
    """
    if n_eval_episodes < 1:
        raise ValueError("n_eval_episodes must be at least 1, got {}".format(n_eval_episodes))
    env = _as_vec_env(env)
    n_envs = env.num_envs
    monitor_wrapped = _is_monitor_wrapped(env)
    if monitor_wrapped is False:
        warnings.warn(
            "The evaluation environment is not wrapped with a ``Monitor`` wrapper: the reported episode "
            "rewards are the sums of the rewards the (possibly normalized or otherwise modified) env returns. "
            "Wrap the env with ``Monitor`` to report the original episode rewards.",
            UserWarning,
        )
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

    mean_reward = float(np.mean(episode_rewards))
    std_reward = float(np.std(episode_rewards))
    if reward_threshold is not None and not mean_reward > reward_threshold:
        raise AssertionError("Mean reward below threshold: {:.2f} < {:.2f}".format(mean_reward, reward_threshold))
    if return_episode_rewards:
        return episode_rewards, episode_lengths
    return mean_reward, std_reward
