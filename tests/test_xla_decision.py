"""When sbtf XLA-compiles a train step (docs/benchmarks.md, "When sbtf uses XLA"), and that the non-XLA CNN train
steps make the same update as running the same maths op by op in eager Keras. No timing here: speed lives in
benchmarks/."""
import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from sbtf import A2C, DQN, PPO2
from sbtf.common.compile.fast_call import (XLA_MIN_GRADIENT_STEPS, TrainStep, decide_jit_compile, gradient_step_plan,
                                   has_convolution, on_gpu, xla_pays_off)
from sbtf.common.tf_layers import Conv
from sbtf.common.vec_env import DummyVecEnv

ON_CPU = not on_gpu()


class ImageEnv(gym.Env):
    """Random 36x36 grey frames (the smallest the Nature CNN takes), three actions."""

    observation_space = gym.spaces.Box(0, 255, (36, 36, 1), np.uint8)
    action_space = gym.spaces.Discrete(3)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._frame(), {}

    def step(self, action):
        self.t += 1
        return self._frame(), float(action == 1), self.t >= 10, False, {}

    def _frame(self):
        return self.np_random.integers(0, 255, (36, 36, 1), dtype=np.uint8)


def _image_env():
    return DummyVecEnv([ImageEnv, ImageEnv])


def _vector_env():
    return DummyVecEnv([lambda: gym.make("CartPole-v1")] * 2)


def test_the_rule_looks_at_the_layers_and_the_device():
    cnn = PPO2("CnnPolicy", _image_env(), n_steps=4, nminibatches=1, seed=0).policy_tf
    mlp = PPO2("MlpPolicy", _vector_env(), n_steps=4, nminibatches=1, seed=0).policy_tf
    assert has_convolution([cnn]) and not has_convolution([mlp])
    assert xla_pays_off([mlp], gpu=False) and xla_pays_off([mlp], gpu=True)
    assert not xla_pays_off([cnn], gpu=False)
    assert xla_pays_off([cnn], gpu=True)
    # a user's network made of Keras or sbtf convolution layers, without sbtf's feature_extraction flag
    user_net = tf.keras.Sequential([tf.keras.layers.Conv2D(4, 3), tf.keras.layers.Flatten(), tf.keras.layers.Dense(2)])
    assert has_convolution([user_net])
    assert has_convolution([Conv("c", 4, 3, 1)])
    assert not has_convolution([tf.keras.layers.Dense(3)])


def test_train_step_applies_the_rule_and_the_override(monkeypatch):
    cnn = PPO2("CnnPolicy", _image_env(), n_steps=4, nminibatches=1, seed=0).policy_tf
    spec = {"x": tf.TensorSpec((), tf.float32)}

    def step(networks, jit, **kwargs):
        return TrainStep(lambda x: {"y": x + 1.0}, spec, jit_compile=jit, **kwargs).jit_compile

    assert step((), True) is True
    assert step((), False) is False
    assert TrainStep(lambda x: {"y": x}, spec, networks=(cnn,), jit_compile=True).jit_compile is (not ON_CPU)
    assert TrainStep(lambda x: {"y": x}, spec, networks=(cnn,), jit_compile="auto").jit_compile is (not ON_CPU)
    monkeypatch.setenv("SBTF_XLA", "on")
    assert decide_jit_compile(True, [cnn]) is True
    assert decide_jit_compile(False, [cnn]) is False  # never forces XLA on a step that did not ask for it
    monkeypatch.setenv("SBTF_XLA", "off")
    assert decide_jit_compile(True, []) is False
    monkeypatch.setenv("SBTF_XLA", "sometimes")
    with pytest.raises(ValueError, match="SBTF_XLA"):
        decide_jit_compile(True, [])
    with pytest.raises(ValueError, match="jit_compile"):
        decide_jit_compile("yes", [])


