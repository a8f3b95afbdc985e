"""HerReplayBuffer (SB3's goal relabelling when sampling) on DQN, SAC, TD3, DDPG; replay_buffer_class /
replay_buffer_kwargs / optimize_memory_usage."""
import numpy as np
import pytest

from sbtf import DDPG, DQN, SAC, TD3
from sbtf.common.bit_flipping_env import BitFlippingEnv
from sbtf.common.buffers import ReplayBuffer, load_buffer
from sbtf.her import HERGoalEnvWrapper
from sbtf.her.her_replay_buffer import GoalLayout, HerReplayBuffer

HER_KWARGS = dict(n_sampled_goal=4, goal_selection_strategy="future")


def success_rate(model, env, n_episodes=50):
    successes = 0
    for episode in range(n_episodes):
        obs, _ = env.reset(seed=1000 + episode)
        while True:
            action, _ = model.predict(obs, deterministic=True)
            obs, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                successes += float(info.get("is_success", terminated))
                break
    return successes / n_episodes


class GoalRewardEnv:
    """A stand-in env for the buffer: ``compute_reward`` is 0 when the goals match, else -1 (as BitFlippingEnv)."""

    def compute_reward(self, achieved, desired, _infos):
        return -(np.abs(achieved - desired).sum(axis=-1) > 0).astype(np.float32)


def fill_episode(buffer, length, first_value, truncated=True):
    """One episode of 1-D observations [obs, achieved, desired] where the achieved goal is the step index."""
    for t in range(length):
        obs = np.array([t, first_value + t, -1.0], np.float32)
        next_obs = np.array([t + 1, first_value + t + 1, -1.0], np.float32)
        last = t == length - 1
        info = {"terminal_observation": next_obs, "TimeLimit.truncated": truncated} if last else {}
        buffer.add(obs, np.zeros(1, np.float32), -1.0, next_obs, 0.0 if (truncated or not last) else 1.0, info)


LAYOUT = GoalLayout(slice(1, 2), slice(2, 3), (1,))


@pytest.mark.parametrize("strategy", ["future", "final", "episode"])
def test_goal_strategies_relabel_from_the_same_episode(strategy):
    buffer = HerReplayBuffer(100, env=GoalRewardEnv(), n_sampled_goal=3, goal_selection_strategy=strategy,
                             goal_layout=LAYOUT)
    assert not buffer.can_sample(1)
    fill_episode(buffer, 5, 100.0)
    fill_episode(buffer, 7, 200.0)
    fill_episode(buffer, 3, 300.0)
    buffer.add(np.zeros(3, np.float32), np.zeros(1), 0.0, np.zeros(3, np.float32), 0.0, {})  # unfinished episode
    assert buffer.n_episode_transitions() == 15 and len(buffer) == 16
    obs, _, rewards, next_obs, _ = buffer.sample(400)
    n_virtual = int(0.75 * 400)
    virtual_goal, achieved = obs[:n_virtual, 2], obs[:n_virtual, 1]
    episode_of = lambda value: np.floor(value / 100.0)  # noqa: E731
    assert np.all(episode_of(virtual_goal) == episode_of(achieved))  # a goal of the same episode
    assert np.all(next_obs[:n_virtual, 2] == virtual_goal)
    if strategy == "future":  # achieved later (or at the transition's own next step, SB3 is inclusive)
        assert np.all(virtual_goal >= achieved + 1)
    if strategy == "final":
        assert set(np.unique(virtual_goal)) <= {105.0, 207.0, 303.0}
    # rewards recomputed by compute_reward (0 where the new goal is the next achieved goal)
    np.testing.assert_array_equal(rewards[:n_virtual], -(next_obs[:n_virtual, 1] != virtual_goal).astype(np.float32))
    assert np.all(obs[n_virtual:, 2] == -1.0)  # the real part keeps the desired goal
    assert np.any(rewards[:n_virtual] == 0.0)


def test_overwritten_episodes_are_dropped_whole():
    buffer = HerReplayBuffer(10, env=GoalRewardEnv(), goal_layout=LAYOUT)
    fill_episode(buffer, 4, 100.0)
    fill_episode(buffer, 4, 200.0)
    fill_episode(buffer, 4, 300.0)  # wraps: overwrites the first episode and half of nothing else
    lengths = buffer._ep_length[:, 0]
    achieved = buffer._obs_t[:, 1]
    assert not np.any((lengths > 0) & (np.floor(achieved / 100) == 1))  # episode 1 is gone entirely
    assert buffer.n_episode_transitions() == 8
    obs = buffer.sample(200)[0]
    assert set(np.floor(obs[:, 1] / 100)) <= {2.0, 3.0}


