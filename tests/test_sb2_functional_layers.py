"""SB2's functional layers (``conv``, ``linear``, ``conv_to_fc``, ``lstm``) and SB2 ``cnn_extractor`` functions."""
from collections import OrderedDict

import gymnasium as gym
import keras
import numpy as np
import pytest
import tensorflow as tf

import legacy_fixtures as fx
from sbtf import PPO2
from sbtf.common.evaluation import evaluate_policy
from sbtf.common.tf_layers import (FunctionalCnnExtractor, Lstm, batch_to_seq, conv, conv_to_fc, linear, lstm,
                                   make_cnn_extractor, nature_cnn, ortho_init, seq_to_batch)
from sbtf.common.vec_env import DummyVecEnv


def custom_cnn(scaled_images, **kwargs):
    """The SB2 docs' custom CNN, smaller (and with a rectangular filter)."""
    activ = tf.nn.relu
    layer_1 = activ(conv(scaled_images, "c1", n_filters=8, filter_size=3, stride=2, init_scale=np.sqrt(2), **kwargs))
    layer_2 = activ(conv(layer_1, "c2", n_filters=8, filter_size=(3, 2), stride=1, init_scale=np.sqrt(2), **kwargs))
    layer_3 = conv_to_fc(layer_2)
    return activ(linear(layer_3, "fc1", n_hidden=32, init_scale=np.sqrt(2)))


class ColourEnv(gym.Env):
    """A 12x12 image that is all black or all white; the action must name the colour (reward 1)."""

    observation_space = gym.spaces.Box(0, 255, (12, 12, 1), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def _obs(self):
        return np.full((12, 12, 1), 255 * self.colour, np.uint8)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.colour = 0, int(self.np_random.integers(2))
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        reward = float(int(action) == self.colour)
        self.colour = int(self.np_random.integers(2))
        return self._obs(), reward, False, self.t >= 10, {}


def test_functional_layers_work_on_keras_symbolic_tensors():
    inputs = keras.Input((12, 12, 1))
    outputs = linear(conv_to_fc(conv(inputs, "c1", n_filters=4, filter_size=3, stride=2)), "fc1", 5)
    model = keras.Model(inputs, outputs)
    assert model.output_shape == (None, 5)
    assert sorted(tuple(w.shape) for w in model.weights) == [(3, 3, 1, 4), (4,), (5,), (100, 5)]
    assert model(np.zeros((2, 12, 12, 1), np.float32)).shape == (2, 5)
    with pytest.raises(NotImplementedError, match="NHWC"):
        conv(inputs, "c2", n_filters=4, filter_size=3, stride=1, data_format="NCHW")
    weights = ortho_init(2.0)((6, 6))
    np.testing.assert_allclose(weights @ weights.T, 4.0 * np.eye(6), atol=1e-5)


def test_cnn_extractor_function_is_traced_once_with_sb2_names():
    calls = []

    def counting_cnn(scaled_images, **kwargs):
        calls.append(1)
        return custom_cnn(scaled_images, **kwargs)

    model = PPO2("CnnPolicy", DummyVecEnv([ColourEnv]), policy_kwargs=dict(cnn_extractor=counting_cnn), n_steps=8,
                 nminibatches=1, seed=0)
    shapes = {name: tuple(v.shape) for name, v in model.get_parameters().items()}
    assert list(shapes)[:6] == ["model/c1/w:0", "model/c1/b:0", "model/c2/w:0", "model/c2/b:0", "model/fc1/w:0",
                                "model/fc1/b:0"]
    assert shapes["model/c2/w:0"] == (3, 2, 8, 8) and shapes["model/fc1/w:0"] == (3 * 4 * 8, 32)
    assert isinstance(model.policy_tf.cnn, FunctionalCnnExtractor)
    n_variables = len(model.policy_tf.weights)
    model.learn(16)
    assert len(model.policy_tf.weights) == n_variables  # later calls reuse the traced layers
    assert len(calls) >= 2


def test_cnn_extractor_function_trains_saves_and_loads(tmp_path):
    env = DummyVecEnv([ColourEnv] * 4)
    model = PPO2("CnnPolicy", env, policy_kwargs=dict(cnn_extractor=custom_cnn), n_steps=32, learning_rate=1e-3,
                 seed=0)
    model.learn(6000)
    mean_reward, _ = evaluate_policy(model, env, n_eval_episodes=20)
    assert mean_reward > 8.0  # random play gets 5
    model.save(tmp_path / "custom_cnn.zip")
    with pytest.raises(RuntimeError, match="custom_objects"):
        PPO2.load(tmp_path / "custom_cnn.zip")  # the function is not unpickled from the file
    loaded = PPO2.load(tmp_path / "custom_cnn.zip", custom_objects={"policy_kwargs": dict(cnn_extractor=custom_cnn)})
    obs = env.reset()
    np.testing.assert_allclose(loaded.action_probability(obs), model.action_probability(obs), atol=1e-6)
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True)[0], model.predict(obs, deterministic=True)[0])
    exported = tf.saved_model.load(loaded.export(str(tmp_path / "exported"), format="savedmodel"))
    signature = next(iter(exported.signatures.values()))
    (input_name, spec), = signature.structured_input_signature[1].items()
    outputs = signature(**{input_name: tf.constant(obs, spec.dtype)})
    np.testing.assert_allclose(outputs["probabilities"].numpy(), model.action_probability(obs), atol=1e-5)


