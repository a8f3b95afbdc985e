"""The policy-owned acting path: NumPy when every layer has a NumPy form, one compiled TF call otherwise."""
import gymnasium as gym
import keras
import numpy as np
import pytest
import tensorflow as tf

from sbtf.common.compile.acting import NoNumpyForm
from sbtf.common.nn.network_ops import TF_OPS

BOX5 = gym.spaces.Box(-2, 2, (5,), np.float32)
ACTION_BOX = gym.spaces.Box(-1, 1, (3,), np.float32)
IMAGE = gym.spaces.Box(0, 255, (16, 16, 2), np.uint8)


def _obs(space, n=7, seed=0):
    rng = np.random.default_rng(seed)
    if space.dtype == np.uint8:
        return rng.integers(0, 256, (n,) + space.shape).astype(np.uint8)
    return rng.normal(size=(n,) + space.shape).astype(np.float32)


def _jitter(policy, stddev=0.2, seed=0):
    """Non-trivial weights everywhere (biases, LayerNorm gains), then tell the policy."""
    tf.random.set_seed(seed)
    for var in policy.trainable_variables:
        var.assign(var + tf.random.normal(var.shape, stddev=stddev))
    policy.weights_changed()


# ------------------------------------------------------------------ NumPy path == Keras model, per family
@pytest.mark.parametrize("ac_space", [gym.spaces.Discrete(3), gym.spaces.Box(-2, 2, (2,)),
                                      gym.spaces.MultiDiscrete([2, 4]), gym.spaces.MultiBinary(3)])
def test_actor_critic_numpy_path_matches_keras(ac_space):
    from sbtf.common.policies import MlpPolicy

    policy = MlpPolicy(None, BOX5, ac_space, net_arch=[16, dict(pi=[8], vf=[12, 4])], act_fun=tf.nn.relu)
    _jitter(policy)
    obs = _obs(BOX5)
    assert policy.acts_in_numpy
    flat, value = policy(tf.constant(obs))
    np.testing.assert_allclose(policy.flat_params(obs), flat.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(policy.value(obs), value.numpy(), rtol=1e-5, atol=1e-5)
    _, values, _, _ = policy.step(obs, deterministic=True)
    np.testing.assert_allclose(values, value.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["MlpPolicy", "LnMlpPolicy"])
def test_sac_and_td3_numpy_path_matches_keras(name):
    import sbtf.sac.policies as sac_policies
    import sbtf.td3.policies as td3_policies

    obs = _obs(BOX5)
    sac = getattr(sac_policies, name)(None, BOX5, ACTION_BOX, layers=[16, 8])
    sac.make_actor()
    sac.make_critics()
    _jitter(sac)
    assert sac.acts_in_numpy
    np.testing.assert_allclose(sac.step(obs, deterministic=True), sac(tf.constant(obs)).numpy(), rtol=1e-5, atol=1e-5)
    td3 = getattr(td3_policies, name)(None, BOX5, ACTION_BOX, layers=[16, 8])
    td3.make_actor()
    td3.make_critics()
    _jitter(td3)
    assert td3.acts_in_numpy
    np.testing.assert_allclose(td3.step(obs), td3(tf.constant(obs)).numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name,kwargs", [("MlpPolicy", {}), ("MlpPolicy", dict(dueling=False)),
                                         ("LnMlpPolicy", dict(layers=[16, 8]))])
def test_dqn_numpy_path_matches_keras(name, kwargs):
    import sbtf.deepq.policies as dqn_policies

    policy = getattr(dqn_policies, name)(None, BOX5, gym.spaces.Discrete(4), **kwargs)
    _jitter(policy)
    obs = _obs(BOX5)
    assert policy.acts_in_numpy
    np.testing.assert_allclose(policy.q_values_np(obs), policy(tf.constant(obs)).numpy(), rtol=1e-5, atol=1e-5)
    # explicit (perturbed) weights give the Q-values of a network holding them
    perturbed = {key: value + 0.1 for key, value in policy.numpy_weights().items()}
    q_perturbed = policy.q_values_np(obs, weights=perturbed)
    params = policy.named_parameters(prefix="")
    for key, value in perturbed.items():
        params[f"/{key}:0"].assign(value)
    np.testing.assert_allclose(q_perturbed, policy.q_values(tf.constant(obs)).numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["MlpPolicy", "LnMlpPolicy"])
