"""gSDE (sbtf.common.nn.sde) for PPO2, A2C, SAC and sbtf.contrib's TQC against a NumPy statement of stable-baselines3's
maths."""
import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from sbtf import A2C, DDPG, DQN, PPO2, SAC, TD3
from sbtf.common.cmd_util import make_vec_env
from sbtf.common.evaluation import evaluate_policy
from sbtf.common.nn.network_ops import TF_OPS
from sbtf.common.policies import MlpPolicy
from sbtf.common.nn.sde import SDE_EPSILON, ExplorationNoise, sde_std
from sbtf.sac.sac import SAC as _SAC  # noqa: F401 (SAC's policies registered)

OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACT_SPACE = gym.spaces.Box(-2.0, 2.0, (2,), np.float32)


# ------------------------------------------------------------------ NumPy statement of SB3's maths
def sb3_std(log_std, action_dim, use_expln, full_std):
    """StateDependentNoiseDistribution.get_std."""
    if use_expln:
        below = np.exp(log_std) * (log_std <= 0)
        safe = log_std * (log_std > 0) + 1e-6
        std = below + (np.log1p(safe) + 1.0) * (log_std > 0)
    else:
        std = np.exp(log_std)
    return std if full_std else np.ones((log_std.shape[0], action_dim)) * std


def sb3_log_prob_entropy(mean, latent, std, actions):
    """Normal(mean, sqrt(latent**2 @ std**2 + eps)): log_prob summed over actions, entropy summed."""
    sigma = np.sqrt(np.square(latent) @ np.square(std) + 1e-6)
    log_prob = -0.5 * ((actions - mean) / sigma) ** 2 - np.log(sigma) - 0.5 * np.log(2 * np.pi)
    entropy = 0.5 + 0.5 * np.log(2 * np.pi) + np.log(sigma)
    return log_prob.sum(-1), entropy.sum(-1)


def _sde_policy(**kwargs):
    return MlpPolicy(None, OBS_SPACE, ACT_SPACE, use_sde=True, **kwargs)


@pytest.mark.parametrize("use_expln,full_std,log_std_init", [(False, True, 0.0), (True, True, 0.5),
                                                             (True, False, -0.7), (False, False, 0.3)])
