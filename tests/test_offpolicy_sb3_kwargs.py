"""SB3's policy_kwargs on the off-policy algorithms (SAC, TD3, DDPG, DQN): layer sizes, critics, activations, shared
extractors, image scaling, errors; SB2's keywords keep SB2's layouts and names; save/load."""
import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from sbtf import DDPG, DQN, SAC, TD3
from sbtf.common.evaluation import evaluate_policy


def shapes(model, prefix="model/"):
    return {name: tuple(np.shape(value)) for name, value in model.get_parameters().items() if name.startswith(prefix)}


PENDULUM = "Pendulum-v1"


def test_sac_net_arch_dict_gives_actor_and_critic_sizes_and_n_critics():
    model = SAC("MlpPolicy", PENDULUM, policy_kwargs=dict(net_arch=dict(pi=[32, 16], qf=[40, 24]), n_critics=3))
    params = shapes(model)
    assert params["model/pi/fc0/kernel:0"] == (3, 32) and params["model/pi/fc1/kernel:0"] == (32, 16)
    assert params["model/pi/dense/kernel:0"] == (16, 1)
    for critic in ("qf1", "qf2", "qf3"):
        assert params[f"model/values_fn/{critic}/fc0/kernel:0"] == (4, 40)
        assert params[f"model/values_fn/{critic}/{critic}/kernel:0"] == (24, 1)
    # SB2's state-value network keeps its place and takes the critics' sizes
    assert params["model/values_fn/vf/fc0/kernel:0"] == (3, 40)
    assert "model/values_fn/qf4/fc0/kernel:0" not in params
    assert model.stats_names == ["policy_loss", "qf1_loss", "qf2_loss", "qf3_loss", "value_loss", "entropy",
                                 "ent_coef_loss", "ent_coef"]


def test_td3_net_arch_list_is_the_same_for_actor_and_critics():
    model = TD3("MlpPolicy", PENDULUM, policy_kwargs=dict(net_arch=[48, 24], n_critics=1, activation_fn="tanh"))
    params = shapes(model)
    assert params["model/pi/fc0/kernel:0"] == (3, 48) and params["model/values_fn/qf1/fc1/kernel:0"] == (48, 24)
    assert not any("qf2" in name for name in params)
    assert model.policy_tf.act_fun == "tanh"
    model.learn(150)  # one critic trains (the minimum over one critic)
    assert model._stats_names() == ["qf1_loss"]


def test_ddpg_net_arch_dict_and_errors():
    model = DDPG("MlpPolicy", PENDULUM, policy_kwargs=dict(net_arch=dict(pi=[16], qf=[24, 8])))
    params = shapes(model)
    assert params["model/pi/fc0/kernel:0"] == (3, 16) and params["model/pi/pi/kernel:0"] == (16, 1)
    # SB2's critic: the action joins after the first hidden layer
    assert params["model/qf/fc0/kernel:0"] == (3, 24) and params["model/qf/fc1/kernel:0"] == (25, 8)
    with pytest.raises(ValueError, match="one critic"):
        DDPG("MlpPolicy", PENDULUM, policy_kwargs=dict(n_critics=2))


def test_dqn_net_arch_is_sb3s_name_of_layers():
    model = DQN("MlpPolicy", "CartPole-v1", policy_kwargs=dict(net_arch=[16, 8], dueling=False))
    params = shapes(model, "deepq/model/")
    assert params["deepq/model/action_value/fully_connected/weights:0"] == (4, 16)
    assert params["deepq/model/action_value/fully_connected_2/weights:0"] == (8, 2)
    assert not any("state_value" in name for name in params)
    with pytest.raises(ValueError, match="both SB2's layers"):
        DQN("MlpPolicy", "CartPole-v1", policy_kwargs=dict(net_arch=[16], layers=[16]))
    with pytest.raises(ValueError, match="one list of layer sizes"):
        DQN("MlpPolicy", "CartPole-v1", policy_kwargs=dict(net_arch=dict(pi=[8], qf=[8])))


@pytest.mark.parametrize("algo,env", [(SAC, PENDULUM), (TD3, PENDULUM), (DDPG, PENDULUM), (DQN, "CartPole-v1")])
def test_sb2_kwargs_keep_sb2_names_and_sb3_equivalents_give_the_same_layout(algo, env):
    sb2 = algo("MlpPolicy", env, seed=0, policy_kwargs=dict(layers=[32, 32], act_fun=tf.nn.tanh))
    sb3 = algo("MlpPolicy", env, seed=0, policy_kwargs=dict(net_arch=[32, 32], activation_fn=tf.nn.tanh))
    assert list(shapes(sb2, "")) == list(shapes(sb3, "")) and shapes(sb2, "") == shapes(sb3, "")
    default = algo("MlpPolicy", env)
    assert all("qf3" not in name for name in shapes(default, ""))  # SB2's two critics by default


@pytest.mark.parametrize("algo,env", [(SAC, PENDULUM), (TD3, PENDULUM), (DDPG, PENDULUM), (DQN, "CartPole-v1")])
def test_unknown_keyword_names_the_algorithm_and_the_accepted_keys(algo, env):
    with pytest.raises(ValueError) as info:
        algo("MlpPolicy", env, policy_kwargs=dict(net_archh=[64]))
    message = str(info.value)
    assert algo.__name__ in message and "net_archh" in message and "'net_arch'" in message
    assert "'activation_fn'" in message and "'layers'" in message


def test_act_fun_and_activation_fn_must_agree():
    with pytest.raises(ValueError, match="give one of them"):
        SAC("MlpPolicy", PENDULUM, policy_kwargs=dict(act_fun=tf.nn.tanh, activation_fn=tf.nn.elu))
    model = SAC("MlpPolicy", PENDULUM, policy_kwargs=dict(act_fun=tf.nn.elu, activation_fn=tf.nn.elu))
    assert model.policy_tf.act_fun is tf.nn.elu