@pytest.mark.parametrize("policy, env_fn, expect_xla", [
    ("CnnPolicy", _image_env, not ON_CPU),
    ("MlpPolicy", _vector_env, True),
])
@pytest.mark.parametrize("algo", [PPO2, A2C])
def test_on_policy_decision_as_documented(algo, policy, env_fn, expect_xla):
    kwargs = dict(nminibatches=1, noptepochs=1) if algo is PPO2 else {}
    model = algo(policy, env_fn(), n_steps=4, seed=0, **kwargs)
    # A2C: measured never to pay (docs/benchmarks.md, "When sbtf uses XLA")
    assert model._train_step.xla_allowed is (expect_xla and algo is PPO2)


def test_plan_decides_xla_for_the_learn_call():
    """XLA only for learn() calls that plan XLA_MIN_GRADIENT_STEPS gradient steps or more, decided by counts."""
    spec = {"x": tf.TensorSpec((), tf.float32)}
    step = TrainStep(lambda x: {"y": x + 1.0}, spec, jit_compile=True)
    assert step.xla_allowed and step.jit_compile  # no plan (outside learn): as allowed
    with gradient_step_plan(XLA_MIN_GRADIENT_STEPS - 1):
        assert step.jit_compile is False
        assert float(step(x=1.0)["y"]) == 2.0
    with gradient_step_plan(XLA_MIN_GRADIENT_STEPS):
        assert step.jit_compile is True
        assert float(step(x=2.0)["y"]) == 3.0
    assert step.n_traces == 2  # one trace per form, each kept
    with gradient_step_plan(10):
        step(x=3.0)
    assert step.n_traces == 2
    never = TrainStep(lambda x: {"y": x}, spec, jit_compile=False)
    with gradient_step_plan(10 ** 9):
        assert never.jit_compile is False
    always = TrainStep(lambda x: {"y": x}, spec, jit_compile=True, xla_min_gradient_steps=0)  # ACER, RecurrentPPO
    with gradient_step_plan(1):
        assert always.jit_compile is True


def test_plan_of_learn_counts_gradient_steps(monkeypatch):
    """Each family counts the gradient steps of learn(total_timesteps) as its loop will run them."""
    ppo = PPO2("MlpPolicy", _vector_env(), n_steps=16, nminibatches=4, noptepochs=5, seed=0)
    assert ppo._planned_gradient_steps(100 * ppo.n_batch) == 100 * 4 * 5
    seen = []
    real_call = TrainStep.__call__

    def spy(self, **values):
        seen.append(self.jit_compile)
        return real_call(self, **values)

    monkeypatch.setattr(TrainStep, "__call__", spy)
    ppo.learn(4 * ppo.n_batch)  # 4 updates x 20 gradient steps: far below the XLA threshold
    assert seen and not any(seen)
    dqn = DQN("MlpPolicy", gym.make("CartPole-v1"), learning_starts=100, train_freq=4, seed=0)
    assert dqn._planned_gradient_steps(1100) == 250


@pytest.mark.parametrize("policy, env_id", [("CnnPolicy", None), ("MlpPolicy", "CartPole-v1")])
def test_dqn_decision_as_documented(policy, env_id):
    env = ImageEnv() if env_id is None else gym.make(env_id)
    model = DQN(policy, env, learning_starts=10, buffer_size=100, batch_size=8, seed=0)
    assert model._build_train_step(1, False).xla_allowed is False  # measured never to pay on CPU
    model.jit_compile = True  # forced: still no XLA for convolutions on the CPU
    assert model._build_train_step(1, False).xla_allowed is (policy == "MlpPolicy" or not ON_CPU)


def _random_inputs(step: TrainStep, n_actions: int, seed: int = 0) -> dict:
    """Inputs for every named input of ``step``: frames, whole-number actions, small positive scalars."""
    rng = np.random.default_rng(seed)
    values = {}
    for name, spec in step.input_specs.items():
        shape = spec.shape.as_list()
        if spec.dtype == tf.uint8:
            values[name] = rng.integers(0, 256, shape, dtype=np.uint8)
        elif name == "actions":
            values[name] = rng.integers(0, n_actions, shape).astype(spec.dtype.as_numpy_dtype)
        elif not shape:
            values[name] = np.float32(1e-3 if name in ("lr", "learning_rate") else 0.2)
        elif name in ("dones", "masks"):
            values[name] = (rng.random(shape) < 0.2).astype(np.float32)
        elif name == "weights":
            values[name] = np.ones(shape, np.float32)
        else:
            values[name] = rng.normal(size=shape).astype(spec.dtype.as_numpy_dtype)
    return values


