"""K-FAC optimizer (sbtf.acktr.kfac): Kronecker factors, preconditioning, KL clipping, cold start, schedule."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from sbtf.acktr.kfac import KfacOptimizer, LayerRecorder, factored_layers
from sbtf.acktr.kfac_utils import conv_factors, dense_factors, kronecker_precondition
from sbtf.common.tf_layers import Conv, Linear


def _tiny_net(seed: int = 0):
    np.random.seed(seed)
    l1 = Linear("fc0", 4, init_scale=1.0)
    l1.build((None, 3))
    l2 = Linear("out", 3, init_scale=1.0)
    l2.build((None, 4))
    return l1, l2


def _per_sample_loss(logits, actions):
    """log-likelihood of given 'sampled' actions: a Fisher-style per-sample loss."""
    return tf.reduce_sum(tf.one_hot(actions, 3) * tf.nn.log_softmax(logits), axis=1)


def test_dense_factor_statistics_match_dense_computation():
    l1, l2 = _tiny_net()
    rng = np.random.RandomState(1)
    x = rng.randn(7, 3).astype(np.float32)
    actions = rng.randint(0, 3, 7)
    opt = KfacOptimizer([l1.w, l1.b, l2.w, l2.b], [l1, l2], cold_iter=2)
    with opt.record() as recorder, tf.GradientTape(persistent=True) as tape:
        hidden = tf.tanh(l1(tf.constant(x)))
        logits = l2(hidden)
        fisher_loss = tf.reduce_mean(_per_sample_loss(logits, actions))
    stats = opt.compute_stats(fisher_loss, tape, recorder)
    assert sorted(stats) == [0, 1]

    # dense reference: A = mean of [a, 1][a, 1]^T, G = mean of per-sample (dl_i/ds_i)(dl_i/ds_i)^T
    hidden_np = np.tanh(x @ l1.w.numpy() + l1.b.numpy())
    for block_index, acts in ((0, x), (1, hidden_np)):
        aug = np.concatenate([acts, np.ones((len(acts), 1))], axis=1)
        np.testing.assert_allclose(stats[block_index][0].numpy(), aug.T @ aug / len(acts), rtol=1e-5, atol=1e-6)
    g1_ref = np.zeros((4, 4))
    g2_ref = np.zeros((3, 3))
    for i in range(7):
        with tf.GradientTape(persistent=True) as t:
            s1 = l1(tf.constant(x[i:i + 1]))
            t.watch(s1)
            s2 = l2(tf.tanh(s1))
            loss_i = _per_sample_loss(s2, actions[i:i + 1])[0]
        g1 = t.gradient(loss_i, s1).numpy()[0]
        g2 = t.gradient(loss_i, s2).numpy()[0]
        g1_ref += np.outer(g1, g1) / 7
        g2_ref += np.outer(g2, g2) / 7
    np.testing.assert_allclose(stats[0][1].numpy(), g1_ref, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(stats[1][1].numpy(), g2_ref, rtol=1e-4, atol=1e-6)


def test_layer_applied_twice_concatenates_along_the_batch():
    rng = np.random.RandomState(0)
    a1, a2 = rng.randn(3, 2).astype(np.float32), rng.randn(5, 2).astype(np.float32)
    g1, g2 = rng.randn(3, 4).astype(np.float32), rng.randn(5, 4).astype(np.float32)
    cov_a, cov_g = dense_factors([a1, a2], [g1, g2])
    acts = np.concatenate([np.concatenate([a1, a2]), np.ones((8, 1))], axis=1)
    grads = np.concatenate([g1, g2]) * 8
    np.testing.assert_allclose(cov_a.numpy(), acts.T @ acts / 8, rtol=1e-5)
    np.testing.assert_allclose(cov_g.numpy(), grads.T @ grads / 8, rtol=1e-5)


def test_conv_factors_use_sb2_patch_extraction():
    rng = np.random.RandomState(0)
    batch, height, width, chans, filters, k, stride = 2, 6, 5, 2, 3, 3, 2
    x = rng.randn(batch, height, width, chans).astype(np.float32)
    out_h, out_w = (height - k) // stride + 1, (width - k) // stride + 1
    grad_out = rng.randn(batch, out_h, out_w, filters).astype(np.float32)
    cov_a, cov_g = conv_factors([x], [grad_out], (k, k), stride, "VALID")
    patches = []
    for b in range(batch):
        for i in range(out_h):
            for j in range(out_w):
                patch = x[b, i * stride:i * stride + k, j * stride:j * stride + k, :].reshape(-1)  # (kh, kw, C)
                patches.append(np.concatenate([patch, [1.0]]) / (out_h * out_w))
    patches = np.array(patches)
    np.testing.assert_allclose(cov_a.numpy(), patches.T @ patches / batch, rtol=1e-4, atol=1e-6)
    grads = grad_out.reshape(-1, filters) * out_h * out_w * batch
    np.testing.assert_allclose(cov_g.numpy(), grads.T @ grads / (batch * out_h * out_w), rtol=1e-4)


def test_conv_layer_recorded_in_a_network():
    np.random.seed(0)
    conv = Conv("c1", 2, 3, 1)
    conv.build((None, 5, 5, 1))
    head = Linear("out", 3)
    head.build((None, 2 * 3 * 3))
    opt = KfacOptimizer([conv.w, conv.b, head.w, head.b], [conv, head])
    assert [b.kind for b in opt.blocks] == ["conv", "dense"]
    assert (opt.blocks[0].a_dim, opt.blocks[0].g_dim) == (3 * 3 * 1 + 1, 2)
    x = tf.constant(np.random.RandomState(2).randn(4, 5, 5, 1).astype(np.float32))
    with opt.record() as recorder, tf.GradientTape(persistent=True) as tape:
        feat = tf.nn.relu(conv(x))
        logits = head(tf.reshape(feat, (4, -1)))
        loss = tf.reduce_mean(_per_sample_loss(logits, np.array([0, 1, 2, 0])))
    stats = opt.compute_stats(loss, tape, recorder)
    recorded_in, recorded_out = recorder.calls_of(conv)[0]
    expected = conv_factors([recorded_in], [tape.gradient(loss, recorded_out)], (3, 3), 1, "VALID")
    np.testing.assert_allclose(stats[0][0].numpy(), expected[0].numpy(), rtol=1e-5)
    np.testing.assert_allclose(stats[0][1].numpy(), expected[1].numpy(), rtol=1e-5)


def _spd(rng, n):
    m = rng.randn(n, n)
    return (m @ m.T / n + 0.1 * np.eye(n)).astype(np.float32)


def test_preconditioned_gradient_equals_explicit_kronecker_solve():
    rng = np.random.RandomState(3)
    np.random.seed(3)
    layer = Linear("fc", 3)
    layer.build((None, 2))
    opt = KfacOptimizer([layer.w, layer.b], [layer], clip_kl=1e9, epsilon=0.05)
    block = opt.blocks[0]
    cov_a, cov_g = _spd(rng, 3), _spd(rng, 3)
    block.a_stats.assign(cov_a)
    block.g_stats.assign(cov_g)
    opt.apply_stats_eigen([0], opt.compute_stats_eigen([0]))
    grad_w = rng.randn(2, 3).astype(np.float32)
    grad_b = rng.randn(3).astype(np.float32)
    update_w, update_b = opt.get_kfac_precond_updates([tf.constant(grad_w), tf.constant(grad_b)], 0.1)
    stacked = np.concatenate([grad_w, grad_b[None]], axis=0)  # [W; b]
    expected = np.linalg.solve(np.kron(cov_a, cov_g) + 0.05 * np.eye(9), stacked.reshape(-1))
    np.testing.assert_allclose(np.concatenate([update_w.numpy(), update_b.numpy()[None]]).reshape(-1), expected,
                               rtol=1e-3, atol=1e-5)
    # the helper alone, with eigen-decompositions given directly
    ea, qa = np.linalg.eigh(cov_a)
    eg, qg = np.linalg.eigh(cov_g)
    direct = kronecker_precondition(tf.constant(stacked), ea.astype(np.float32), qa.astype(np.float32),
                                    eg.astype(np.float32), qg.astype(np.float32), 0.05)
    np.testing.assert_allclose(direct.numpy().reshape(-1), expected, rtol=1e-3, atol=1e-5)


def test_kl_clipping_scales_the_whole_update():
    rng = np.random.RandomState(4)
    np.random.seed(4)
    layer = Linear("fc", 2)
    layer.build((None, 2))
    extra = tf.Variable(np.ones((1, 2), np.float32))  # a plain-gradient variable (like a Gaussian logstd)
    opt = KfacOptimizer([layer.w, layer.b, extra], [layer], clip_kl=1e-4, epsilon=0.01)
    assert opt.plain_indices == [2]
    block = opt.blocks[0]
    block.a_stats.assign(_spd(rng, 3))
    block.g_stats.assign(_spd(rng, 2))
    opt.apply_stats_eigen([0], opt.compute_stats_eigen([0]))
    grads = [tf.constant(rng.randn(2, 2).astype(np.float32)), tf.constant(rng.randn(2).astype(np.float32)),
             tf.constant(rng.randn(1, 2).astype(np.float32))]
    lr = 0.5
    unclipped = KfacOptimizer([layer.w, layer.b, extra], [layer], clip_kl=1e12, epsilon=0.01)
    for name in ("a_eig", "a_vec", "g_eig", "g_vec"):
        getattr(unclipped.blocks[0], name).assign(getattr(block, name))
    raw = [u.numpy() for u in unclipped.get_kfac_precond_updates(grads, lr)]
    np.testing.assert_allclose(raw[2], grads[2].numpy())  # plain variable keeps its gradient
    v_g = sum(float(np.sum(u * g.numpy())) for u, g in zip(raw, grads)) * lr * lr
    scale = min(1.0, np.sqrt(1e-4 / v_g))
    assert scale < 1.0
    clipped = opt.get_kfac_precond_updates(grads, lr)
    for c, u in zip(clipped, raw):
        np.testing.assert_allclose(c.numpy(), scale * u, rtol=1e-4)
    assert float(opt.v_f_v.numpy()) == pytest.approx(v_g, rel=1e-4)


def test_running_statistics_schedule_and_cold_start():
    np.random.seed(5)
    layer = Linear("fc", 2)
    layer.build((None, 2))
    opt = KfacOptimizer([layer.w, layer.b], [layer], learning_rate=0.1, momentum=0.9, cold_iter=3, kfac_update=2,
                        stats_decay=0.5, max_grad_norm=0.5)
    covs = [(np.eye(3, dtype=np.float32) * (k + 1), np.eye(2, dtype=np.float32) * (k + 2)) for k in range(6)]
    expected_a = np.zeros((3, 3))
    w0 = layer.w.numpy().copy()
    grad_w = np.full((2, 2), 2.0, np.float32)
    grad_b = np.zeros(2, np.float32)
    factor_steps = []
    for k, (cov_a, cov_g) in enumerate(covs):
        opt.apply_stats({0: (tf.constant(cov_a), tf.constant(cov_g))})
        opt.update_stats_eigen([0])
        expected_a = expected_a + cov_a / 3 if k < 3 else 0.5 * expected_a + 0.5 * cov_a
        np.testing.assert_allclose(opt.blocks[0].a_stats.numpy(), expected_a, rtol=1e-6)
        factor_steps.append(int(opt.factor_step.numpy()))
        if k == 0:
            # the first update is a cold-start momentum SGD step on the clipped gradient
            warm = opt.apply_gradients([tf.constant(grad_w), tf.constant(grad_b)])
            assert not bool(warm)
            clipped = grad_w * 0.5 / np.linalg.norm(grad_w)
            np.testing.assert_allclose(layer.w.numpy(), w0 - 0.1 * clipped, rtol=1e-5)
    # eigen-decompositions once the statistics are warm (stats_step >= 3) and every kfac_update = 2 steps
    assert factor_steps == [0, 0, 0, 1, 1, 2]
    np.testing.assert_allclose(opt.blocks[0].a_eig.numpy(), np.linalg.eigvalsh(opt.blocks[0].a_stats.numpy()),
                               rtol=1e-5)
    for _ in range(2):
        assert not bool(opt.apply_gradients([tf.constant(grad_w), tf.constant(grad_b)]))
    assert int(opt.sgd_step.numpy()) == 3
    assert bool(opt.apply_gradients([tf.constant(grad_w), tf.constant(grad_b)]))  # K-FAC from now on
    assert int(opt.sgd_step.numpy()) == 3


def test_warm_update_is_momentum_on_the_preconditioned_step():
    rng = np.random.RandomState(6)
    np.random.seed(6)
    layer = Linear("fc", 2)
    layer.build((None, 2))
    opt = KfacOptimizer([layer.w, layer.b], [layer], learning_rate=0.2, momentum=0.9, cold_iter=0, clip_kl=1e9)
    block = opt.blocks[0]
    block.a_stats.assign(_spd(rng, 3))
    block.g_stats.assign(_spd(rng, 2))
    opt.apply_stats_eigen([0], opt.compute_stats_eigen([0]))
    grads = [tf.constant(rng.randn(2, 2).astype(np.float32)), tf.constant(rng.randn(2).astype(np.float32))]
    u = [x.numpy() for x in opt.get_kfac_precond_updates(grads, 0.2)]
    w0, b0 = layer.w.numpy().copy(), layer.b.numpy().copy()
    opt.apply_gradients(grads)
    np.testing.assert_allclose(layer.w.numpy(), w0 - 0.2 * 0.1 * u[0], rtol=1e-5, atol=1e-7)
    opt.apply_gradients(grads)  # acc = 0.9 * u + u
    np.testing.assert_allclose(layer.w.numpy(), w0 - 0.02 * u[0] - 0.02 * 1.9 * u[0], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(layer.b.numpy(), b0 - 0.02 * u[1] - 0.02 * 1.9 * u[1], rtol=1e-5, atol=1e-7)


def test_recorder_restores_layer_calls_and_policy_layers():
    from sbtf.common.policies import MlpPolicy

    policy = MlpPolicy(None, gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-1, 1, (2,)), n_env=1)
    layers = factored_layers(policy)
    assert [layer.scope for layer in layers] == ["pi_fc0", "vf_fc0", "pi_fc1", "vf_fc1", "vf", "pi", "q"]
    obs = tf.zeros((2, 3))
    with LayerRecorder(layers) as recorder:
        policy.forward(obs)
        assert all(len(recorder.calls_of(layer)) == 1 for layer in layers)
    assert all("call" not in layer.__dict__ for layer in layers)
    policy.forward(obs)
    assert all(len(recorder.calls_of(layer)) == 1 for layer in layers)
    variables = policy.parameter_list()
    opt = KfacOptimizer(variables, layers)
    names = list(policy.named_parameters())
    assert [names[i] for i in opt.plain_indices] == ["model/pi/logstd:0"]


def test_kfac_inside_tf_function_traces_once():
    l1, l2 = _tiny_net(7)
    variables = [l1.w, l1.b, l2.w, l2.b]
    opt = KfacOptimizer(variables, [l1, l2], learning_rate=0.05, cold_iter=2, kfac_update=1)
    rng = np.random.RandomState(7)

    @tf.function(input_signature=[tf.TensorSpec((8, 3)), tf.TensorSpec((8,), tf.int32)], autograph=False)
    def step(x, actions):
        with opt.record() as recorder, tf.GradientTape(persistent=True) as tape:
            logits = l2(tf.tanh(l1(x)))
            loss = -tf.reduce_mean(_per_sample_loss(logits, actions))
            fisher = tf.reduce_mean(_per_sample_loss(logits, actions))
        grads = tape.gradient(loss, variables)
        return opt.step(grads, fisher, tape, recorder)

    warm = [bool(step(rng.randn(8, 3).astype(np.float32), rng.randint(0, 3, 8).astype(np.int32)))
            for _ in range(5)]
    assert warm == [False, False, True, True, True]
    assert step.experimental_get_tracing_count() == 1
    assert int(opt.factor_step.numpy()) == 4  # eigen-decompositions from stats_step 2 on (kfac_update=1)
    assert all(np.all(np.isfinite(v.numpy())) for v in variables)