def test_log_prob_and_entropy_match_sb3(use_expln, full_std, log_std_init):
    policy = _sde_policy(use_expln=use_expln, full_std=full_std, log_std_init=log_std_init)
    rng = np.random.default_rng(0)
    head = policy.pi_head
    log_std = rng.normal(0.0, 0.8, tuple(head.log_std.shape)).astype(np.float32)
    head.log_std.assign(log_std)
    head.w.assign(rng.normal(0, 0.5, tuple(head.w.shape)).astype(np.float32))
    head.b.assign(rng.normal(0, 0.5, tuple(head.b.shape)).astype(np.float32))
    policy.weights_changed()
    obs = rng.uniform(-1, 1, (5, 3)).astype(np.float32)
    flat, _, latent = policy.sde_network(TF_OPS, tf.constant(obs))
    latent = latent.numpy()
    mean = latent @ head.w.numpy() + head.b.numpy()
    std = sb3_std(log_std.astype(np.float64), 2, use_expln, full_std)
    np.testing.assert_allclose(sde_std(log_std, 2, use_expln, full_std, numpy=True), std, rtol=1e-5)
    actions = rng.normal(0, 1, (5, 2)).astype(np.float32)
    want_logp, want_entropy = sb3_log_prob_entropy(mean, latent, std, actions)
    dist = policy.proba_distribution_from_flat(flat)
    np.testing.assert_allclose(-dist.neglogp(actions).numpy(), want_logp, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(dist.entropy().numpy(), want_entropy, rtol=1e-4, atol=1e-4)
    # the NumPy acting path gives the same parameters and log-probabilities
    action, _, _, neglogp = policy.step(obs)
    np_want, _ = sb3_log_prob_entropy(mean, latent, std, action)
    np.testing.assert_allclose(-neglogp, np_want, rtol=1e-4, atol=1e-4)


def test_actions_are_mean_plus_latent_times_exploration_matrix():
    policy = _sde_policy(log_std_init=-0.5)
    obs = np.random.default_rng(1).uniform(-1, 1, (4, 3)).astype(np.float32)
    flat, _, latent = (t.numpy() for t in policy.sde_network(TF_OPS, tf.constant(obs)))
    policy.reset_noise(4)
    noise = policy.sde_noise
    action = policy.act(obs)[0]
    want = flat[:, :2] + np.einsum("bi,bij->bj", latent, noise.matrices)  # one matrix per env (SB3's get_noise)
    np.testing.assert_allclose(action, want, rtol=1e-5, atol=1e-6)
    single = policy.act(obs[:1])[0]
    np.testing.assert_allclose(single, flat[:1, :2] + latent[:1] @ noise.matrix, rtol=1e-5, atol=1e-6)
    # matrices are N(0, std**2): std of the samples follows the std matrix (exp(-0.5) everywhere)
    big = ExplorationNoise(np.random.default_rng(0))
    big.reset(np.full((64, 2), np.exp(-0.5), np.float32), 200)
    assert abs(big.matrices.std() - np.exp(-0.5)) < 0.02
    np.testing.assert_allclose(policy.act(obs, deterministic=True)[0], flat[:, :2], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("freq,n_steps,expected", [(4, 16, 4), (1, 8, 8), (-1, 16, 1), (5, 16, 4)])
def test_resampling_frequency_on_policy(freq, n_steps, expected):
    model = PPO2("MlpPolicy", "Pendulum-v1", n_steps=n_steps, nminibatches=1, noptepochs=1, use_sde=True,
                 sde_sample_freq=freq, seed=0)
    noise = model.policy_tf.sde_noise
    seen = []
    original = noise.reset

    def spy(std, n_envs):
        seen.append(noise.steps)
        original(std, n_envs)

    noise.reset = spy
    model.learn(2 * n_steps)
    assert len(seen) == 2 * expected  # per rollout: one at its start, then every freq steps
    if freq > 0:
        assert seen[:expected] == [0] + [k * freq for k in range(1, expected)]
    # predict() does not resample
    before = len(seen)
    model.predict(np.zeros(3, np.float32))
    assert len(seen) == before


def test_matrix_is_kept_between_resamples():
    model = A2C("MlpPolicy", "Pendulum-v1", n_steps=6, use_sde=True, sde_sample_freq=3, seed=0)
    noise = model.policy_tf.sde_noise
    matrices = []
    original = noise.noise

    def spy(latent):
        matrices.append(noise.matrix.copy())
        return original(latent)

    noise.noise = spy
    model.learn(6)
    assert len(matrices) == 6
    for a, b in ((0, 1), (1, 2), (3, 4), (4, 5)):
        np.testing.assert_array_equal(matrices[a], matrices[b])
    assert not np.array_equal(matrices[2], matrices[3])


def test_sac_resampling_and_warmup():
    model = SAC("MlpPolicy", "Pendulum-v1", use_sde=True, sde_sample_freq=2, train_freq=6, gradient_steps=1,
                learning_starts=12, use_sde_at_warmup=True, batch_size=8, seed=0)
    noise = model.policy_tf.sde_noise
    model.learn(24)
    assert noise.n_resets == 4 * 3  # 4 collections of 6 steps, resampled at steps 0, 2, 4 of each
    model = SAC("MlpPolicy", "Pendulum-v1", use_sde=True, train_freq=6, learning_starts=12, batch_size=8, seed=0)
    model.learn(24)
    assert model.policy_tf.sde_noise.n_resets == 2  # uniform random actions during warm-up


@pytest.mark.parametrize("algo,kwargs", [(PPO2, dict(n_steps=32, nminibatches=2)), (A2C, dict(n_steps=8)),
                                         (SAC, dict(learning_starts=20, batch_size=16))])
def test_save_load_identical_predictions(algo, kwargs, tmp_path):
    model = algo("MlpPolicy", "Pendulum-v1", use_sde=True, sde_sample_freq=4, seed=0,
                 policy_kwargs=dict(log_std_init=-1.0, use_expln=True, full_std=False), **kwargs)
    model.learn(64)
    path = str(tmp_path / "model.zip")
    model.save(path)
    loaded = algo.load(path)
    assert loaded.use_sde and loaded.sde_sample_freq == 4
    obs = np.random.default_rng(0).uniform(-1, 1, (7, 3)).astype(np.float32)
    np.testing.assert_array_equal(model.predict(obs, deterministic=True)[0], loaded.predict(obs, deterministic=True)[0])
    name = "model/pi/log_std:0"
    np.testing.assert_array_equal(model.get_parameters()[name], loaded.get_parameters()[name])
    assert model.get_parameters()[name].shape[1] == 1  # full_std=False


def test_log_std_is_trained():
    model = PPO2("MlpPolicy", "Pendulum-v1", n_steps=32, nminibatches=1, use_sde=True, seed=0)
    before = model.get_parameters()["model/pi/log_std:0"].copy()
    model.learn(32)
    assert not np.allclose(before, model.get_parameters()["model/pi/log_std:0"])
    model = SAC("MlpPolicy", "Pendulum-v1", use_sde=True, learning_starts=16, batch_size=16, seed=0)
    before = model.get_parameters()["model/pi/log_std:0"].copy()
    np.testing.assert_allclose(before, -3.0)  # SB3's SAC default log_std_init
    model.learn(40)
    assert not np.allclose(before, model.get_parameters()["model/pi/log_std:0"])


def test_unsupported_raise_clear_errors():
    with pytest.raises(ValueError, match="TD3 does not support gSDE"):
        TD3("MlpPolicy", "Pendulum-v1", use_sde=True)
    with pytest.raises(ValueError, match="DDPG does not support gSDE"):
        DDPG("MlpPolicy", "Pendulum-v1", use_sde=True)
    with pytest.raises(ValueError, match="DQN does not support gSDE"):
        DQN("MlpPolicy", "CartPole-v1", policy_kwargs=dict(use_sde=True))
    with pytest.raises(ValueError, match=r"PPO2\(\.\.\., use_sde=True\)"):
        PPO2("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(use_sde=True))
    with pytest.raises(ValueError, match="Box action space"):
        PPO2("MlpPolicy", "CartPole-v1", use_sde=True)
    with pytest.raises(ValueError, match="recurrent"):
        PPO2("MlpLstmPolicy", "Pendulum-v1", use_sde=True, nminibatches=1)
    with pytest.raises(ValueError, match="only available when using gSDE"):
        PPO2("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(squash_output=True))
    with pytest.raises(ValueError, match="only available when using gSDE"):
        A2C("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(squash_output=True))
    with pytest.raises(ValueError, match="must be finite"):
        MlpPolicy(None, OBS_SPACE, gym.spaces.Box(-np.inf, np.inf, (2,), np.float32), use_sde=True,
                  squash_output=True)
    # without gSDE, log_std_init sets the Gaussian's initial log std (SB3); use_expln/full_std are ignored
    model = A2C("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(log_std_init=-0.5, use_expln=True, full_std=False))
    np.testing.assert_allclose(model.get_parameters()["model/pi/logstd:0"], -0.5)


def _learning_gain(timesteps, seed=0, **policy_kwargs):
    """Deterministic return on Pendulum-v1 before and after ``timesteps`` of PPO2 + gSDE (rl-zoo's gSDE settings,
    smaller rollouts)."""
    env = make_vec_env("Pendulum-v1", n_envs=4, seed=seed)
    model = PPO2("MlpPolicy", env, n_steps=256, nminibatches=4, noptepochs=10, gamma=0.9, lam=0.95, ent_coef=0.0,
                 learning_rate=1e-3, use_sde=True, sde_sample_freq=4, seed=seed,
                 policy_kwargs=dict(dict(log_std_init=-1.0, activation_fn="relu",
                                         net_arch=dict(pi=[64, 64], vf=[64, 64])), **policy_kwargs))
    # before and after on the same 10 start states (Pendulum's return depends on the start as much as on the policy)
    before = evaluate_policy(model, make_vec_env("Pendulum-v1", n_envs=1, seed=1000 + seed), n_eval_episodes=10)[0]
    model.learn(timesteps)
    return before, evaluate_policy(model, make_vec_env("Pendulum-v1", n_envs=1, seed=1000 + seed),
                                   n_eval_episodes=10)[0]


def test_ppo2_sde_improves_on_pendulum():
    before, after = _learning_gain(30_000)  # measured: about -1200 -> -470
    assert after > before + 300, (before, after)


def test_ppo2_sde_squash_output_improves_on_pendulum():
    before, after = _learning_gain(30_000, squash_output=True)  # measured: -1290 -> -840 (seed 1: -1390 -> -1030)
    assert after > before + 300, (before, after)


@pytest.mark.slow
def test_ppo2_sde_learns_pendulum():
    before, after = _learning_gain(90_000)  # measured: about -160
    assert after > -400, (before, after)


@pytest.mark.slow
def test_sac_sde_learns_pendulum():
    model = SAC("MlpPolicy", "Pendulum-v1", use_sde=True, learning_rate=1e-3, learning_starts=500, batch_size=128,
                seed=0, policy_kwargs=dict(net_arch=[64, 64]))
    model.learn(5000)  # measured: about -150 (random: about -1200)
    assert evaluate_policy(model, model.get_env(), n_eval_episodes=4)[0] > -500


@pytest.mark.parametrize("algo", [PPO2, SAC])
def test_export_equals_predict(algo, tmp_path):
    pytest.importorskip("sbtf_converters")
    model = algo("MlpPolicy", "Pendulum-v1", use_sde=True, seed=0)
    model.learn(200)
    loaded = tf.saved_model.load(model.export(str(tmp_path / "exported"), format="savedmodel"))
    obs = np.random.default_rng(0).uniform(-1, 1, (5, 3)).astype(np.float32)
    exported = loaded.signatures["serving_default"](tf.constant(obs))["action"].numpy()
    np.testing.assert_allclose(exported, model.predict(obs, deterministic=True)[0], atol=1e-5)


# ------------------------------------------------------------------ squash_output=True (PPO2, A2C)
ASYM_SPACE = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([1.0, 5.0], np.float32))


def sb3_squashed_log_prob(mean, sigma, actions):
    """StateDependentNoiseDistribution.log_prob with squash_output=True (TanhBijector): the Gaussian's log_prob at
    u = atanh(clamp(a, -1 + eps, 1 - eps)) minus sum log(1 - tanh(u)**2 + 1e-6); eps = finfo(float32).eps."""
    eps = float(np.finfo(np.float32).eps)
    a = np.clip(np.asarray(actions, np.float64), -1.0 + eps, 1.0 - eps)
    u = 0.5 * (np.log1p(a) - np.log1p(-a))
    log_prob = (-0.5 * ((u - mean) / sigma) ** 2 - np.log(sigma) - 0.5 * np.log(2 * np.pi)).sum(-1)
    return log_prob - np.log(1.0 - np.tanh(u) ** 2 + 1e-6).sum(-1)


def sb3_unscale(space, scaled):
    """BasePolicy.unscale_action."""
    return space.low + 0.5 * (scaled + 1.0) * (space.high - space.low)


class _AsymBoxEnv(gym.Env):
    """Random observations, asymmetric action bounds; records the actions it receives."""

    observation_space = OBS_SPACE
    action_space = ASYM_SPACE
    received: list = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        self.t += 1
        _AsymBoxEnv.received.append(np.array(action, np.float32))
        return self.observation_space.sample(), -float(np.sum(np.square(action))), False, self.t >= 10, {}


def _capture_train(model):
    """Wrap ``model.train``: record (flat params before the update, rollout batch, statistics) of each update."""
    seen = []
    original = model.train

    def train(batch):
        flat = model.policy_tf.flat_params(batch.observations).astype(np.float64)
        stats = original(batch)
        copy = dataclasses.replace(batch, **{name: None if value is None else np.array(value) for name, value in
                                             vars(batch).items() if isinstance(value, np.ndarray) or value is None})
        seen.append((flat, copy, stats))  # the rollout buffer's arrays are reused by the next rollout
        return stats

    model.train = train
    return seen


@pytest.mark.parametrize("use_expln,full_std", [(False, True), (True, False)])
def test_squashed_log_prob_mode_and_actions_match_sb3(use_expln, full_std):
    policy = _sde_policy(squash_output=True, use_expln=use_expln, full_std=full_std, log_std_init=0.3)
    assert policy.squash_output
    rng = np.random.default_rng(3)
    head = policy.pi_head
    log_std = rng.normal(0.0, 0.6, tuple(head.log_std.shape)).astype(np.float32)
    head.log_std.assign(log_std)
    head.w.assign(rng.normal(0, 0.5, tuple(head.w.shape)).astype(np.float32))
    policy.weights_changed()
    obs = rng.uniform(-1, 1, (6, 3)).astype(np.float32)
    flat, _, latent = (t.numpy() for t in policy.sde_network(TF_OPS, tf.constant(obs)))
    mean = latent @ head.w.numpy() + head.b.numpy()
    std = sb3_std(log_std.astype(np.float64), 2, use_expln, full_std)
    sigma = np.sqrt(np.square(latent) @ np.square(std) + 1e-6)
    # interior actions, actions close to the bounds, and the bounds themselves (clipped before atanh)
    actions = np.stack([rng.uniform(-0.9, 0.9, 2), [0.999, -0.9995], [-0.99, 0.5], rng.uniform(-1, 1, 2),
                        [0.0, 0.0], rng.uniform(-0.5, 0.5, 2)]).astype(np.float32)
    dist = policy.proba_distribution_from_flat(tf.constant(flat))
    assert dist.entropy() is None  # no closed form: PPO2/A2C use -mean(log_prob)
    np.testing.assert_allclose(-dist.neglogp(tf.constant(actions)).numpy(), sb3_squashed_log_prob(mean, sigma, actions),
                               rtol=1e-4, atol=2e-3)
    edges = np.array([[1.0, -1.0]], np.float32)  # at +-1 only finiteness is meaningful in float32
    assert np.all(np.isfinite(dist.neglogp(tf.constant(edges)).numpy()))
    np.testing.assert_allclose(dist.mode().numpy(), np.tanh(mean), rtol=1e-5, atol=1e-6)
    # acting: actions are tanh(mean + latent @ E) and their neglogp is SB3's (NumPy path)
    policy.reset_noise(6)
    action, _, _, neglogp = policy.step(obs)
    want = np.tanh(mean + np.einsum("bi,bij->bj", latent, policy.sde_noise.matrices))
    np.testing.assert_allclose(action, want, rtol=1e-5, atol=1e-5)
    assert np.all(np.abs(action) <= 1.0)
    np.testing.assert_allclose(-neglogp, sb3_squashed_log_prob(mean, sigma, action), rtol=1e-4, atol=2e-3)
    np.testing.assert_allclose(policy.step(obs, deterministic=True)[0], np.tanh(mean), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("algo,kwargs", [(PPO2, dict(n_steps=32, nminibatches=1, noptepochs=1, ent_coef=0.01)),
                                         (A2C, dict(n_steps=16, ent_coef=0.01))])
def test_squashed_entropy_term_is_minus_mean_log_prob(algo, kwargs):
    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0)
    model = algo("MlpPolicy", env, use_sde=True, seed=0, policy_kwargs=dict(squash_output=True, log_std_init=0.5),
                 **kwargs)
    seen = _capture_train(model)
    model.learn(2 * kwargs["n_steps"] * 2)
    assert len(seen) == 2
    for flat, batch, stats in seen:
        assert np.all(np.abs(batch.actions) <= 1.0)  # the rollout stores the squashed actions (SB3's buffer)
        mean, logstd = np.split(flat, 2, axis=-1)
        log_prob = sb3_squashed_log_prob(mean, np.exp(logstd), batch.actions)
        if batch.neg_log_probs is not None:  # PPO2 records the acting log-probabilities
            np.testing.assert_allclose(-batch.neg_log_probs, log_prob, rtol=1e-4, atol=2e-3)
        if algo is PPO2:
            np.testing.assert_allclose(stats["policy_entropy"], -np.mean(log_prob), rtol=1e-4, atol=1e-3)
            assert stats["approxkl"] < 1e-8 and stats["clipfrac"] == 0.0  # acting and training log-probs agree
        else:
            np.testing.assert_allclose(stats["entropy"], -np.mean(log_prob), rtol=1e-4, atol=1e-3)
            pg_loss = np.mean((batch.returns - batch.values) * -log_prob)
            np.testing.assert_allclose(stats["policy_gradient_loss"], pg_loss, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("algo,kwargs", [(PPO2, dict(n_steps=16, nminibatches=1)), (A2C, dict(n_steps=8))])
def test_squashed_actions_stay_in_bounds(algo, kwargs):
    _AsymBoxEnv.received = []
    model = algo("MlpPolicy", _AsymBoxEnv(), use_sde=True, seed=0,
                 policy_kwargs=dict(squash_output=True, log_std_init=1.5), **kwargs)
    seen = _capture_train(model)
    model.learn(2 * kwargs["n_steps"])
    received = np.array(_AsymBoxEnv.received)
    assert len(received) == 2 * kwargs["n_steps"]
    assert np.all(received >= ASYM_SPACE.low) and np.all(received <= ASYM_SPACE.high)
    # the env got unscale_action(stored squashed action), not a clipped one
    stored = np.concatenate([batch.actions for _, batch, _ in seen])
    np.testing.assert_allclose(received, sb3_unscale(ASYM_SPACE, stored), rtol=1e-5, atol=1e-5)
    assert np.std(received[:, 1]) > 0.3  # large noise: actions spread over the bounds, not stuck at a clip
    obs = np.random.default_rng(0).uniform(-1, 1, (50, 3)).astype(np.float32)
    for deterministic in (False, True):
        act = model.predict(obs, deterministic=deterministic)[0]
        assert act.shape == (50, 2) and np.all(act >= ASYM_SPACE.low) and np.all(act <= ASYM_SPACE.high)
    mean = model.policy_tf.flat_params(obs)[:, :2]
    np.testing.assert_allclose(model.predict(obs, deterministic=True)[0], sb3_unscale(ASYM_SPACE, np.tanh(mean)),
                               rtol=1e-5, atol=1e-5)
    # behaviour cloning fits the same deterministic action
    np.testing.assert_allclose(model._pretrain_output(tf.constant(obs)).numpy(),
                               model.predict(obs, deterministic=True)[0], rtol=1e-5, atol=1e-5)
    # action_probability of env-scale actions: SB3's log_prob of the actions scaled to [-1, 1]
    actions = model.predict(obs)[0]
    mean, std = model.action_probability(obs)
    scaled = 2.0 * (actions - ASYM_SPACE.low) / (ASYM_SPACE.high - ASYM_SPACE.low) - 1.0
    np.testing.assert_allclose(model.action_probability(obs, actions=actions, logp=True).ravel(),
                               sb3_squashed_log_prob(mean, std, scaled), rtol=1e-4, atol=2e-3)


@pytest.mark.parametrize("algo,kwargs", [(PPO2, dict(n_steps=32, nminibatches=2)), (A2C, dict(n_steps=8))])
def test_squashed_save_load_and_export(algo, kwargs, tmp_path):
    model = algo("MlpPolicy", _AsymBoxEnv(), use_sde=True, sde_sample_freq=4, seed=0,
                 policy_kwargs=dict(squash_output=True, log_std_init=-0.5), **kwargs)
    model.learn(64)
    path = str(tmp_path / "model.zip")
    model.save(path)
    loaded = algo.load(path)
    assert loaded.policy_tf.squash_output and loaded.policy_kwargs["squash_output"] is True
    obs = np.random.default_rng(0).uniform(-1, 1, (7, 3)).astype(np.float32)
    expected = model.predict(obs, deterministic=True)[0]
    np.testing.assert_array_equal(expected, loaded.predict(obs, deterministic=True)[0])
    loaded.policy_tf.sde_noise.matrix = model.policy_tf.sde_noise.matrix  # same exploration matrix: same samples
    np.testing.assert_allclose(model.predict(obs[:1])[0], loaded.predict(obs[:1])[0], rtol=1e-6)
    pytest.importorskip("sbtf_converters")
    serve = tf.saved_model.load(loaded.export(str(tmp_path / "saved"), format="savedmodel"))
    exported = serve.signatures["serving_default"](tf.constant(obs))["action"].numpy()
    np.testing.assert_allclose(exported, expected, atol=1e-5)
    pytest.importorskip("tf2onnx")
    ort = pytest.importorskip("onnxruntime")
    onnx_path = loaded.export(str(tmp_path / "policy.onnx"), format="onnx")
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    names = [out.name for out in session.get_outputs()]
    got = dict(zip(names, session.run(None, {session.get_inputs()[0].name: obs})))
    np.testing.assert_allclose(got["action"], expected, atol=1e-5)


# ------------------------------------------------------------------ TQC (sb3-contrib) with gSDE
def _tqc(**kwargs):
    from sbtf.contrib import TQC

    kwargs.setdefault("policy_kwargs", {})
    kwargs["policy_kwargs"] = dict(dict(net_arch=[16], n_quantiles=5), **kwargs["policy_kwargs"])
    return TQC("MlpPolicy", "Pendulum-v1", use_sde=True, **kwargs)


@pytest.mark.parametrize("use_expln,full_std,clip_mean", [(False, True, 2.0), (True, False, 0.0), (True, True, 0.5)])
def test_tqc_actor_and_squashed_log_prob_match_sb3(use_expln, full_std, clip_mean):
    from sbtf.contrib.tqc.tqc import squashed_sde_sample

    model = _tqc(policy_kwargs=dict(use_expln=use_expln, full_std=full_std, clip_mean=clip_mean, log_std_init=-1.0))
    actor = model.policy_tf.actor
    rng = np.random.default_rng(0)
    log_std = rng.normal(0.0, 0.8, tuple(actor.log_std.log_std.shape)).astype(np.float32)
    assert log_std.shape == (16, 1)  # Pendulum: one action (full_std or not)
    actor.log_std.log_std.assign(log_std)
    actor.mu.kernel.assign(rng.normal(0, 2.0, tuple(actor.mu.kernel.shape)).astype(np.float32))
    model.policy_tf.weights_changed()
    obs = rng.uniform(-1, 1, (6, 3)).astype(np.float32)
    mean, latent, std = (t.numpy() for t in actor.sde(tf.constant(obs)))
    raw_mean = latent @ actor.mu.kernel.numpy() + actor.mu.bias.numpy()
    want_mean = np.clip(raw_mean, -clip_mean, clip_mean) if clip_mean > 0 else raw_mean  # sb3's Hardtanh
    np.testing.assert_allclose(mean, want_mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(std, sb3_std(log_std.astype(np.float64), 1, use_expln, full_std), rtol=1e-5)
    noise = rng.normal(size=std.shape).astype(np.float32)
    action, log_prob = (t.numpy() for t in squashed_sde_sample(*actor.sde(tf.constant(obs)), tf.constant(noise)))
    gaussian = mean + latent @ (std * noise)  # sb3: mean + latent_sde @ exploration_mat (rsample of N(0, std))
    np.testing.assert_allclose(action, np.tanh(gaussian), rtol=1e-5, atol=1e-6)
    want_logp, _ = sb3_log_prob_entropy(mean, latent, std, gaussian)
    want_logp -= np.log(1.0 - np.tanh(gaussian) ** 2 + SDE_EPSILON).sum(-1)  # TanhBijector's correction
    np.testing.assert_allclose(log_prob, want_logp, rtol=1e-4, atol=1e-4)
    # the acting path: tanh(mean + latent @ E), the matrix of the policy's ExplorationNoise
    policy = model.policy_tf
    policy.reset_noise(1)
    np.testing.assert_allclose(policy.step(obs[:1]), np.tanh(mean[:1] + latent[:1] @ policy.sde_noise.matrix),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(policy.step(obs, deterministic=True), np.tanh(mean), rtol=1e-5, atol=1e-6)


def test_tqc_train_step_uses_one_matrix_for_state_and_next_state():
    """Actor and critic losses of one compiled gSDE step (learning rate 0, ent_coef 0) against NumPy: the actions
    of the state and of the next state are drawn with the same exploration matrix ``std * N(0, 1)`` (sb3 samples
    it once per gradient step)."""
    from test_qrdqn import numpy_quantile_huber_loss
    from test_tqc import numpy_truncated_target

    model = _tqc(batch_size=8, ent_coef=0.0, policy_kwargs=dict(log_std_init=-0.5, n_critics=2), seed=1)
    policy = model.policy_tf
    rng = np.random.default_rng(5)
    obs, next_obs = rng.normal(size=(1, 8, 3)).astype(np.float32), rng.normal(size=(1, 8, 3)).astype(np.float32)
    actions = rng.uniform(-1, 1, size=(1, 8, 1)).astype(np.float32)
    rewards, dones = rng.normal(size=(1, 8)).astype(np.float32), (rng.random((1, 8)) < 0.3).astype(np.float32)
    seeds = np.array([[3.0, 7.0]], np.float32)
    _, _, std = (t.numpy() for t in policy.actor.sde(tf.constant(obs[0])))
    matrix = std * tf.random.stateless_normal(std.shape, seed=[3, 7]).numpy()

    def squashed(x):
        mean, latent, _ = (t.numpy() for t in policy.actor.sde(tf.constant(x)))
        return np.tanh(mean + latent @ matrix)

    next_quantiles = policy.critic_target.quantiles(tf.constant(next_obs[0]), tf.constant(squashed(next_obs[0])))
    target = numpy_truncated_target(next_quantiles.numpy(), 10 - 2 * 2, rewards[0], dones[0], 0.99, np.zeros(8))
    current = policy.critic.quantiles(tf.constant(obs[0]), tf.constant(actions[0])).numpy()
    qf_pi = policy.critic.quantiles(tf.constant(obs[0]), tf.constant(squashed(obs[0]))).numpy().mean(axis=(1, 2))
    out = model._train_steps.get(1)(obs=obs, next_obs=next_obs, actions=actions, rewards=rewards, dones=dones,
                                    learning_rate=0.0, seeds=seeds, flags=np.zeros(1, np.float32))
    np.testing.assert_allclose(out["critic_loss"], numpy_quantile_huber_loss(current, target, False), rtol=1e-4)
    np.testing.assert_allclose(out["actor_loss"], -qf_pi.mean(), rtol=1e-4, atol=1e-5)


def test_tqc_resampling_warmup_and_log_std_training():
    model = _tqc(sde_sample_freq=2, train_freq=6, gradient_steps=1, learning_starts=12, use_sde_at_warmup=True,
                 batch_size=8, seed=0)
    before = model.get_parameters()["policy"]["model/actor/log_std:0"].copy()
    np.testing.assert_allclose(before, -3.0)  # sb3-contrib's TQC default log_std_init
    model.learn(24)
    assert model.policy_tf.sde_noise.n_resets == 4 * 3  # 4 collections of 6 steps, resampled at steps 0, 2, 4
    assert not np.allclose(before, model.get_parameters()["policy"]["model/actor/log_std:0"])  # trained (rsample)
    plain = _tqc(train_freq=6, learning_starts=12, batch_size=8, seed=0)
    plain.learn(24)
    assert plain.policy_tf.sde_noise.n_resets == 2  # uniform random actions during warm-up
    with pytest.raises(ValueError, match=r"TQC\(\.\.\., use_sde=True\)"):
        _tqc(policy_kwargs=dict(use_sde=True))


def test_tqc_save_load_identical_predictions_and_export(tmp_path):
    from sbtf.contrib import TQC

    model = _tqc(sde_sample_freq=4, learning_starts=20, batch_size=16, seed=0,
                 policy_kwargs=dict(log_std_init=-1.0, use_expln=True, full_std=False))
    model.learn(64)
    model.save(tmp_path / "tqc")
    loaded = TQC.load(tmp_path / "tqc")
    assert loaded.use_sde and loaded.sde_sample_freq == 4 and loaded.policy_tf.use_sde
    obs = np.random.default_rng(0).uniform(-1, 1, (7, 3)).astype(np.float32)
    np.testing.assert_array_equal(model.predict(obs, deterministic=True)[0], loaded.predict(obs, deterministic=True)[0])
    for name, value in model.get_parameters()["policy"].items():
        np.testing.assert_array_equal(loaded.get_parameters()["policy"][name], value)
    assert model.get_parameters()["policy"]["model/actor/log_std:0"].shape == (16, 1)  # full_std=False
    serve = tf.saved_model.load(loaded.export(str(tmp_path / "saved"))).signatures["serving_default"]
    out = serve(observation=tf.constant(obs))
    np.testing.assert_allclose(out["action"].numpy(), model.predict(obs, deterministic=True)[0], atol=1e-5)
    mean, std = model.policy_tf.proba_step(obs)  # N(mean, sqrt(latent**2 @ std**2 + 1e-6))
    np.testing.assert_allclose(out["std"].numpy(), std, rtol=1e-5, atol=1e-6)


def test_tqc_sde_improves_on_pendulum():
    from sbtf.contrib import TQC

    model = TQC("MlpPolicy", "Pendulum-v1", use_sde=True, learning_rate=1e-3, train_freq=64, gradient_steps=64,
                learning_starts=100, seed=0, policy_kwargs=dict(net_arch=[64, 64]))
    def seeded_eval() -> float:  # the same start states before and after (unseeded they dominate 4 episodes)
        env = gym.make("Pendulum-v1")
        env.reset(seed=123)
        return evaluate_policy(model, env, n_eval_episodes=4)[0]

    before = seeded_eval()
    model.learn(3500)
    after = seeded_eval()
    assert after > before + 300 and after > -700, (before, after)