def test_timeouts_are_not_terminals_unless_asked():
    buffer = HerReplayBuffer(20, env=GoalRewardEnv(), goal_layout=LAYOUT)
    fill_episode(buffer, 3, 100.0, truncated=True)
    assert buffer._dones[:3].max() == 0.0 and buffer.n_episode_transitions() == 3  # finished, not terminal
    sb3_off = HerReplayBuffer(20, env=GoalRewardEnv(), goal_layout=LAYOUT, handle_timeout_termination=False)
    fill_episode(sb3_off, 3, 100.0, truncated=True)
    assert sb3_off._dones[2] == 1.0


def test_her_buffer_errors():
    with pytest.raises(ValueError, match="optimize_memory_usage"):
        HerReplayBuffer(10, optimize_memory_usage=True)
    with pytest.raises(ValueError, match="'future', 'final' or 'episode'"):
        HerReplayBuffer(10, goal_selection_strategy="random")
    buffer = HerReplayBuffer(10, env=GoalRewardEnv(), goal_layout=LAYOUT)
    buffer.add(np.zeros(3, np.float32), np.zeros(1), 0.0, np.zeros(3, np.float32), 0.0, {})
    with pytest.raises(RuntimeError, match="end of the first episode"):
        buffer.sample(4)


def test_sac_with_her_replay_buffer_solves_continuous_bit_flipping():
    n_bits = 4
    env_fn = lambda: HERGoalEnvWrapper(BitFlippingEnv(n_bits, continuous=True, max_steps=n_bits))  # noqa: E731
    model = SAC("MlpPolicy", env_fn(), replay_buffer_class=HerReplayBuffer, replay_buffer_kwargs=HER_KWARGS, seed=0,
                learning_rate=1e-3, learning_starts=100, batch_size=64, ent_coef=0.05,
                policy_kwargs=dict(net_arch=[64, 64]))
    assert isinstance(model.replay_buffer, HerReplayBuffer) and model.replay_buffer.n_sampled_goal == 4
    before = success_rate(model, env_fn())
    model.learn(2000)
    after = success_rate(model, env_fn())
    assert before < 0.5 and after >= 0.9, (before, after)


def test_dqn_with_her_replay_buffer_solves_discrete_bit_flipping():
    n_bits = 6
    env_fn = lambda: HERGoalEnvWrapper(BitFlippingEnv(n_bits, max_steps=n_bits))  # noqa: E731
    model = DQN("MlpPolicy", env_fn(), replay_buffer_class=HerReplayBuffer, replay_buffer_kwargs=HER_KWARGS, seed=0,
                learning_rate=1e-3, learning_starts=200, exploration_fraction=0.5, exploration_final_eps=0.05,
                batch_size=64, target_network_update_freq=200, policy_kwargs=dict(net_arch=[64]))
    before = success_rate(model, env_fn())
    model.learn(2000)
    after = success_rate(model, env_fn())
    assert before < 0.3 and after >= 0.9, (before, after)


@pytest.mark.parametrize("algo,kwargs", [
    (TD3, dict(learning_starts=50, train_freq=10, gradient_steps=10, batch_size=32, random_exploration=0.1)),
    (DDPG, dict(nb_rollout_steps=50, nb_train_steps=20, batch_size=32, random_exploration=0.1)),
])
def test_td3_and_ddpg_train_with_her_replay_buffer_and_save_load(tmp_path, algo, kwargs):
    env_fn = lambda: HERGoalEnvWrapper(BitFlippingEnv(5, continuous=True, max_steps=5))  # noqa: E731
    model = algo("MlpPolicy", env_fn(), replay_buffer_class=HerReplayBuffer,
                 replay_buffer_kwargs=dict(n_sampled_goal=2, goal_selection_strategy="final"), seed=0, **kwargs)
    model.learn(300)
    assert isinstance(model.replay_buffer, HerReplayBuffer) and len(model.replay_buffer) == 300
    model.save(tmp_path / "model.zip")
    loaded = algo.load(tmp_path / "model.zip", env=env_fn())
    assert loaded.replay_buffer_class is HerReplayBuffer
    assert loaded.replay_buffer_kwargs == dict(n_sampled_goal=2, goal_selection_strategy="final")
    obs = np.stack([env_fn().reset(seed=i)[0] for i in range(4)])
    np.testing.assert_allclose(loaded.predict(obs)[0], model.predict(obs)[0], atol=1e-6)
    loaded.learn(60)  # a new buffer of the saved class, fed by the new env
    assert isinstance(loaded.replay_buffer, HerReplayBuffer) and len(loaded.replay_buffer) == 60


