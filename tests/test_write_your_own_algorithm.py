"""docs/write_your_own_algorithm.md: the REINFORCE-with-baseline on the page is under 80 lines, runs as written,
acts with its trained weights, round-trips every constructor argument through save/load and (slow) learns
CartPole."""
from __future__ import annotations

import inspect
import re
from pathlib import Path

import numpy as np
import pytest

PAGE = Path(__file__).resolve().parents[1] / "docs" / "write_your_own_algorithm.md"


def _first_code_block() -> str:
    blocks = re.findall(r"^```python\n(.*?)^```", PAGE.read_text(), flags=re.S | re.M)
    assert blocks, f"{PAGE} has no python code block"
    return blocks[0]


@pytest.fixture(scope="module")
def reinforce_class():
    namespace: dict = {"__name__": "write_your_own_algorithm"}
    exec(compile(_first_code_block(), str(PAGE), "exec"), namespace)
    return namespace["Reinforce"]


def test_the_algorithm_is_under_80_lines():
    assert len(_first_code_block().splitlines()) < 80


def test_short_run_trains_the_acting_weights(reinforce_class):
    from sbtf.common.env_util import make_vec_env

    model = reinforce_class("MlpPolicy", make_vec_env("CartPole-v1", n_envs=2, seed=0), n_steps=8, seed=0)
    obs = np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32)
    before = model.action_probability(obs)
    model.learn(256)
    assert model.num_timesteps == 256
    after = model.action_probability(obs)
    assert np.max(np.abs(after - before)) > 1e-4  # acting moved with the trained weights, nothing declared
    flat_tf = model.policy_tf(obs)[0].numpy()  # the TF forward agrees with the NumPy acting copies
    np.testing.assert_allclose(model.policy_tf.flat_params(obs), flat_tf, rtol=1e-5, atol=1e-6)


def test_every_constructor_argument_round_trips(reinforce_class, tmp_path):
    chosen = dict(gamma=0.95, n_steps=12, learning_rate=1e-3, vf_coef=0.25, seed=3,
                  policy_kwargs=dict(net_arch=[dict(pi=[8], vf=[8])]))
    model = reinforce_class("MlpPolicy", "CartPole-v1", **chosen)
    model.save(tmp_path / "reinforce.zip")
    loaded = reinforce_class.load(tmp_path / "reinforce.zip")
    for name in inspect.signature(reinforce_class.__init__).parameters:
        if name in chosen:
            assert getattr(loaded, name) == chosen[name], name
    obs = np.zeros((3, 4), np.float32)
    np.testing.assert_allclose(loaded.action_probability(obs), model.action_probability(obs), rtol=1e-6)


@pytest.mark.slow
def test_it_learns_cartpole(reinforce_class):
    from sbtf.common.env_util import make_vec_env
    from sbtf.common.evaluation import evaluate_policy

    model = reinforce_class("MlpPolicy", make_vec_env("CartPole-v1", n_envs=4, seed=0), n_steps=16, seed=0)
    model.learn(30_000)
    mean_reward, _ = evaluate_policy(model, make_vec_env("CartPole-v1", n_envs=1, seed=10), n_eval_episodes=10)
    assert mean_reward >= 400, mean_reward
