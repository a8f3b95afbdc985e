"""Behaviour of sbtf.common.callbacks, driven by a small fake model on a DummyVecEnv of CartPole."""
import os

import gymnasium
import numpy as np
import pytest

from sbtf import logger
from sbtf.bench import Monitor
from sbtf.common.callbacks import (BaseCallback, CallbackList, CheckpointCallback, ConvertCallback, EvalCallback,
                                   EventCallback, EveryNTimesteps, ProgressBarCallback, StopTrainingOnRewardThreshold)
from sbtf.common.vec_env import DummyVecEnv, VecCheckNan, VecNormalize


def cartpole_vec(n_envs=1, monitor=True):
    def make():
        env = gymnasium.make("CartPole-v1")
        return Monitor(env, None) if monitor else env

    venv = DummyVecEnv([make for _ in range(n_envs)])
    venv.seed(0)
    return venv


class FakeModel:
    """The model interface callbacks rely on, with a learn() loop shaped like the base class's."""

    def __init__(self, env, good_after=None, n_steps=5):
        self.env = env
        self.num_timesteps = 0
        self.verbose = 0
        self.n_steps = n_steps
        self.good_after = good_after  # timesteps after which predict() balances the pole
        self.saved = []

    def get_env(self):
        return self.env

    def save(self, path):
        with open(path + ".zip", "w") as f:
            f.write(str(self.num_timesteps))
        self.saved.append((path, self.num_timesteps))

    def predict(self, obs, state=None, mask=None, deterministic=False):
        obs = np.asarray(obs)
        if self.good_after is not None and self.num_timesteps >= self.good_after:
            actions = (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int64)
        else:
            actions = np.zeros(len(obs), dtype=np.int64)
        return actions, state

    def _init_callback(self, callback):
        if isinstance(callback, list):
            callback = CallbackList(callback)
        if not isinstance(callback, BaseCallback):
            callback = ConvertCallback(callback)
        callback.init_callback(self)
        return callback

    def learn(self, total_timesteps, callback=None):
        callback = self._init_callback(callback)
        callback.on_training_start(locals(), globals())
        obs = self.env.reset()
        stopped = False
        while self.num_timesteps < total_timesteps and not stopped:
            callback.on_rollout_start()
            for _ in range(self.n_steps):
                actions, _ = self.predict(obs)
                obs, rewards, dones, infos = self.env.step(actions)
                self.num_timesteps += self.env.num_envs
                callback.update_locals(locals())
                if callback.on_step() is False:
                    stopped = True
                    break
            callback.on_rollout_end()
        callback.on_training_end()
        return self


class Recorder(BaseCallback):
    def __init__(self, name, events, stop_at=None):
        super().__init__()
        self.name = name
        self.events = events
        self.stop_at = stop_at
        self.seen_obs = []

    def _init_callback(self):
        self.events.append(self.name + ":init")

    def _on_training_start(self):
        self.events.append(self.name + ":training_start")

    def _on_rollout_start(self):
        self.events.append(self.name + ":rollout_start")

    def _on_step(self):
        self.events.append(self.name + ":step")
        self.seen_obs.append(self.locals.get("obs"))
        return not (self.stop_at is not None and self.n_calls >= self.stop_at)

    def _on_rollout_end(self):
        self.events.append(self.name + ":rollout_end")

    def _on_training_end(self):
        self.events.append(self.name + ":training_end")


def test_base_callback_attributes_and_counters():
    env = cartpole_vec(2)
    model = FakeModel(env, n_steps=3)
    rec = Recorder("a", [])
    model.learn(12, rec)
    assert rec.model is model and rec.training_env is env
    assert rec.logger is logger.Logger.CURRENT
    assert rec.n_calls == 6 and rec.num_timesteps == 12
    assert rec.locals["total_timesteps"] == 12 and "actions" in rec.locals
    assert rec.globals is not None and "FakeModel" in rec.globals
    with pytest.raises(TypeError):
        BaseCallback()  # _on_step is abstract


def test_callback_list_order_and_stop():
    events = []
    a = Recorder("a", events)
    b = Recorder("b", events, stop_at=2)
    model = FakeModel(cartpole_vec(1), n_steps=3)
    model.learn(100, [a, b])
    assert model.num_timesteps == 2
    assert events == [
        "a:init", "b:init",
        "a:training_start", "b:training_start",
        "a:rollout_start", "b:rollout_start",
        "a:step", "b:step",
        "a:step", "b:step",  # b stops here, a was still called
        "a:rollout_end", "b:rollout_end",
        "a:training_end", "b:training_end",
    ]
    # update_locals reaches the children
    assert a.seen_obs[-1] is not None and a.seen_obs[-1].shape == (1, 4)


def test_convert_callback_false_stops_none_continues():
    calls = []

    def stop_after_seven(locals_, globals_):
        calls.append(locals_["self"].num_timesteps)
        if locals_["self"].num_timesteps >= 7:
            return False
        return True

    model = FakeModel(cartpole_vec(1))
    model.learn(50, stop_after_seven)
    assert model.num_timesteps == 7 and calls == list(range(1, 8))

    def no_return(locals_, globals_):
        calls.append("x")

    model = FakeModel(cartpole_vec(1))
    model.learn(10, no_return)
    assert model.num_timesteps == 10

    conv = ConvertCallback(None)
    conv.init_callback(model)
    assert conv.on_step() is True
    with pytest.raises(TypeError):
        ConvertCallback(42)