@pytest.mark.slow
def test_sac_with_her_replay_buffer_solves_six_bits():
    n_bits = 6
    env_fn = lambda: HERGoalEnvWrapper(BitFlippingEnv(n_bits, continuous=True, max_steps=n_bits))  # noqa: E731
    model = SAC("MlpPolicy", env_fn(), replay_buffer_class=HerReplayBuffer, replay_buffer_kwargs=HER_KWARGS, seed=0,
                learning_rate=1e-3, learning_starts=100, batch_size=64, ent_coef=0.05,
                policy_kwargs=dict(net_arch=[64, 64]))
    model.learn(8000)
    assert success_rate(model, env_fn(), n_episodes=100) >= 0.8


# ------------------------------------------------------------------------------------------ optimize_memory_usage
@pytest.mark.parametrize("n_envs,size", [(1, 7), (1, 50), (3, 12), (3, 50)])
def test_memory_efficient_buffer_matches_the_plain_one(tmp_path, n_envs, size):
    rng = np.random.default_rng(0)
    plain = ReplayBuffer(size)
    compact = ReplayBuffer(size, optimize_memory_usage=True, n_envs=n_envs)
    obs = rng.normal(size=(n_envs, 2)).astype(np.float32)
    for _ in range(40):
        following = rng.normal(size=(n_envs, 2)).astype(np.float32)
        ended = rng.random(n_envs) < 0.2
        next_obs = following.copy()
        next_obs[ended] = rng.normal(size=(int(ended.sum()), 2))  # a terminal observation, not the reset one
        action, reward = rng.normal(size=(n_envs, 1)), rng.normal(size=n_envs)
        plain.extend(obs, action, reward, next_obs, ended)
        compact.extend(obs, action, reward, next_obs, ended)
        obs = following
        valid = np.flatnonzero(compact._valid[:len(compact)])
        assert len(compact) - valid.size <= n_envs  # only the oldest slots are lost to next observations
        np.testing.assert_array_equal(compact._next_observations(valid), plain._obs_tp1[valid])
        np.testing.assert_array_equal(compact._obs_t[valid], plain._obs_t[valid])
    assert compact._obs_tp1 is None  # one observation array
    batch = compact.sample_batch(64)
    assert batch.observations.shape == (64, 2)
    compact.save(tmp_path / "buffer.npz")
    loaded = load_buffer(tmp_path / "buffer.npz")
    valid = np.flatnonzero(compact._valid[:len(compact)])
    assert loaded.optimize_memory_usage and loaded.n_envs == n_envs
    np.testing.assert_array_equal(loaded._next_observations(valid), compact._next_observations(valid))


def test_optimize_memory_usage_on_the_algorithms(tmp_path):
    model = SAC("MlpPolicy", "Pendulum-v1", optimize_memory_usage=True, learning_starts=50, seed=0)
    assert model.replay_buffer.optimize_memory_usage and model.replay_buffer._obs_tp1 is None
    model.learn(120)
    assert len(model.replay_buffer) == 120
    model.save(tmp_path / "sac.zip")
    assert SAC.load(tmp_path / "sac.zip").optimize_memory_usage
    dqn = DQN("MlpPolicy", "CartPole-v1", optimize_memory_usage=True, learning_starts=50)
    dqn.learn(100)
    assert dqn.replay_buffer.optimize_memory_usage
    with pytest.raises(ValueError, match="prioritized_replay"):
        DQN("MlpPolicy", "CartPole-v1", optimize_memory_usage=True, prioritized_replay=True)


def test_replay_buffer_class_of_the_users_and_bad_kwargs(tmp_path):
    class CountingBuffer(ReplayBuffer):
        def __init__(self, size, n_envs=1, tag=""):
            super().__init__(size)
            self.tag, self.n_envs_seen, self.added = tag, n_envs, 0

        def extend(self, *args):
            self.added += 1
            super().extend(*args)

        def add(self, *args):
            self.added += 1
            super().add(*args)

    model = TD3("MlpPolicy", "Pendulum-v1", replay_buffer_class=CountingBuffer, replay_buffer_kwargs=dict(tag="x"),
                learning_starts=10, train_freq=10, gradient_steps=1)
    model.learn(30)
    assert model.replay_buffer.tag == "x" and model.replay_buffer.added == 30
    model.save(tmp_path / "td3.zip")
    with pytest.raises(ValueError, match="custom_objects"):
        TD3.load(tmp_path / "td3.zip")
    loaded = TD3.load(tmp_path / "td3.zip", custom_objects=dict(replay_buffer_class=CountingBuffer))
    assert loaded.replay_buffer_class is CountingBuffer
    with pytest.raises(ValueError, match="could not create its replay buffer"):
        SAC("MlpPolicy", "Pendulum-v1", replay_buffer_kwargs=dict(no_such_option=1))
    with pytest.raises(ValueError, match="derive from"):
        SAC("MlpPolicy", "Pendulum-v1", replay_buffer_class=dict)


