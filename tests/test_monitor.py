"""Behaviour of sbtf.bench.Monitor and load_results."""
import json
import os

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from sbtf.bench import LoadMonitorResultsError, Monitor, get_monitor_files, load_results


class CountingEnv(gymnasium.Env):
    """Reward ``reward`` per step, terminates after ``ep_len`` steps, reports ``info['custom']``."""

    def __init__(self, ep_len=4, reward=1.5):
        self.observation_space = spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.ep_len = ep_len
        self.reward = reward
        self.t = 0
        self.last_reset_kwargs = None

    def reset(self, *, seed=None, options=None, difficulty=None):
        super().reset(seed=seed)
        self.t = 0
        self.last_reset_kwargs = {"options": options, "difficulty": difficulty}
        return np.zeros(2, dtype=np.float32), {}

    def step(self, action):
        self.t += 1
        return np.zeros(2, dtype=np.float32), self.reward, self.t >= self.ep_len, False, {"custom": self.t * 10}


class OldGymEnv:
    """An env with the old gym API: reset() -> obs, step() -> 4-tuple."""

    def __init__(self):
        self.observation_space = spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.metadata = {}
        self.t = 0

    def reset(self):
        self.t = 0
        return np.zeros(1, dtype=np.float32)

    def step(self, action):
        self.t += 1
        return np.zeros(1, dtype=np.float32), 2.0, self.t >= 3, {}

    def seed(self, seed=None):
        return [seed]

    def render(self, mode="human"):
        return None

    def close(self):
        pass


def run_episodes(env, n):
    infos = []
    for _ in range(n):
        env.reset()
        done = False
        while not done:
            _, _, terminated, truncated, info = env.step(env.action_space.sample())
            done = terminated or truncated
        infos.append(info)
    return infos


def test_monitor_file_and_episode_info(tmp_path):
    env = Monitor(gymnasium.make("CartPole-v1"), str(tmp_path / "run"))
    env.action_space.seed(0)
    env.reset(seed=0)
    infos = run_episodes(env, 3)
    env.close()

    assert [info["episode"]["l"] for info in infos] == env.get_episode_lengths()
    assert [info["episode"]["r"] for info in infos] == pytest.approx(env.get_episode_rewards())
    assert env.get_total_steps() == sum(env.get_episode_lengths())
    assert len(env.get_episode_times()) == 3
    assert env.get_episode_times() == sorted(env.get_episode_times())

    path = tmp_path / "run.monitor.csv"
    lines = path.read_text().splitlines()
    header = json.loads(lines[0][1:])
    assert lines[0].startswith("#") and header["env_id"] == "CartPole-v1" and header["t_start"] > 0
    assert lines[1] == "r,l,t"
    assert len(lines) == 2 + 3

    frame = load_results(str(tmp_path))
    assert frame["l"].tolist() == env.get_episode_lengths()
    assert frame["r"].tolist() == pytest.approx(env.get_episode_rewards())
    assert (frame["t"] >= 0).all()


def test_truncation_ends_episode(tmp_path):
    env = Monitor(gymnasium.make("CartPole-v1", max_episode_steps=3), None)
    env.reset(seed=1)
    info = {}
    for _ in range(3):
        _, _, terminated, truncated, info = env.step(0 if _ % 2 else 1)
    assert truncated and not terminated
    assert info["episode"]["l"] == 3 and info["episode"]["r"] == 3.0
    with pytest.raises(RuntimeError, match="needs reset"):
        env.step(0)


def test_filename_variants(tmp_path):
    env = Monitor(CountingEnv(), str(tmp_path))  # a directory
    env.close()
    assert (tmp_path / "monitor.csv").exists()
    env = Monitor(CountingEnv(), str(tmp_path / "already.monitor.csv"))
    env.close()
    assert (tmp_path / "already.monitor.csv").exists()
    assert sorted(os.path.basename(f) for f in get_monitor_files(str(tmp_path))) == [
        "already.monitor.csv", "monitor.csv"]
    header = json.loads((tmp_path / "monitor.csv").read_text().splitlines()[0][1:])
    assert header["env_id"] is None  # no spec


def test_early_reset(tmp_path):
    env = Monitor(CountingEnv(), None, allow_early_resets=False)
    env.reset()
    env.step(0)
    with pytest.raises(RuntimeError, match="allow_early_resets"):
        env.reset()
    ok = Monitor(CountingEnv(), None)
    ok.reset()
    ok.step(0)
    ok.reset()  # allowed by default
    ok.step(0)
    assert ok.get_total_steps() == 2 and ok.get_episode_rewards() == []


def test_reset_and_info_keywords(tmp_path):
    env = Monitor(CountingEnv(ep_len=2), str(tmp_path / "kw"), reset_keywords=("difficulty",),
                  info_keywords=("custom",))
    with pytest.raises(ValueError, match="difficulty"):
        env.reset()
    env.reset(difficulty=3)
    assert env.unwrapped.last_reset_kwargs["difficulty"] == 3
    env.step(0)
    *_, info = env.step(0)
    assert info["episode"] == {"r": 3.0, "l": 2, "t": info["episode"]["t"], "difficulty": 3, "custom": 20}
    env.reset(options={"difficulty": 7})  # gymnasium-style: inside options
    env.step(0)
    env.step(0)
    env.close()
    frame = load_results(str(tmp_path))
    assert frame["difficulty"].tolist() == [3, 7]
    assert frame["custom"].tolist() == [20, 20]
    assert frame["r"].tolist() == [3.0, 3.0]


def test_old_gym_env_is_adapted():
    env = Monitor(OldGymEnv(), None)
    obs, info = env.reset()
    assert obs.shape == (1,)
    for _ in range(3):
        _, reward, terminated, truncated, info = env.step(0)
    assert terminated and info["episode"]["r"] == 6.0 and info["episode"]["l"] == 3


def test_load_results_merges_and_sorts(tmp_path):
    for i, t_start in enumerate([100.0, 50.0]):
        with open(tmp_path / "{}.monitor.csv".format(i), "w") as f:
            f.write("#%s\n" % json.dumps({"t_start": t_start, "env_id": "X"}))
            f.write("r,l,t\n")
            f.write("{},{},1.0\n{},{},2.0\n".format(i, 10 + i, i, 20 + i))
    frame = load_results(str(tmp_path))
    # absolute times: 101, 102 (file 0) and 51, 52 (file 1); relative to the earliest start (50)
    assert frame["t"].tolist() == [1.0, 2.0, 51.0, 52.0]
    assert frame["l"].tolist() == [11, 21, 10, 20]


def test_load_results_legacy_json(tmp_path):
    with open(tmp_path / "old.monitor.json", "w") as f:
        f.write(json.dumps({"t_start": 10.0, "env_id": "Old"}) + "\n")
        f.write(json.dumps({"r": 1.0, "l": 5, "t": 0.5}) + "\n")
        f.write(json.dumps({"r": 2.0, "l": 6, "t": 0.7}) + "\n")
    frame = load_results(str(tmp_path))
    assert frame["r"].tolist() == [1.0, 2.0] and frame["t"].tolist() == pytest.approx([0.5, 0.7])


def test_load_results_errors(tmp_path):
    with pytest.raises(LoadMonitorResultsError):
        load_results(str(tmp_path))
    (tmp_path / "bad.monitor.csv").write_text("r,l,t\n1,2,3\n")
    with pytest.raises(LoadMonitorResultsError, match="header"):
        load_results(str(tmp_path))
