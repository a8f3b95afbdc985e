"""stable-baselines3's HER: ``SAC / TD3 / DDPG("MultiInputPolicy", goal_env, replay_buffer_class=HerReplayBuffer,
replay_buffer_kwargs=...)`` with ``sbtf.sb3``'s classes, on the Dict observations of a goal env (BitFlippingEnv)."""
from __future__ import annotations

import numpy as np
import pytest

import sbtf.sb3
from sbtf.common.bit_flipping_env import BitFlippingEnv
from sbtf.common.noise import NormalActionNoise
from sbtf.sb3 import DDPG, SAC, TD3, HerReplayBuffer
from sbtf.sb3.her import GoalSelectionStrategy
from test_her_replay_buffer import success_rate

HER_KWARGS = dict(n_sampled_goal=4, goal_selection_strategy="future")


def test_her_replay_buffer_is_served_where_sb3_has_it():
    from sbtf.her.her_replay_buffer import HerReplayBuffer as SbtfHerReplayBuffer
    from sbtf.sb3.her.goal_selection_strategy import GoalSelectionStrategy as Strategy
    from sbtf.sb3.her.her_replay_buffer import HerReplayBuffer as ModulePath

    assert HerReplayBuffer is SbtfHerReplayBuffer is ModulePath and sbtf.sb3.HerReplayBuffer is HerReplayBuffer
    assert Strategy is GoalSelectionStrategy and "HerReplayBuffer" in sbtf.sb3.__all__


def test_sac_with_her_solves_continuous_bit_flipping():
    n_bits = 4
    env_fn = lambda: BitFlippingEnv(n_bits, continuous=True, max_steps=n_bits)  # noqa: E731
    model = SAC("MultiInputPolicy", env_fn(), replay_buffer_class=HerReplayBuffer, replay_buffer_kwargs=HER_KWARGS,
                seed=0, learning_rate=1e-3, learning_starts=100, batch_size=64, ent_coef=0.05,
                policy_kwargs=dict(net_arch=[64, 64]))
    buffer = model.replay_buffer
    assert isinstance(buffer, HerReplayBuffer) and buffer.n_sampled_goal == 4
    assert buffer.goal_selection_strategy == GoalSelectionStrategy.FUTURE
    before = success_rate(model, env_fn())
    model.learn(2000)
    after = success_rate(model, env_fn())
    assert before < 0.5 and after >= 0.9, (before, after)
    # relabelled goals: far more successes (reward 0) in a sampled minibatch than among the real transitions
    real = np.mean([reward == 0 for reward in buffer._rewards[:len(buffer)]])
    sampled = np.mean(buffer.sample_batch(512).rewards == 0)
    assert sampled > real


def test_dqn_with_her_solves_discrete_bit_flipping():
    """stable-baselines3's DQN (sbtf.sb3.DQN) takes the same buffer through the same base."""
    env_fn = lambda: BitFlippingEnv(4, max_steps=4)  # noqa: E731
    model = sbtf.sb3.DQN("MultiInputPolicy", env_fn(), replay_buffer_class=HerReplayBuffer,
                         replay_buffer_kwargs=HER_KWARGS, learning_rate=1e-3, learning_starts=200,
                         exploration_fraction=0.5, exploration_final_eps=0.05, batch_size=64,
                         target_update_interval=200, policy_kwargs=dict(net_arch=[64]), seed=0)
    before = success_rate(model, env_fn())
    model.learn(2000)
    after = success_rate(model, env_fn())
    assert before < 0.3 and after >= 0.9, (before, after)


@pytest.mark.parametrize("cls", [TD3, DDPG])
def test_td3_and_ddpg_train_with_her_and_save_load(tmp_path, cls):
    env_fn = lambda: BitFlippingEnv(5, continuous=True, max_steps=5)  # noqa: E731
    model = cls("MultiInputPolicy", env_fn(), replay_buffer_class=HerReplayBuffer,
                replay_buffer_kwargs=dict(n_sampled_goal=2, goal_selection_strategy="final"), learning_starts=50,
                batch_size=32, train_freq=10, gradient_steps=10, seed=0, policy_kwargs=dict(net_arch=[32]),
                action_noise=NormalActionNoise(np.zeros(5), 0.1 * np.ones(5)))
    model.learn(300)
    assert isinstance(model.replay_buffer, HerReplayBuffer) and len(model.replay_buffer) == 300
    model.save(tmp_path / "model.zip")
    loaded = cls.load(tmp_path / "model.zip", env=env_fn())
    assert loaded.replay_buffer_class is HerReplayBuffer
    assert loaded.replay_buffer_kwargs == dict(n_sampled_goal=2, goal_selection_strategy="final")
    env = env_fn()
    obs = {key: np.stack([env.reset(seed=i)[0][key] for i in range(4)]) for key in env.observation_space.spaces}
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True)[0],
                                  model.predict(obs, deterministic=True)[0])
    model.save_replay_buffer(tmp_path / "buffer")
    loaded.load_replay_buffer(tmp_path / "buffer")
    assert isinstance(loaded.replay_buffer, HerReplayBuffer) and len(loaded.replay_buffer) == 300
    loaded.learn(60, reset_num_timesteps=False)  # the loaded episodes and the new env's go on together
    assert len(loaded.replay_buffer) == 360


@pytest.mark.slow
def test_sac_with_her_solves_six_bits():
    n_bits = 6
    env_fn = lambda: BitFlippingEnv(n_bits, continuous=True, max_steps=n_bits)  # noqa: E731
    model = SAC("MultiInputPolicy", env_fn(), replay_buffer_class=HerReplayBuffer, replay_buffer_kwargs=HER_KWARGS,
                seed=0, learning_rate=1e-3, learning_starts=100, batch_size=64, ent_coef=0.05,
                policy_kwargs=dict(net_arch=[64, 64]))
    model.learn(8000)
    assert success_rate(model, env_fn(), n_episodes=100) >= 0.8


def test_importing_sb3_her_class_points_to_the_buffer():
    """``from sbtf.sb3 import HER`` fails as SB3's does, saying what replaced it; SB2's HER stays at ``sbtf.HER``."""
    with pytest.raises(ImportError, match="replay_buffer_class=HerReplayBuffer.*documentation"):
        from sbtf.sb3 import HER  # noqa: F401
    import sbtf

    assert sbtf.HER.__module__.startswith("sbtf.her")