def test_dict_goal_observations_are_stored_per_key_and_relabelled_identically():
    import gymnasium as gym

    from sbtf.common.envs.dict_obs import layout_of
    from sbtf.common.storage.obs_storage import PackedObsArray
    from sbtf.her.her_replay_buffer import goal_layout_from_space

    space = gym.spaces.Dict({"observation": gym.spaces.Box(0, 255, (6, 6, 1), np.uint8),
                             "achieved_goal": gym.spaces.Box(0, 255, (2,), np.uint8),
                             "desired_goal": gym.spaces.Box(0, 255, (2,), np.uint8)})
    layout = layout_of(space)
    native = HerReplayBuffer(40, env=GoalRewardEnv(), n_envs=2, observation_space=space)
    flat = HerReplayBuffer(40, env=GoalRewardEnv(), n_envs=2, goal_layout=goal_layout_from_space(space))
    space.seed(0)
    obs = layout.pack({key: np.stack([space[key].sample() for _ in range(2)]) for key in layout.keys})
    for step in range(30):
        next_obs = layout.pack({key: np.stack([space[key].sample() for _ in range(2)]) for key in layout.keys})
        ends = [step % 5 == 4, step % 7 == 6]
        infos = [{"TimeLimit.truncated": True} if end else {} for end in ends]
        for buffer in (native, flat):
            buffer.store_step(obs, np.ones((2, 1), np.float32), np.full(2, -1.0, np.float32), next_obs,
                              np.zeros(2, np.float32), infos)
        obs = next_obs
    assert isinstance(native._obs_t, PackedObsArray) and all(a.dtype == np.uint8 for a in native._obs_t.arrays)
    assert native.observation_nbytes * 4 == flat.observation_nbytes
    np.random.seed(3)
    expected = flat.sample(64)
    np.random.seed(3)
    for x, y in zip(expected, native.sample(64)):
        assert x.dtype == y.dtype
        np.testing.assert_array_equal(x, y)
    assert np.any(expected[2] == 0.0)  # some relabelled goals were reached


@pytest.mark.parametrize("channel_first", [True, False])
def test_bit_flipping_env_image_observations(channel_first):
    """SB3's ``BitFlippingEnv(image_obs_space=True)``: 36x36 greyscale images whose first n_bits pixels are the
    bits; the reward reads the bits back (one observation or a batch)."""
    from sbtf.common.bit_flipping_env import BitFlippingEnv
    from sbtf.common.env_checker import check_env

    env = BitFlippingEnv(n_bits=4, image_obs_space=True, channel_first=channel_first)
    shape = (1, 36, 36) if channel_first else (36, 36, 1)
    obs, _ = env.reset(seed=0)
    assert all(obs[key].shape == shape and obs[key].dtype == np.uint8 for key in obs)
    np.testing.assert_array_equal(obs["observation"].reshape(-1)[:4], env.state.astype(np.uint8) * 255)
    assert not obs["observation"].reshape(-1)[4:].any()
    assert env.compute_reward(obs["desired_goal"], obs["desired_goal"], None) == 0.0
    rewards = env.compute_reward(np.stack([obs["achieved_goal"], obs["desired_goal"]]),
                                 np.stack([obs["desired_goal"], obs["desired_goal"]]), None)
    expected_first = 0.0 if env.state.all() else -1.0
    np.testing.assert_array_equal(rewards, [expected_first, 0.0])
    for bit in np.flatnonzero(env.state == 0):
        obs, reward, terminated, truncated, info = env.step(bit)
    assert reward == 0.0 and terminated and info["is_success"]
    check_env(BitFlippingEnv(n_bits=4, image_obs_space=True, channel_first=channel_first), warn=False)
    with pytest.raises(ValueError, match="cannot both be set"):
        BitFlippingEnv(n_bits=4, image_obs_space=True, discrete_obs_space=True)
