"""
Evaluation of ARS's candidate policies in worker processes (sb3-contrib's
``sb3_contrib.common.vec_env.async_eval.AsyncEval``).

``AsyncEval(envs_fn, train_policy)`` starts one process per function of ``envs_fn``; each builds its environment
(a gymnasium env or a VecEnv, e.g. ``VecNormalize(make_vec_env(...))``) and waits for jobs. ``ARS.learn(...,
async_eval=async_eval)`` sends the ``2 n_delta`` candidate weight vectors, candidate ``i`` to worker
``i % n_workers``; a worker runs ``n_eval_episodes`` episodes of each of its candidates one after the other and returns
their rewards and lengths. The workers act in NumPy with the policy's
:class:`~sbtf.contrib.ars.candidates.CandidateActor` (plain data: no Keras model crosses the process boundary). The
observation statistics of a ``VecNormalize`` in the workers are merged into the model's own VecNormalize after each
update and sent back (``get_obs_rms`` / ``sync_obs_rms``), as sb3-contrib does. ``ARS.learn`` closes the object when
it returns.
"""
from __future__ import annotations

import multiprocessing as mp
from collections import defaultdict
from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np

from sbtf.common.vec_env.base_vec_env import CloudpickleWrapper

__all__ = ["AsyncEval", "run_episodes"]


def _episode_stats(info: dict, reward_sum: float, length: int) -> Tuple[float, int]:
    """An episode's return and length: the ``Monitor``'s ``episode`` entry when there is one, else the sums."""
    episode = info.get("episode") if isinstance(info, dict) else None
    if episode is not None:
        return float(episode["r"]), int(episode["l"])
    return float(reward_sum), int(length)


def run_episodes(actor, weights: np.ndarray, env, n_episodes: int) -> Tuple[List[float], List[int]]:
    """
    ``n_episodes`` episodes of one weight vector on ``env`` (a gymnasium env, or a VecEnv whose environments all run
    that vector; the first ``n_episodes`` episodes to end are kept).

    :return: (episode returns, episode lengths)
    """
    rewards: List[float] = []
    lengths: List[int] = []
    if hasattr(env, "num_envs"):  # a VecEnv
        obs = env.reset()
        n_envs = env.num_envs
        sums, steps = np.zeros(n_envs), np.zeros(n_envs, np.int64)
        while len(rewards) < n_episodes:
            obs, reward, dones, infos = env.step(actor.actions(weights, obs))
            sums += np.asarray(reward, np.float64)
            steps += 1
            for i in np.flatnonzero(dones):
                if len(rewards) < n_episodes:
                    episode_return, episode_length = _episode_stats(infos[i], sums[i], steps[i])
                    rewards.append(episode_return)
                    lengths.append(episode_length)
                sums[i], steps[i] = 0.0, 0
        return rewards, lengths
    for _ in range(n_episodes):  # a gymnasium env
        obs, _ = env.reset()
        total, length, done, info = 0.0, 0, False, {}
        while not done:
            obs, reward, terminated, truncated, info = env.step(actor.actions(weights, obs[None])[0])
            total += float(reward)
            length += 1
            done = terminated or truncated
        episode_return, episode_length = _episode_stats(info, total, length)
        rewards.append(episode_return)
        lengths.append(episode_length)
    return rewards, lengths


def _find_vec_normalize(env):
    """The VecNormalize wrapper in a VecEnv stack, if any (without importing sbtf's VecEnv package eagerly)."""
    from sbtf.common.vec_env import unwrap_vec_normalize

    return unwrap_vec_normalize(env) if hasattr(env, "num_envs") else None


def _worker(remote, parent_remote, env_fn_wrapper: CloudpickleWrapper, actor_wrapper: CloudpickleWrapper,
            n_eval_episodes: int) -> None:
    parent_remote.close()
    env = env_fn_wrapper.var()
    actor = actor_wrapper.var
    vec_normalize = _find_vec_normalize(env)
    while True:
        try:
            cmd, data = remote.recv()
        except EOFError:
            break
        try:
            if cmd == "eval":
                episodes, candidates = data
                remote.send([(index, run_episodes(actor, weights, env, episodes)) for index, weights in candidates])
            elif cmd == "seed":
                if hasattr(env, "num_envs"):
                    remote.send(env.seed(data))
                else:
                    env.reset(seed=data)
                    remote.send([data])
            elif cmd == "get_obs_rms":
                remote.send(None if vec_normalize is None else vec_normalize.obs_rms)
            elif cmd == "sync_obs_rms":
                if vec_normalize is not None:
                    vec_normalize.obs_rms = data
            elif cmd == "close":
                env.close()
                remote.close()
                break
            else:
                raise NotImplementedError(f"`{cmd}` is not implemented in the worker")
        except EOFError:
            break


