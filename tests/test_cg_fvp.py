"""Conjugate gradient and TRPO's Fisher-vector products against dense computations on tiny problems."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from sbtf import TRPO
from sbtf.common.cg import cg, conjugate_gradient, conjugate_gradient_tf
from sbtf.common.identity_env import IdentityEnv, IdentityEnvBox
from sbtf.common.tf_util import flatgrad

TINY = dict(net_arch=[dict(pi=[3], vf=[3])])


def _spd(n: int, seed: int = 0, cond: float = 20.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    return (q * np.linspace(1.0, cond, n)) @ q.T


def test_cg_solves_spd_system_and_reports_progress(capsys):
    a_mat = _spd(12)
    b_vec = np.random.default_rng(1).normal(size=12)
    seen = []
    x = cg(lambda v: a_mat @ v, b_vec, cg_iters=40, callback=lambda x: seen.append(x.copy()), verbose=True)
    np.testing.assert_allclose(x, np.linalg.solve(a_mat, b_vec), rtol=1e-6, atol=1e-8)
    assert cg is conjugate_gradient
    # the callback sees the iterates (starting from 0) and the final solution
    np.testing.assert_array_equal(seen[0], np.zeros(12))
    np.testing.assert_allclose(seen[-1], x)
    assert "residual norm" in capsys.readouterr().out


def test_cg_few_iterations_reduce_the_residual_monotonically():
    a_mat = _spd(30, seed=2, cond=100.0)
    b_vec = np.random.default_rng(3).normal(size=30)
    errors = []
    for iters in (1, 3, 10, 30):
        x = conjugate_gradient(lambda v: a_mat @ v, b_vec, cg_iters=iters)
        exact = np.linalg.solve(a_mat, b_vec)
        errors.append(float((x - exact) @ a_mat @ (x - exact)))  # CG minimises the A-norm of the error
    assert errors == sorted(errors, reverse=True) and errors[-1] < 1e-8 * errors[0]


def test_cg_zero_right_hand_side_gives_zero():
    x = cg(lambda v: 2.0 * v, np.zeros(5))
    np.testing.assert_array_equal(x, np.zeros(5))
    assert np.isfinite(x).all()


def test_cg_tf_matches_numpy_iterates():
    a_mat = _spd(10, seed=4).astype(np.float64)
    b_vec = np.random.default_rng(5).normal(size=10)
    a_tf = tf.constant(a_mat)

    @tf.function(autograph=False)
    def solve(b):
        return conjugate_gradient_tf(lambda v: tf.linalg.matvec(a_tf, v), b, cg_iters=4)

    np.testing.assert_allclose(solve(tf.constant(b_vec)).numpy(),
                               conjugate_gradient(lambda v: a_mat @ v, b_vec, cg_iters=4), rtol=1e-10)


def _model_with_spread_policy(env, seed=0, cg_iters=10):
    """A tiny TRPO model whose policy is moved away from the uniform initial one (old == new afterwards)."""
    model = TRPO("MlpPolicy", env, seed=seed, policy_kwargs=TINY, cg_iters=cg_iters, cg_damping=0.1)
    rng = np.random.default_rng(seed)
    for var in model._pi_vars:
        var.assign(var.numpy() + rng.normal(scale=0.5, size=var.shape).astype(np.float32))
    model.assign_old_eq_new()
    return model


def _dense_kl_hessian(model, obs) -> np.ndarray:
    """The explicit Hessian of the mean KL(old || new) w.r.t. the policy parameters (nested GradientTape)."""
    variables = model._pi_vars
    with tf.GradientTape(persistent=True) as outer:
        with tf.GradientTape() as inner:
            kl = model._mean_kl(tf.constant(obs))
        grad = flatgrad(inner.gradient(kl, variables), variables)
    blocks = outer.jacobian(grad, variables, experimental_use_pfor=False)
    n = int(grad.shape[0])
    return np.concatenate([tf.reshape(block, (n, -1)).numpy() for block in blocks], axis=1).astype(np.float64)


@pytest.mark.parametrize("env_cls", [IdentityEnv, IdentityEnvBox])
def test_fvp_equals_dense_kl_hessian_times_vector(env_cls):
    env = env_cls(dim=3) if env_cls is IdentityEnv else env_cls()
    model = _model_with_spread_policy(env)
    obs = np.stack([env.observation_space.sample() for _ in range(9)]).astype(model.policy_pi.obs_dtype)
    hessian = _dense_kl_hessian(model, obs)
    assert hessian.shape[0] == hessian.shape[1] == model.get_flat().size
    np.testing.assert_allclose(hessian, hessian.T, atol=1e-5)
    assert np.linalg.eigvalsh(hessian).min() > -1e-5  # a Fisher matrix is positive semi-definite
    rng = np.random.default_rng(7)
    for _ in range(3):
        vec = rng.normal(size=hessian.shape[0]).astype(np.float32)
        fvp = model.compute_fvp(vec, obs).numpy()
        np.testing.assert_allclose(fvp, hessian @ vec, rtol=1e-3, atol=1e-5)
    # one trace serves every vector and batch size
    model.compute_fvp(vec, obs[:4])
    assert model.compute_fvp.experimental_get_tracing_count() == 1


def test_kl_hessian_is_the_fisher_matrix_for_a_categorical_policy():
    """At old == new, the KL Hessian equals E[J^T (diag(p) - p p^T) J] with J = d logits / d theta."""
    env = IdentityEnv(dim=3)
    model = _model_with_spread_policy(env, seed=3)
    obs = np.arange(3, dtype=np.int64).repeat(2)
    variables = model._pi_vars
    with tf.GradientTape(persistent=True) as tape:
        logits, _, _, _ = model.policy_pi.forward(tf.constant(obs))
    jac_blocks = tape.jacobian(logits, variables, experimental_use_pfor=False)
    jac = np.concatenate([tf.reshape(b, (len(obs), 3, -1)).numpy() for b in jac_blocks], axis=2)
    probs = tf.nn.softmax(logits).numpy()
    fisher = np.mean([jac[i].T @ (np.diag(probs[i]) - np.outer(probs[i], probs[i])) @ jac[i]
                      for i in range(len(obs))], axis=0)
    np.testing.assert_allclose(_dense_kl_hessian(model, obs), fisher, atol=1e-5)


@pytest.mark.parametrize("env_cls", [IdentityEnv, IdentityEnvBox])
def test_natural_gradient_step_solves_the_damped_fisher_system(env_cls):
    env = env_cls(dim=3) if env_cls is IdentityEnv else env_cls()
    model = _model_with_spread_policy(env, seed=1, cg_iters=60)
    obs = np.stack([env.observation_space.sample() for _ in range(11)]).astype(model.policy_pi.obs_dtype)
    hessian = _dense_kl_hessian(model, obs)
    damped = hessian + 0.1 * np.eye(hessian.shape[0])
    grad = np.random.default_rng(2).normal(size=hessian.shape[0]).astype(np.float32)
    exact = np.linalg.solve(damped, grad)
    # one process: the whole CG solve in one compiled call
    stepdir, shs = model._natural_step(grad, obs, np.float32(0.1))
    np.testing.assert_allclose(stepdir.numpy(), exact, rtol=2e-3, atol=2e-4)
    np.testing.assert_allclose(float(shs), 0.5 * exact @ damped @ exact, rtol=2e-3)
    # MPI path: NumPy CG driving compiled products (averaged over ranks, here one)
    stepdir_np = conjugate_gradient(lambda v: model._fisher_vector_product(v, obs), grad.astype(np.float64),
                                    cg_iters=60)
    np.testing.assert_allclose(stepdir_np, exact, rtol=2e-3, atol=2e-4)


def test_trpo_step_respects_the_kl_radius():
    """After one update the mean KL between old and new policy is at most 1.5 * max_kl (the line search's bound)."""
    env = IdentityEnv(dim=3)
    model = TRPO("MlpPolicy", env, seed=0, timesteps_per_batch=256, max_kl=0.005, vf_iters=1)
    model.learn(256)
    obs = np.arange(3, dtype=np.int64).repeat(30)
    kl = float(model._mean_kl(tf.constant(obs)))
    assert 0.0 < kl <= 1.5 * 0.005
