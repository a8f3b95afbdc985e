"""The TF.js CartPole demo in a real headless Chromium.

A PPO2 agent is behaviour-cloned from a hand-written CartPole controller (noisy expert rollouts, ~10 s), exported
with ``write_demo`` (model + page + vendored tf.min.js), served on 127.0.0.1 and opened in Debian's Chromium driven
by playwright-core (``converters/web/tools/browser_check.js``). The test checks that

* the page's policy (policy.js on @tensorflow/tfjs) returns the actions of ``predict(deterministic=True)`` on a
  fixed batch of observations (and the same logits / probabilities / values to 1e-4);
* the page's JavaScript CartPole follows gymnasium's CartPole-v1 physics step for step;
* the agent keeps the pole up for the full 500 steps in the page, and the page says so;

and saves a screenshot (its path is printed). The RL Zoo's stable-baselines3 PPO and DQN CartPole agents
(../shared/fixtures/sb3_zoo, loaded from their zips without PyTorch; skipped with a reason when absent) play the
same page: real SB3's actions and values / Q-values on the fixture's inputs, and the full 500 steps.

Needs, and otherwise skips saying which is missing: Chromium at /usr/bin/chromium (Debian package ``chromium``;
``SBTF_CHROMIUM`` overrides the path), Node.js, and ``npm install`` run in converters/web (playwright-core,
@tensorflow/tfjs and the vendored vendor/tf.min.js), plus the ``export`` extra (tensorflowjs).
"""
from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

# tensorflowjs -> tensorflow_decision_forests imports IPython for a welcome message when stdout is captured
os.environ.setdefault("TFDF_DISABLE_WELCOME_MESSAGE", "1")

WEB = Path(__file__).resolve().parents[1] / "converters" / "web"
CHROMIUM = os.environ.get("SBTF_CHROMIUM", "/usr/bin/chromium")
EXPERT_GAINS = np.array([1.0, 1.0, 10.0, 2.0])  # push right when 1*x + 1*x_dot + 10*theta + 2*theta_dot > 0


def _requirements():
    pytest.importorskip("tensorflowjs", reason="the TF.js export needs tensorflowjs: pip install 'sbtf[export]'")
    if not os.path.isfile(CHROMIUM):
        pytest.skip(f"no Chromium at {CHROMIUM}: install Debian's package (apt-get install -y chromium) or set "
                    "SBTF_CHROMIUM")
    node = shutil.which("node")
    if node is None:
        pytest.skip("Node.js (`node`) is not installed; the browser is driven by playwright-core from Node")
    for package in ("playwright-core", "@tensorflow/tfjs"):
        if not (WEB / "node_modules" / package / "package.json").is_file():
            pytest.skip(f"npm package {package} is missing: run `npm install` in {WEB}")
    from sbtf_converters.export import find_tfjs_bundle
    if find_tfjs_bundle(str(WEB)) is None:
        pytest.skip(f"vendor/tf.min.js is missing: run `npm install` (or `npm run vendor`) in {WEB}")
    return node


def _expert(obs) -> int:
    return int(np.dot(EXPERT_GAINS, obs) > 0)


def _cloned_agent():
    """PPO2 MlpPolicy behaviour-cloned from the expert on rollouts where 25% of the played actions are flipped
    (the labels stay the expert's), so that the data covers the states a slightly-off policy reaches."""
    from sbtf import PPO2
    from sbtf.gail import ExpertDataset

    env = gym.make("CartPole-v1")
    rng = np.random.default_rng(0)
    observations, actions, starts, returns = [], [], [], []
    for episode in range(12):
        obs, _ = env.reset(seed=1000 + episode)
        first, total = True, 0.0
        while True:
            action = _expert(obs)
            observations.append(obs)
            actions.append(action)
            starts.append(first)
            first = False
            played = action if rng.random() > 0.25 else 1 - action
            obs, reward, terminated, truncated, _ = env.step(played)
            total += reward
            if terminated or truncated:
                break
        returns.append(total)
    traj = dict(obs=np.asarray(observations, np.float32), actions=np.asarray(actions).reshape(-1, 1),
                rewards=np.ones(len(actions)), episode_returns=np.asarray(returns), episode_starts=np.asarray(starts))
    model = PPO2("MlpPolicy", "CartPole-v1", seed=0)
    model.pretrain(ExpertDataset(traj_data=traj, batch_size=64, verbose=0), n_epochs=20, learning_rate=2e-3)
    return model


def _episode_length(model, seed: int) -> int:
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=seed)
    for step in range(1, 501):
        obs, _, terminated, truncated, _ = env.step(int(model.predict(obs, deterministic=True)[0]))
        if terminated or truncated:
            return step
    return 500


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # pylint: disable=redefined-builtin
        pass


def _gymnasium_trajectory(state, actions):
    env = gym.make("CartPole-v1").unwrapped
    env.reset(seed=0)
    env.state = np.array(state, dtype=np.float64)
    states, flags = [], []
    for action in actions:
        _, _, terminated, truncated, _ = env.step(int(action))
        states.append(np.array(env.state, dtype=np.float64))
        flags.append([bool(terminated), bool(truncated)])
        if terminated:
            break
    return np.array(states), flags