def test_checkpoint_callback_saves_at_the_right_steps(tmp_path):
    model = FakeModel(cartpole_vec(2))
    ckpt = CheckpointCallback(save_freq=3, save_path=str(tmp_path / "ckpt"), name_prefix="ppo")
    model.learn(20, ckpt)  # 10 calls, 2 envs
    assert [steps for _, steps in model.saved] == [6, 12, 18]
    assert sorted(os.listdir(tmp_path / "ckpt")) == ["ppo_12_steps.zip", "ppo_18_steps.zip", "ppo_6_steps.zip"]
    default = CheckpointCallback(save_freq=1, save_path=str(tmp_path / "d"))
    assert default.name_prefix == "rl_model" and default.verbose == 0


def test_every_n_timesteps_frequency():
    triggered = []

    class Mark(BaseCallback):
        def _on_step(self):
            triggered.append(self.model.num_timesteps)
            return True

    model = FakeModel(cartpole_vec(2))
    model.learn(20, EveryNTimesteps(n_steps=5, callback=Mark()))
    assert triggered == [6, 12, 18]


def test_event_callback_parent_link():
    child = Recorder("c", [])
    parent = EventCallback(child)
    assert child.parent is parent
    model = FakeModel(cartpole_vec(1))
    model.learn(3, parent)
    assert child.model is model and child.n_calls == 0  # only called on events


def test_eval_callback_logs_saves_best_and_stops(tmp_path, capsys):
    train_env = cartpole_vec(1)
    eval_env = cartpole_vec(1)
    model = FakeModel(train_env, good_after=200)
    stop = StopTrainingOnRewardThreshold(reward_threshold=150, verbose=1)
    eval_cb = EvalCallback(eval_env, callback_on_new_best=stop, n_eval_episodes=3, eval_freq=50,
                           log_path=str(tmp_path / "logs"), best_model_save_path=str(tmp_path / "best"))
    model.learn(10000, eval_cb)

    assert model.num_timesteps == 200  # first evaluation with the good policy stops training
    data = np.load(tmp_path / "logs" / "evaluations.npz")
    assert data["timesteps"].tolist() == [50, 100, 150, 200]
    assert data["results"].shape == (4, 3) and data["ep_lengths"].shape == (4, 3)
    assert data["results"][:3].max() < 20 and data["results"][3].min() >= 150
    np.testing.assert_array_equal(data["results"], data["ep_lengths"])  # CartPole: reward 1 per step
    assert (tmp_path / "best" / "best_model.zip").read_text() == "200"
    assert model.saved[-1] == (str(tmp_path / "best" / "best_model"), 200)
    assert eval_cb.best_mean_reward == pytest.approx(data["results"][3].mean())
    assert eval_cb.last_mean_reward == eval_cb.best_mean_reward
    out = capsys.readouterr().out
    assert "Eval num_timesteps=200" in out and "New best mean reward!" in out and "Stopping training" in out


def test_eval_callback_wraps_single_env_and_syncs_vecnormalize(tmp_path):
    train_env = VecNormalize(cartpole_vec(1))
    eval_env = VecNormalize(cartpole_vec(1), training=False)
    model = FakeModel(train_env)
    eval_cb = EvalCallback(eval_env, n_eval_episodes=1, eval_freq=20, verbose=0)
    model.learn(20, eval_cb)
    np.testing.assert_allclose(eval_env.obs_rms.mean, train_env.obs_rms.mean)
    assert eval_env.obs_rms is not train_env.obs_rms and eval_cb.last_mean_reward > 0

    single = EvalCallback(Monitor(gymnasium.make("CartPole-v1"), None), n_eval_episodes=2, eval_freq=5, verbose=0,
                          log_path=str(tmp_path))
    assert isinstance(single.eval_env, DummyVecEnv)
    with pytest.warns(UserWarning, match="not of the same type"):
        FakeModel(VecCheckNan(cartpole_vec(1))).learn(5, single)
    assert np.load(tmp_path / "evaluations.npz")["results"].shape == (1, 2)

    # a normalized training env with an un-normalized eval env is a user mistake that is reported
    unsynced = EvalCallback(cartpole_vec(1), n_eval_episodes=1, eval_freq=1, verbose=0)
    with pytest.raises(ValueError, match="VecNormalize"), pytest.warns(UserWarning, match="not of the same type"):
        FakeModel(train_env).learn(1, unsynced)


def test_stop_on_reward_threshold_needs_eval_parent():
    model = FakeModel(cartpole_vec(1))
    with pytest.raises(AssertionError, match="EvalCallback"):
        model.learn(5, StopTrainingOnRewardThreshold(10))


def test_progress_bar_callback(capsys):
    model = FakeModel(cartpole_vec(2), n_steps=4)
    bar = ProgressBarCallback()
    model.learn(16, bar)
    err = capsys.readouterr().err
    assert "16/16" in err
    assert bar.pbar is None