def _weights(model) -> dict:
    return {name: np.array(value) for name, value in model.get_parameters().items()}


def _compare_compiled_and_eager(make_model, get_step):
    """Twin models from one seed: one updates through the compiled step, the other runs the step's maths eagerly."""
    compiled_model, eager_model = make_model(), make_model()
    before = _weights(compiled_model)
    for name, value in _weights(eager_model).items():
        np.testing.assert_array_equal(value, before[name])
    compiled_step, eager_step = get_step(compiled_model), get_step(eager_model)
    assert compiled_step.jit_compile is (not ON_CPU)
    inputs = _random_inputs(compiled_step, n_actions=3)
    out = compiled_step(**inputs)
    eager_out = eager_step.fn(**{k: tf.convert_to_tensor(v) for k, v in inputs.items()})
    after, eager_after = _weights(compiled_model), _weights(eager_model)
    assert any(not np.allclose(after[name], before[name]) for name in after), "the step changed no weight"
    for name in after:
        np.testing.assert_allclose(after[name], eager_after[name], rtol=1e-5, atol=1e-5, err_msg=name)
    for name, value in out.items():
        np.testing.assert_allclose(value, np.asarray(eager_out[name]), rtol=1e-4, atol=1e-5, err_msg=name)
    # the acting weights the compiled step installed are the trained ones: same actions as the eager twin
    obs = np.stack([ImageEnv().reset(seed=s)[0] for s in range(4)])
    np.testing.assert_array_equal(compiled_model.predict(obs, deterministic=True)[0],
                                  eager_model.predict(obs, deterministic=True)[0])


@pytest.mark.parametrize("algo", [PPO2, A2C])
def test_cnn_on_policy_step_equals_eager_keras(algo):
    kwargs = dict(nminibatches=2, noptepochs=2) if algo is PPO2 else {}
    _compare_compiled_and_eager(lambda: algo("CnnPolicy", _image_env(), n_steps=4, seed=3, **kwargs),
                                lambda model: model._make_train_step())


def test_cnn_dqn_step_equals_eager_keras():
    _compare_compiled_and_eager(
        lambda: DQN("CnnPolicy", ImageEnv(), learning_starts=10, buffer_size=100, batch_size=8, seed=3),
        lambda model: model._build_train_step(2, True))


def test_dqn_skips_the_q_network_for_random_actions(monkeypatch):
    """Epsilon-greedy draws first and runs the Q-network only when a greedy action is kept: same actions."""
    model = DQN("CnnPolicy", ImageEnv(), learning_starts=10, buffer_size=100, batch_size=8, seed=0)
    obs = np.stack([ImageEnv().reset(seed=s)[0] for s in range(3)])
    calls = []
    q_values_np = model.q_net.q_values_np
    monkeypatch.setattr(model.q_net, "q_values_np", lambda x: calls.append(1) or q_values_np(x))
    for eps, expect_calls in ((1.0, 0), (0.0, 1)):
        model.exploration = type("Fixed", (), {"value": staticmethod(lambda _t, e=eps: e)})()
        np.random.seed(1)
        actions, _ = model._select_actions(obs)
        assert len(calls) == expect_calls and actions.shape == (3,)
        calls.clear()
        if eps == 0.0:
            np.testing.assert_array_equal(actions, np.argmax(q_values_np(obs), axis=1))
    # eps = 0.5: the draws are the reference's (random_sample, then randint for the random ones)
    model.exploration = type("Fixed", (), {"value": staticmethod(lambda _t: 0.5)})()
    np.random.seed(2)
    actions, _ = model._select_actions(obs)
    np.random.seed(2)
    expected = np.argmax(q_values_np(obs), axis=1)
    chose = np.random.random_sample(3) < 0.5
    expected[chose] = np.random.randint(0, 3, size=int(chose.sum()))
    np.testing.assert_array_equal(actions, expected)
