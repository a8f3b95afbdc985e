"""TrainStep: named inputs/outputs, packing, lazy tracing, and acting weights installed into policies."""
import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from sbtf.common.compile.fast_call import TrainStep


def _mixed_step(**kwargs):
    def fn(obs, scale, counts, lengths, extra):
        total = tf.reduce_sum(obs, axis=1) * scale
        return {"total": total, "count_sum": tf.reduce_sum(counts), "scale": scale,
                "mean_length": tf.reduce_mean(lengths), "extra_sum": tf.reduce_sum(extra),
                "matrix": tf.reshape(obs, (2, 6))}

    inputs = {"obs": tf.TensorSpec((4, 3), tf.float32), "scale": tf.TensorSpec((), tf.float32),
              "counts": tf.TensorSpec((5,), tf.int64), "lengths": tf.TensorSpec((None,), tf.float32),
              "extra": tf.TensorSpec((2,), tf.float64)}
    return TrainStep(fn, inputs=inputs, name="mixed", **kwargs)


def test_named_outputs_and_mixed_dtypes():
    step = _mixed_step()
    obs = np.arange(12, dtype=np.float64).reshape(4, 3)  # float64 data for a float32 input: converted
    out = step(obs=obs, scale=0.5, counts=np.arange(5), lengths=np.array([1.0, 2.0, 6.0], np.float32),
               extra=np.array([0.25, 0.5]))
    assert set(out) == {"total", "count_sum", "scale", "mean_length", "extra_sum", "matrix"}
    np.testing.assert_allclose(out["total"], obs.sum(axis=1) * 0.5)
    assert out["total"].shape == (4,)
    assert out["count_sum"] == 10 and out["count_sum"].dtype == np.int64
    assert out["scale"].shape == () and float(out["scale"]) == 0.5
    assert float(out["mean_length"]) == pytest.approx(3.0)
    assert out["extra_sum"].dtype == np.float64 and float(out["extra_sum"]) == 0.75
    np.testing.assert_array_equal(out["matrix"], obs.reshape(2, 6))


def test_float32_inputs_are_packed_into_one_tensor():
    step = _mixed_step()
    step(obs=np.zeros((4, 3)), scale=1.0, counts=np.zeros(5, np.int64), lengths=np.zeros(1, np.float32),
         extra=np.zeros(2))
    concrete = step._functions[step.jit_compile].concrete
    n_args = len(concrete.inputs) - len(concrete.captured_inputs)
    # one packed float32 vector (obs + scale) plus the three inputs of other dtypes or dynamic shape
    assert n_args == 4
    assert concrete.inputs[0].shape.as_list() == [13]


def test_lazy_trace_and_no_retrace():
    step = _mixed_step()
    assert step.n_traces == 0 and not step.traced
    rng = np.random.default_rng(0)
    for i in range(50):
        n = 1 + i % 7  # the dynamic-length input changes length: still one trace
        out = step(obs=rng.normal(size=(4, 3)), scale=float(i), counts=rng.integers(0, 9, 5),
                   lengths=np.ones(n, np.float32), extra=rng.normal(size=2))
        assert float(out["scale"]) == float(i)
    assert step.n_traces == 1


def test_input_names_are_checked():
    step = _mixed_step()
    with pytest.raises(TypeError, match="missing inputs \\['extra'\\]"):
        step(obs=np.zeros((4, 3)), scale=1.0, counts=np.zeros(5), lengths=np.zeros(1))
    with pytest.raises(TypeError, match="unknown inputs \\['bogus'\\]"):
        step(obs=np.zeros((4, 3)), scale=1.0, counts=np.zeros(5), lengths=np.zeros(1), extra=np.zeros(2),
             bogus=1)


def test_fn_must_return_a_dict():
    step = TrainStep(lambda x: x * 2, inputs={"x": tf.TensorSpec((), tf.float32)})
    with pytest.raises(TypeError, match="dict of named tensors"):
        step(x=1.0)


def _perturb_step(policy, variables, n_obs: int):
    """A 'train step' that moves every variable and returns a named statistic."""

    def fn(obs, delta):
        for var in variables:
            var.assign_add(delta * tf.ones_like(var))
        return {"obs_mean": tf.reduce_mean(tf.cast(obs, tf.float32))}

    return TrainStep(fn, inputs={"obs": policy.obs_signature(n_obs), "delta": tf.TensorSpec((), tf.float32)},
                     name="perturb")