class AsyncEval:
    """
    Worker processes that evaluate candidate policies (sb3-contrib's ``AsyncEval``).

    :param envs_fn: ([callable]) one function per worker returning its environment (gymnasium env or VecEnv)
    :param train_policy: the ARS model's policy (``model.policy``): its :class:`CandidateActor` is sent to the workers
    :param start_method: (str) 'fork', 'forkserver' or 'spawn' (default 'forkserver' when available, else 'spawn')
    :param n_eval_episodes: (int) default number of episodes per candidate (``ARS.learn`` sends its own
        ``n_eval_episodes`` with each job)
    """

    def __init__(self, envs_fn: Sequence[Callable[[], Any]], train_policy, start_method: Optional[str] = None,
                 n_eval_episodes: int = 1):
        actor = getattr(train_policy, "candidate_actor", None)
        if actor is None:
            raise ValueError("Error: AsyncEval evaluates ARS policies: pass the ARS model's policy (model.policy), "
                             f"got {type(train_policy).__name__}.")
        if len(envs_fn) < 1:
            raise ValueError("Error: AsyncEval needs at least one environment function (one per worker process).")
        self.actor = actor
        self.n_eval_episodes = int(n_eval_episodes)
        self.waiting = False
        self.closed = False
        if start_method is None:  # fork is not thread-safe (TensorFlow runs threads)
            start_method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
        ctx = mp.get_context(start_method)
        self.remotes, self.work_remotes = zip(*[ctx.Pipe() for _ in envs_fn])
        self.processes = []
        for work_remote, remote, env_fn in zip(self.work_remotes, self.remotes, envs_fn):
            args = (work_remote, remote, CloudpickleWrapper(env_fn), CloudpickleWrapper(actor), self.n_eval_episodes)
            process = ctx.Process(target=_worker, args=args, daemon=True)  # daemon: never outlives a crashed parent
            process.start()
            self.processes.append(process)
            work_remote.close()

    @property
    def n_workers(self) -> int:
        return len(self.remotes)

    def send_jobs(self, candidate_weights: np.ndarray, pop_size: int, n_eval_episodes: Optional[int] = None) -> None:
        """Send candidate ``i`` (a row of ``candidate_weights``) to worker ``i % n_workers``."""
        self._check_open()
        episodes = self.n_eval_episodes if n_eval_episodes is None else int(n_eval_episodes)
        jobs = defaultdict(list)
        for index in range(int(pop_size)):
            jobs[index % self.n_workers].append((index, np.asarray(candidate_weights[index], np.float32)))
        for worker, remote in enumerate(self.remotes):
            remote.send(("eval", (episodes, jobs[worker])))
        self.waiting = True

    def get_results(self) -> List[Tuple[int, Tuple[List[float], List[int]]]]:
        """``[(candidate index, (episode returns, episode lengths)), ...]`` of the jobs sent."""
        results = [remote.recv() for remote in self.remotes]
        self.waiting = False
        return [result for worker_results in results for result in worker_results]

    def seed(self, seed: Optional[int] = None) -> List[Any]:
        """Seed worker ``i``'s environment with ``seed + i``."""
        self._check_open()
        for index, remote in enumerate(self.remotes):
            remote.send(("seed", None if seed is None else int(seed) + index))
        return [remote.recv() for remote in self.remotes]

    def get_obs_rms(self) -> list:
        """The observation statistics of each worker's VecNormalize (None for a worker without one)."""
        self._check_open()
        for remote in self.remotes:
            remote.send(("get_obs_rms", None))
        return [remote.recv() for remote in self.remotes]

    def sync_obs_rms(self, obs_rms) -> None:
        """Give every worker's VecNormalize these statistics."""
        self._check_open()
        for remote in self.remotes:
            remote.send(("sync_obs_rms", obs_rms))

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError("Error: this AsyncEval is closed (ARS.learn closes the one it was given); "
                             "create a new one.")

    def close(self) -> None:
        """Stop the workers (waits for jobs in flight)."""
        if self.closed:
            return
        if self.waiting:
            for remote in self.remotes:
                remote.recv()
        for remote in self.remotes:
            remote.send(("close", None))
        for process in self.processes:
            process.join()
        self.closed = True