def _play_in_chromium(node, model, tmp_path, observations, physics=None, seed: int = 3) -> dict:
    """Write the demo of ``model`` (``write_demo``), serve it on 127.0.0.1 and open it in Chromium: the page's
    policy on ``observations``, its CartPole on ``physics`` (``{state, actions}``) and one episode from ``seed``.
    Returns browser_check.js's JSON result (a screenshot is written to tmp_path / "cartpole_demo.png")."""
    from sbtf_converters.export import write_demo

    demo = tmp_path / "demo"
    index = write_demo(model, demo)
    assert Path(index).is_file() and (demo / "vendor" / "tf.min.js").is_file()
    screenshot = tmp_path / "cartpole_demo.png"
    handler = functools.partial(_QuietHandler, directory=str(demo))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        request = {"url": f"http://127.0.0.1:{port}/index.html?seed={seed}&episodes=1&speed=max",
                   "observations": np.asarray(observations).tolist(), "screenshot": str(screenshot),
                   "timeout_ms": 60000, "chromium": CHROMIUM}
        if physics is not None:
            request["physics"] = physics
        request_path = tmp_path / "request.json"
        request_path.write_text(json.dumps(request))
        proc = subprocess.run([node, str(WEB / "tools" / "browser_check.js"), str(request_path)],
                              capture_output=True, text=True, timeout=120, cwd=str(WEB))
    finally:
        server.shutdown()
        server.server_close()
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout)
    print(f"\nscreenshot of the demo page: {screenshot}")
    print(f"TF.js {result['tfjs_version']} on the {result['backend']} backend in {result['user_agent']}")
    return result


def test_cartpole_demo_in_chromium(tmp_path):
    node = _requirements()

    model = _cloned_agent()
    lengths = [_episode_length(model, seed) for seed in (0, 1, 2)]
    assert min(lengths) == 500, f"the behaviour-cloned agent is not good enough in Python: {lengths}"

    rng = np.random.default_rng(7)
    observations = rng.uniform([-2.0, -2.0, -0.2, -2.0], [2.0, 2.0, 0.2, 2.0], (32, 4)).astype(np.float32)
    start = [0.02, -0.1, 0.03, 0.2]
    actions = rng.integers(0, 2, 80).tolist()
    screenshot = tmp_path / "cartpole_demo.png"
    result = _play_in_chromium(node, model, tmp_path, observations, {"state": start, "actions": actions})

    # the page's policy gives predict()'s actions
    predictions = result["predictions"]
    want_actions, _ = model.predict(observations, deterministic=True)
    np.testing.assert_array_equal(np.asarray(predictions["action"]["data"]), want_actions)
    np.testing.assert_allclose(np.reshape(predictions["probabilities"]["data"], (32, 2)),
                               model.action_probability(observations), atol=1e-4)
    np.testing.assert_allclose(predictions["value"]["data"], model.policy_tf.value(observations), atol=1e-4)

    # the page's CartPole is gymnasium's
    want_states, want_flags = _gymnasium_trajectory(start, actions)
    got_states = np.asarray(result["physics"]["states"])
    assert got_states.shape == want_states.shape, (got_states.shape, want_states.shape)
    np.testing.assert_allclose(got_states, want_states, rtol=1e-12, atol=1e-12)
    assert result["physics"]["flags"] == want_flags
    assert want_flags[-1][0], "the random action sequence should end the episode (pole falls)"

    # the agent balances the pole for the whole episode in the page
    assert result["episode"] == {"seed": 3, "steps": 500, "terminated": False, "truncated": True}
    assert result["dom"]["steps"] == "500" and result["dom"]["status_class"] == "ok"
    assert "Balanced for 500 steps" in result["dom"]["status"]
    assert result["console_errors"] == []

    from PIL import Image
    image = np.asarray(Image.open(screenshot).convert("RGB"))
    assert image.shape[0] > 300 and image.shape[1] > 500
    pole = np.all(np.abs(image.astype(int) - [0xca, 0x98, 0x65]) <= 2, axis=-1)
    assert pole.sum() > 500, "the pole is not drawn on the canvas"


#: stable-baselines3 agents of the RL Zoo (../shared/fixtures/sb3_zoo): run -> (class path, the output SB3 computed)
SB3_AGENTS = {"ppo/CartPole-v1_1": ("sbtf.sb3:PPO", "values", "value"),
              "dqn/CartPole-v1_1": ("sbtf.sb3:DQN", "q_values", "q_values")}


@pytest.mark.parametrize("run", sorted(SB3_AGENTS))
def test_rl_zoo_sb3_agent_plays_in_chromium(run, tmp_path):
    """A stable-baselines3 agent of the RL Zoo, loaded from its zip (no PyTorch), plays CartPole in the browser: the
    page's TF.js policy gives real SB3's actions (exactly) and values / Q-values (to 1e-4) on the fixture's inputs,
    and balances the pole for the full 500 steps, as the zoo's benchmark lists for it."""
    import importlib
    import warnings

    from conftest import shared_fixture

    node = _requirements()
    class_path, sb3_key, output = SB3_AGENTS[run]
    module, name = class_path.split(":")
    expected = json.loads(shared_fixture("sb3_zoo", "expected_outputs.json").read_text())["agents"][run]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the old file's schedules are code: sbtf's defaults (acting unaffected)
        model = getattr(importlib.import_module(module), name).load(
            str(shared_fixture("sb3_zoo", run, "CartPole-v1.zip")))
    observations = np.asarray(expected["obs"], dtype=np.float32)

    result = _play_in_chromium(node, model, tmp_path, observations, seed=5)

    predictions = result["predictions"]
    want = np.asarray(expected["deterministic_actions"])
    np.testing.assert_array_equal(np.asarray(predictions["action"]["data"]), want)
    np.testing.assert_array_equal(np.asarray(predictions["action"]["data"]),
                                  model.predict(observations, deterministic=True)[0])
    np.testing.assert_allclose(np.reshape(predictions[output]["data"], np.shape(expected[sb3_key])),
                               expected[sb3_key], rtol=1e-4, atol=1e-4)
    assert result["episode"] == {"seed": 5, "steps": 500, "terminated": False, "truncated": True}
    assert "Balanced for 500 steps" in result["dom"]["status"]
    assert result["console_errors"] == []