def test_updates_install_acting_weights_actor_critic():
    from sbtf.common.policies import MlpPolicy

    policy = MlpPolicy(ob_space=gym.spaces.Box(-1, 1, (4,)), ac_space=gym.spaces.Discrete(2), n_env=1)
    obs = np.random.default_rng(1).normal(size=(8, 4)).astype(np.float32)
    policy.value(obs)  # the acting path has read the weights once
    reads = policy.n_weight_reads
    step = _perturb_step(policy, policy.parameter_list(), 8)
    for _ in range(3):
        out = step(obs=obs, delta=0.01)
        assert float(out["obs_mean"]) == pytest.approx(float(obs.mean()), abs=1e-6)
        flat, value = policy(tf.constant(obs))
        np.testing.assert_allclose(policy.value(obs), value.numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(policy.flat_params(obs), flat.numpy(), rtol=1e-5, atol=1e-5)
    assert policy.n_weight_reads == reads  # acting used the installed weights: no extra read from TF
    assert step.n_traces == 1


def test_updates_install_acting_weights_sac():
    from sbtf.sac.policies import MlpPolicy

    policy = MlpPolicy(ob_space=gym.spaces.Box(-1, 1, (3,)), ac_space=gym.spaces.Box(-1, 1, (2,)))
    policy.make_actor()
    policy.make_critics()
    obs = np.random.default_rng(2).normal(size=(5, 3)).astype(np.float32)
    policy.step(obs, deterministic=True)
    reads = policy.n_weight_reads
    step = _perturb_step(policy, policy.actor_variables(), 5)
    for _ in range(3):
        step(obs=obs, delta=0.02)
        np.testing.assert_allclose(policy.step(obs, deterministic=True), policy(tf.constant(obs)).numpy(),
                                   rtol=1e-5, atol=1e-5)
    assert policy.n_weight_reads == reads


def test_jit_compiled_step_updates_dqn_and_ddpg_policies():
    from sbtf.ddpg.policies import MlpPolicy as DDPGMlp
    from sbtf.deepq.policies import MlpPolicy as DQNMlp

    q_net = DQNMlp(ob_space=gym.spaces.Box(-1, 1, (3,)), ac_space=gym.spaces.Discrete(4))
    from sbtf.common.mpi_running_mean_std import RunningMeanStd

    ddpg = DDPGMlp(ob_space=gym.spaces.Box(-1, 1, (3,)), ac_space=gym.spaces.Box(-1, 1, (2,)))
    ddpg.make_actor()
    ddpg.make_critic()
    stats = RunningMeanStd(shape=(3,))
    stats.update(np.random.default_rng(4).normal(size=(20, 3)))
    ddpg.set_obs_normalization(stats)  # the acting path reads the statistics eagerly, also while the step is traced
    variables = q_net.acting_variables() + ddpg.actor_variables()

    def fn(delta):
        for var in variables:
            var.assign_add(delta * tf.ones_like(var))
        return {"delta": delta}

    step = TrainStep(fn, inputs={"delta": tf.TensorSpec((), tf.float32)}, networks=(q_net, ddpg, q_net),
                     jit_compile=True, name="two_policies")
    obs = np.random.default_rng(3).normal(size=(6, 3)).astype(np.float32)
    for delta in (0.01, -0.03):
        assert float(step(delta=delta)["delta"]) == pytest.approx(delta)
        np.testing.assert_allclose(q_net.q_values_np(obs), q_net(tf.constant(obs)).numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(ddpg.step(obs), ddpg(tf.constant(obs)).numpy(), rtol=1e-5, atol=1e-5)
    assert step.n_traces == 1


@pytest.mark.parametrize("algo_name", ["PPO2", "A2C", "ACKTR", "DQN", "SAC", "TD3"])
def test_load_and_predict_build_no_train_step(algo_name, tmp_path, monkeypatch):
    """Loading a model to act traces no training graph: train steps are built by the first ``learn()`` only."""
    import gymnasium as gym

    import sbtf
    from sbtf.common.compile.fast_call import TrainStep as Step

    env_id = "CartPole-v1" if algo_name in ("PPO2", "A2C", "ACKTR", "DQN") else "Pendulum-v1"
    cls = getattr(sbtf, algo_name)
    kwargs = dict(learning_starts=10) if algo_name in ("DQN", "SAC", "TD3") else {}
    cls("MlpPolicy", env_id, seed=0, **kwargs).save(str(tmp_path / "model"))

    built = []
    original_build = Step._build
    monkeypatch.setattr(Step, "_build", lambda self, jit: built.append(self.name) or original_build(self, jit))
    model = cls.load(str(tmp_path / "model"))
    obs, _ = gym.make(env_id).reset(seed=0)
    model.predict(obs, deterministic=True)
    model.predict(obs[None], deterministic=False)
    assert built == []
    # the check can fail: learning builds one
    model.set_env(sbtf.common.make_vec_env(env_id, n_envs=1, seed=0))
    model.learn(256)
    assert built


def test_steps_trace_without_autograph_and_repeat_steps_runs_in_order():
    """TrainStep traces without autograph by default; repeat_steps runs stateful steps one after the other."""
    from sbtf.common.tf_util import repeat_steps

    var = tf.Variable(1.0)

    def fn(x):
        def step(k, total):
            var.assign(var * 2.0 + tf.cast(k, tf.float32))  # order matters: 1 -> 2 -> 5 -> 12
            return (total + var * x,)

        total, = repeat_steps(3, step, (tf.constant(0.0),))
        return {"total": total, "var": tf.identity(var)}

    step = TrainStep(fn, {"x": tf.TensorSpec((), tf.float32)})
    assert step.autograph is False
    out = step(x=1.0)
    assert float(out["var"]) == 12.0 and float(out["total"]) == 2.0 + 5.0 + 12.0

    def python_branch_on_tensor(x):
        if x > 0:  # needs autograph: a clear error, not a silently different graph
            return {"y": x}
        return {"y": -x}

    with pytest.raises(Exception, match="(?i)autograph|bool"):
        TrainStep(python_branch_on_tensor, {"x": tf.TensorSpec((), tf.float32)})(x=1.0)