def test_ddpg_numpy_path_matches_keras(name):
    import sbtf.ddpg.policies as ddpg_policies

    policy = getattr(ddpg_policies, name)(None, BOX5, ACTION_BOX, layers=[16, 8])
    policy.make_actor()
    policy.make_critic()
    _jitter(policy)
    obs = _obs(BOX5)
    actions = np.tanh(_obs(ACTION_BOX, seed=1))
    assert policy.acts_in_numpy
    np.testing.assert_allclose(policy.step(obs), policy(tf.constant(obs)).numpy(), rtol=1e-5, atol=1e-5)
    q_tf = policy.critic(policy.normalize_obs_tf(tf.constant(obs)), tf.constant(actions))[:, 0]
    np.testing.assert_allclose(policy.value(obs, actions), q_tf.numpy(), rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------ layers without a NumPy form: one TF call
class _UserFeaturesPolicy:
    """Mixin: a user's plain Keras Dense layer on the acting path (in ``extract_features``)."""

    def _finish_build(self):
        self.user_dense = keras.layers.Dense(5, activation="tanh")  # before the policy is built (keeps the width)
        super()._finish_build()

    def extract_features(self, ops, x):
        return ops.layer(self.user_dense, ops.flatten(x))


def test_user_keras_layer_acts_through_tf():
    from sbtf.common.policies import FeedForwardPolicy

    class UserPolicy(_UserFeaturesPolicy, FeedForwardPolicy):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, feature_extraction="mlp", **kwargs)

    policy = UserPolicy(None, BOX5, gym.spaces.Box(-1, 1, (2,)))
    obs = _obs(BOX5)
    assert not policy.acts_in_numpy
    flat, value = policy(tf.constant(obs))
    np.testing.assert_allclose(policy.flat_params(obs), flat.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(policy.value(obs), value.numpy(), rtol=1e-5, atol=1e-5)
    actions, values, _, neglogp = policy.step(obs, deterministic=True)
    np.testing.assert_allclose(actions, flat.numpy()[:, :2], rtol=1e-5, atol=1e-5)
    # the TF path reads the variables: a weight change shows without any notification
    policy.user_dense.kernel.assign(policy.user_dense.kernel + 0.3)
    np.testing.assert_allclose(policy.value(obs), policy(tf.constant(obs))[1].numpy(), rtol=1e-5, atol=1e-5)


def test_subclass_replacing_forward_acts_through_tf():
    from sbtf.common.policies import MlpPolicy

    class Doubled(MlpPolicy):
        def forward(self, obs, state=None, mask=None, n_steps=1):
            flat, value, q_value, new_state = super().forward(obs, state, mask, n_steps)
            return flat, 2.0 * value, q_value, new_state

    policy = Doubled(None, BOX5, gym.spaces.Discrete(2))
    obs = _obs(BOX5)
    assert not policy.acts_in_numpy
    np.testing.assert_allclose(policy.value(obs), policy(tf.constant(obs))[1].numpy(), rtol=1e-5, atol=1e-5)


def _user_cnn(**_kwargs):
    return keras.Sequential([keras.layers.Conv2D(4, 3, strides=2, activation="relu"), keras.layers.Flatten(),
                             keras.layers.Lambda(lambda x: x * 0.5), keras.layers.Dense(8, activation="relu")])


def test_user_cnn_extractor_acts_through_tf_actor_critic_and_sac():
    from sbtf.common.policies import CnnPolicy
    from sbtf.sac.policies import CnnPolicy as SacCnn

    obs = _obs(IMAGE)
    policy = CnnPolicy(None, IMAGE, gym.spaces.Discrete(3), cnn_extractor=_user_cnn)
    assert not policy.acts_in_numpy
    flat, value = policy(tf.constant(obs))
    np.testing.assert_allclose(policy.flat_params(obs), flat.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(policy.value(obs), value.numpy(), rtol=1e-5, atol=1e-5)
    sac = SacCnn(None, IMAGE, ACTION_BOX, cnn_extractor=_user_cnn)
    sac.make_actor()
    sac.make_critics()
    assert not sac.acts_in_numpy
    np.testing.assert_allclose(sac.step(obs, deterministic=True), sac(tf.constant(obs)).numpy(), rtol=1e-5,
                               atol=1e-5)


def test_activation_without_numpy_form_acts_through_tf():
    from sbtf.deepq.policies import MlpPolicy

    policy = MlpPolicy(None, BOX5, gym.spaces.Discrete(4), act_fun=lambda x: tf.nn.relu(x) - 0.1)
    obs = _obs(BOX5)
    assert not policy.acts_in_numpy
    np.testing.assert_allclose(policy.q_values_np(obs), policy(tf.constant(obs)).numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="acts in NumPy"):
        policy.q_values_np(obs, weights={})


# ------------------------------------------------------------------ weight versions
def test_weights_changed_refreshes_with_one_read_and_set_weights_marks():
    from sbtf.common.policies import MlpPolicy

    policy = MlpPolicy(None, BOX5, gym.spaces.Discrete(3))
    obs = _obs(BOX5)
    policy.value(obs)
    reads = policy.n_weight_reads
    for _ in range(5):  # acting without a weight change reads nothing
        policy.step(obs)
    assert policy.n_weight_reads == reads
    _jitter(policy)  # assigns, then weights_changed()
    np.testing.assert_allclose(policy.value(obs), policy(tf.constant(obs))[1].numpy(), rtol=1e-5, atol=1e-5)
    assert policy.n_weight_reads == reads + 1
    policy.set_weights([w * 0.5 for w in policy.get_weights()])
    np.testing.assert_allclose(policy.value(obs), policy(tf.constant(obs))[1].numpy(), rtol=1e-5, atol=1e-5)
    policy.weights_changed()  # what a raw assign outside sbtf's tracked writes calls
    policy.value(obs)
    assert policy.n_weight_reads == reads + 3


def test_load_parameters_refreshes_the_acting_path():
    from sbtf import A2C

    model = A2C("MlpPolicy", "CartPole-v1", seed=0)
    obs = _obs(model.observation_space)
    policy = model.policy_tf
    before = policy.value(obs).copy()
    params = {name: value + 0.05 for name, value in model.get_parameters().items()}
    model.load_parameters(params)
    after = policy.value(obs)
    assert not np.allclose(after, before)
    np.testing.assert_allclose(after, policy(tf.constant(obs))[1].numpy(), rtol=1e-5, atol=1e-5)


def test_dry_run_reports_missing_numpy_forms():
    from sbtf.common.compile.acting import ActingPath, WeightVersion

    dense = keras.layers.Dense(2)
    dense.build((None, 3))
    path = ActingPath({"f": (lambda ops, x: ops.layer(dense, x), [tf.TensorSpec((None, 3), tf.float32)])},
                      WeightVersion())
    assert not path.uses_numpy and path.n_weights == 0 and path.weights_tf() == []
    with pytest.raises(NoNumpyForm):
        path.ops_for([])
    x = _obs(gym.spaces.Box(-1, 1, (3,)))
    np.testing.assert_allclose(path("f", x), dense(x).numpy(), rtol=1e-6)
    np.testing.assert_allclose(TF_OPS.layer(dense, x).numpy(), dense(x).numpy())