def test_sb2_file_with_a_custom_cnn_extractor_loads_with_the_function(tmp_path):
    rng = np.random.default_rng(0)
    params = OrderedDict()
    params["model/c1/w:0"] = (0.3 * rng.standard_normal((3, 3, 1, 8))).astype(np.float32)
    params["model/c1/b:0"] = (0.1 * rng.standard_normal((1, 8, 1, 1))).astype(np.float32)  # SB2's bias layout
    params["model/c2/w:0"] = (0.3 * rng.standard_normal((3, 2, 8, 8))).astype(np.float32)
    params["model/c2/b:0"] = (0.1 * rng.standard_normal((1, 8, 1, 1))).astype(np.float32)
    fx.linear(params, "fc1", 3 * 4 * 8, 32, rng)
    fx.heads(params, 32, 32, 2, False, rng)
    stored_kwargs = {"cnn_extractor": fx.cloudpickled_function("custom_cnn", "train_script")}
    data = fx.ppo2_data(fx.box(0, 255, (12, 12, 1), np.uint8), fx.discrete(2), fx.policy("CnnPolicy"),
                        policy_kwargs=stored_kwargs)
    path = fx.write_zip(tmp_path / "sb2_custom_cnn.zip", data, params)

    model = PPO2.load(path, custom_objects={"policy_kwargs": {"cnn_extractor": custom_cnn}})
    images = np.stack([ColourEnv().reset(seed=s)[0] for s in range(4)])
    images[1] = rng.integers(0, 256, (12, 12, 1))
    relu = lambda v: np.maximum(v, 0)  # noqa: E731
    x = relu(fx.conv2d_valid(images / 255.0, params["model/c1/w:0"], params["model/c1/b:0"], 2))
    x = _conv_rect(x, params["model/c2/w:0"], params["model/c2/b:0"])
    latent = relu(relu(x).reshape(4, -1) @ params["model/fc1/w:0"] + params["model/fc1/b:0"])
    logits = latent @ params["model/pi/w:0"] + params["model/pi/b:0"]
    expected = np.exp(logits - logits.max(1, keepdims=True))
    expected /= expected.sum(1, keepdims=True)
    np.testing.assert_allclose(model.action_probability(images), expected, atol=1e-4)


def _conv_rect(x, w, b):
    """VALID convolution with stride 1 and a (kh, kw) kernel."""
    kh, kw = w.shape[:2]
    out = np.zeros((x.shape[0], x.shape[1] - kh + 1, x.shape[2] - kw + 1, w.shape[3]))
    for i in range(out.shape[1]):
        for j in range(out.shape[2]):
            out[:, i, j] = np.tensordot(x[:, i:i + kh, j:j + kw], w, axes=([1, 2, 3], [0, 1, 2]))
    return out + b.reshape(1, 1, 1, -1)


def test_nature_cnn_inside_a_function_and_extractor_errors():
    def wrapped_nature(scaled_images, **kwargs):
        return nature_cnn(scaled_images, **kwargs)

    layer = make_cnn_extractor(wrapped_nature, {})
    layer.build((None, 84, 84, 4))
    assert [sub.scope for sub in layer.sb2_layers()] == ["c1", "c2", "c3", "fc1"]
    assert make_cnn_extractor(nature_cnn, {}).name == "nature_cnn"  # sbtf's factory form still gives its layer

    def same_scope_twice(scaled_images, **kwargs):
        return linear(linear(conv_to_fc(scaled_images), "fc", 4), "fc", 4)

    with pytest.raises(ValueError, match="twice"):
        make_cnn_extractor(same_scope_twice, {}).build((None, 4, 4, 1))

    def changing(scaled_images, **kwargs):
        changing.calls += 1
        return linear(conv_to_fc(scaled_images), "fc" if changing.calls == 1 else "other", 4)

    changing.calls = 0
    extractor = make_cnn_extractor(changing, {})
    extractor.build((None, 4, 4, 1))
    with pytest.raises(ValueError, match="did not create when it was traced"):
        extractor(tf.zeros((1, 4, 4, 1)))


def test_functional_lstm_matches_the_lstm_layer():
    n_env, n_steps, n_in, n_hidden = 2, 3, 4, 5
    rng = np.random.default_rng(1)
    inputs = tf.constant(rng.standard_normal((n_env * n_steps, n_in)), tf.float32)
    masks = tf.constant([0, 0, 1, 0, 1, 0], tf.float32)
    state = tf.constant(rng.standard_normal((n_env, 2 * n_hidden)), tf.float32)

    def recurrent(x, **kwargs):
        outputs, new_state = lstm(batch_to_seq(x, n_env, n_steps), batch_to_seq(masks, n_env, n_steps, flat=True),
                                  state, "lstm1", n_hidden, layer_norm=True)
        recurrent.state = new_state
        return seq_to_batch(outputs)

    extractor = FunctionalCnnExtractor(recurrent)
    extractor.build((n_env * n_steps, n_in))
    (cell,) = extractor.sb2_layers()
    assert [v.name for v in cell.weights] == ["wx", "wh", "b", "gx", "bx", "gh", "bh", "gc", "bc"]
    out = extractor(inputs)
    reference = Lstm("lstm1", n_hidden, layer_norm=True)
    reference.build((None, n_in))
    reference.set_weights(cell.get_weights())
    expected, expected_state = reference(inputs, masks=masks, state=state, n_steps=n_steps)
    np.testing.assert_allclose(out.numpy(), expected.numpy(), atol=1e-6)
    np.testing.assert_allclose(recurrent.state.numpy(), expected_state.numpy(), atol=1e-6)