class ImageEnv(gym.Env):
    """36x36x3 uint8 images, a Box action (reward: the action's first component times the mean pixel)."""

    observation_space = gym.spaces.Box(0, 255, (36, 36, 3), np.uint8)
    action_space = gym.spaces.Box(-1, 1, (2,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        self.t += 1
        return self.observation_space.sample(), float(action[0]), False, self.t >= 20, {}


@pytest.mark.parametrize("algo", [SAC, TD3])
def test_share_features_extractor_uses_the_actors_cnn_trained_by_the_actor_only(algo):
    schedule = dict(train_freq=10, gradient_steps=2, policy_delay=1) if algo is TD3 else {}
    own = algo("CnnPolicy", ImageEnv(), seed=0, learning_starts=10, batch_size=8,
               policy_kwargs=dict(net_arch=[16]))
    assert any(name.startswith("model/values_fn/c1/") for name in shapes(own))
    shared = algo("CnnPolicy", ImageEnv(), seed=0, learning_starts=10, batch_size=8,
                  policy_kwargs=dict(net_arch=[16], share_features_extractor=True), **schedule)
    names = list(shapes(shared))
    assert not any(name.startswith("model/values_fn/c1/") for name in names)
    assert any(name.startswith("model/pi/c1/") for name in names)
    policy = shared.policy_tf
    cnn_vars = {id(v) for v in policy._extractor_variables(policy.actor_cnn)}
    assert cnn_vars and not cnn_vars & {id(v) for v in policy.critic_variables()}
    # the critics' gradient does not reach the shared CNN
    obs = tf.constant(np.random.randint(0, 255, (4, 36, 36, 3)), tf.uint8)
    with tf.GradientTape() as tape:
        q = policy.critic("qf1", policy.critic_features(obs), tf.zeros((4, 2)))
    grads = tape.gradient(q, policy._extractor_variables(policy.actor_cnn))
    assert all(g is None for g in grads)
    c1_before = shared.get_parameters()["model/pi/c1/w:0"].copy()
    shared.learn(40)
    assert not np.allclose(shared.get_parameters()["model/pi/c1/w:0"], c1_before)  # the actor's loss trains it


def test_normalize_images_sets_the_scaling():
    assert SAC("CnnPolicy", ImageEnv()).policy_tf.scale  # SB2 rule: CNN policies scale
    assert not SAC("CnnPolicy", ImageEnv(), policy_kwargs=dict(normalize_images=False)).policy_tf.scale
    assert SAC("MlpPolicy", ImageEnv(), policy_kwargs=dict(normalize_images=True)).policy_tf.scale
    assert not SAC("MlpPolicy", PENDULUM, policy_kwargs=dict(normalize_images=True)).policy_tf.scale  # not images


@pytest.mark.parametrize("algo,env,kwargs", [
    (SAC, PENDULUM, dict(net_arch=dict(pi=[24], qf=[32, 16]), n_critics=3)),
    (TD3, PENDULUM, dict(net_arch=[24, 12], n_critics=1, activation_fn="elu")),
    (DDPG, PENDULUM, dict(net_arch=dict(pi=[8], qf=[16, 8]))),
    (DQN, "CartPole-v1", dict(net_arch=[24], activation_fn="tanh")),
])
def test_save_load_identical_predictions_for_non_default_net_arch(tmp_path, algo, env, kwargs):
    extra = dict(learning_starts=20) if algo is not DDPG else dict(nb_rollout_steps=20)
    model = algo("MlpPolicy", env, seed=0, policy_kwargs=kwargs, **extra)
    model.learn(60)
    path = tmp_path / "model.zip"
    model.save(path)
    loaded = algo.load(path)
    obs = np.stack([model.observation_space.sample() for _ in range(8)])
    np.testing.assert_allclose(loaded.predict(obs, deterministic=True)[0], model.predict(obs, deterministic=True)[0],
                               atol=1e-6)
    assert loaded.policy_kwargs == model.policy_kwargs


def test_sac_with_three_critics_learns_pendulum():
    model = SAC("MlpPolicy", PENDULUM, seed=0, learning_rate=1e-3, learning_starts=200, batch_size=128,
                policy_kwargs=dict(net_arch=[64, 64], n_critics=3))
    before, _ = evaluate_policy(model, model.get_env(), n_eval_episodes=3)
    # 3,500 steps sat on Pendulum's learning edge (seeds 0-2: -990, -918, -498 on one CPU, above -900 on another);
    # at 5,000 steps seeds 0 and 1 reach -123 and -167
    model.learn(5000)
    after, _ = evaluate_policy(model, model.get_env(), n_eval_episodes=5)
    assert after > before + 300 and after > -600, (before, after)


@pytest.mark.parametrize("handle", [True, False])
def test_handle_timeout_termination_in_replay_buffer_kwargs(handle):
    """SB3's ``replay_buffer_kwargs=dict(handle_timeout_termination=...)``: True (default) stores a time-limit cut
    with done = 0 (bootstrapped), False stores it as a terminal; the option survives save/load."""
    import gymnasium

    from sbtf.sb3 import SAC

    env = gymnasium.wrappers.TimeLimit(gymnasium.make("Pendulum-v1").unwrapped, max_episode_steps=20)
    model = SAC("MlpPolicy", env, buffer_size=100, learning_starts=100, seed=0,
                replay_buffer_kwargs=dict(handle_timeout_termination=handle))
    model.learn(40)
    buffer = model.replay_buffer
    assert len(buffer) == 40
    dones = buffer._dones[:len(buffer)]
    assert dones.sum() == (0 if handle else 2)  # two 20-step episodes, both cut by the time limit
