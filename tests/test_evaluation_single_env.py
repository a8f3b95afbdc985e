"""evaluate_policy on a plain (non-vectorized) env steps it as stable-baselines 2 did: ``predict`` on one
observation, the unbatched action it returns passed to ``env.step``."""
import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from sbtf.bench import Monitor
from sbtf.common.evaluation import evaluate_policy


class ShapeCheckingEnv(gymnasium.Env):
    """Records the shape of every action; 3-step episodes with reward 1 per step."""

    def __init__(self, action_space):
        self.observation_space = spaces.Box(-1, 1, (2,), np.float32)
        self.action_space = action_space
        self.shapes = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.shapes.append(np.shape(action))
        self.t += 1
        return np.zeros(2, np.float32), 1.0, self.t >= 3, False, {}


class OldAPIEnv:
    """An env of the old gym API (reset -> obs, 4-tuple step)."""

    observation_space = spaces.Box(-1, 1, (2,), np.float32)
    action_space = spaces.Discrete(2)

    def reset(self):
        self.t = 0
        return np.zeros(2, np.float32)

    def step(self, action):
        assert np.shape(action) == ()
        self.t += 1
        return np.zeros(2, np.float32), 2.0, self.t >= 2, {}


class UnbatchingModel:
    """Answers like an sbtf model: a single observation gets a single action."""

    def __init__(self, action_space):
        self.action_space = action_space
        self.observation_shapes = []

    def predict(self, obs, state=None, mask=None, deterministic=False):
        self.observation_shapes.append(np.shape(obs))
        sample = self.action_space.sample()
        return sample, state


@pytest.mark.parametrize("space, shape", [(spaces.Discrete(3), ()), (spaces.Box(-1, 1, (1,), np.float32), (1,)),
                                          (spaces.MultiDiscrete([2, 3]), (2,))])
def test_plain_env_gets_unbatched_actions(space, shape):
    env = ShapeCheckingEnv(space)
    model = UnbatchingModel(space)
    with pytest.warns(UserWarning, match="not wrapped with a ``Monitor``"):
        mean, std = evaluate_policy(model, env, n_eval_episodes=2)
    assert (mean, std) == (3.0, 0.0)
    assert set(env.shapes) == {shape} and set(model.observation_shapes) == {(2,)}


def test_real_models_act_unbatched_on_a_plain_env():
    from sbtf import A2C
    from sbtf.common.identity_env import IdentityEnvBox

    seen = []

    class Recording(IdentityEnvBox):
        def step(self, action):
            seen.append(np.shape(action))
            return super().step(action)

    model = A2C("MlpPolicy", IdentityEnvBox(ep_length=5), n_steps=5, seed=0)
    rewards, lengths = evaluate_policy(model, Monitor(Recording(ep_length=5), None), n_eval_episodes=2,
                                       return_episode_rewards=True)
    assert lengths == [5, 5] and set(seen) == {(1,)}


def test_old_api_env_and_callback_locals():
    actions = []
    rewards, lengths = evaluate_policy(UnbatchingModel(spaces.Discrete(2)), OldAPIEnv(), n_eval_episodes=3,
                                       return_episode_rewards=True,
                                       callback=lambda lcl, _glb: actions.append(lcl["action"]))
    assert rewards == [4.0, 4.0, 4.0] and lengths == [2, 2, 2] and len(actions) == 6


def test_monitored_plain_env_counts_whole_episodes_across_lost_lives():
    class LifeLoss(gymnasium.Wrapper):
        """A 'done' every 2 steps, while the monitored 6-step episode goes on underneath."""

        def __init__(self, env):
            super().__init__(env)
            self.real_done, self.k, self.last = True, 0, None

        def reset(self, **kwargs):
            if self.real_done:
                self.k = 0
                self.real_done = False
                return self.env.reset(**kwargs)
            return self.last, {}

        def step(self, action):
            obs, reward, terminated, truncated, info = self.env.step(action)
            self.real_done = terminated or truncated
            self.k += 1
            self.last = obs
            return obs, reward, self.real_done or self.k % 2 == 0, False, info

    class SixSteps(ShapeCheckingEnv):
        def step(self, action):
            obs, reward, _, truncated, info = super().step(action)
            return obs, reward, self.t >= 6, truncated, info

    env = LifeLoss(Monitor(SixSteps(spaces.Discrete(2)), None))
    rewards, lengths = evaluate_policy(UnbatchingModel(spaces.Discrete(2)), env, n_eval_episodes=2,
                                       return_episode_rewards=True)
    assert rewards == [6.0, 6.0] and lengths == [6, 6]
