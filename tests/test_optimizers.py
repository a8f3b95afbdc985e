"""The TF1-semantics optimizers against their update rules written out in NumPy."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from sbtf.common.optimizers import Adam, RMSProp, clip_grads


def test_adam_matches_tf1_update_rule():
    rng = np.random.RandomState(0)
    start = rng.randn(3, 2).astype(np.float32)
    var = tf.Variable(start)
    opt = Adam([var], epsilon=1e-5)
    x, m, v = start.astype(np.float64), 0.0, 0.0
    for t in range(1, 6):
        grad = rng.randn(3, 2).astype(np.float32)
        opt.apply([tf.constant(grad)], 0.01)
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad ** 2
        lr_t = 0.01 * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
        x = x - lr_t * m / (np.sqrt(v) + 1e-5)
    np.testing.assert_allclose(var.numpy(), x, rtol=1e-5, atol=1e-6)


def test_rmsprop_matches_tf1_update_rule():
    rng = np.random.RandomState(1)
    start = rng.randn(4).astype(np.float32)
    var = tf.Variable(start)
    opt = RMSProp([var], decay=0.99, epsilon=1e-5, momentum=0.5)
    x, ms, mom = start.astype(np.float64), np.ones(4), np.zeros(4)
    for _ in range(5):
        grad = rng.randn(4).astype(np.float32)
        opt.apply([tf.constant(grad)], 7e-4)
        ms = 0.99 * ms + 0.01 * grad ** 2  # TF1 starts the mean square at 1
        mom = 0.5 * mom + 7e-4 * grad / np.sqrt(ms + 1e-5)
        x = x - mom
    np.testing.assert_allclose(var.numpy(), x, rtol=1e-5, atol=1e-7)


def test_clip_grads_by_global_norm():
    grads = [tf.constant([3.0, 0.0]), tf.constant([4.0])]
    clipped, norm = clip_grads(grads, 1.0)
    assert float(norm) == 5.0
    np.testing.assert_allclose(clipped[0].numpy(), [0.6, 0.0], rtol=1e-6)
    unclipped, _ = clip_grads(grads, None)
    np.testing.assert_allclose(unclipped[1].numpy(), [4.0])


def test_common_exports_and_dataset():
    from sbtf.common import Dataset, colorize, fmt_row
    data = Dataset({"x": np.arange(10), "y": np.arange(10) * 2}, shuffle=True)
    seen = []
    for batch in data.iterate_once(3):
        np.testing.assert_array_equal(batch["y"], batch["x"] * 2)
        seen.extend(batch["x"].tolist())
    assert len(seen) == 9 and len(set(seen)) == 9
    assert fmt_row(5, ["a", 1.5], header=True).splitlines()[1].startswith("-----")
    assert colorize("hi", "red").startswith("\x1b[31m")


def test_torch_style_rmsprop_matches_pytorch_update_rule():
    from sbtf.common.optimizers import TorchStyleRMSProp
    rng = np.random.RandomState(2)
    for momentum in (0.0, 0.5):
        start = rng.randn(4).astype(np.float32)
        var = tf.Variable(start)
        opt = TorchStyleRMSProp([var], decay=0.99, epsilon=1e-5, momentum=momentum)
        x, sq, buf = start.astype(np.float64), np.zeros(4), np.zeros(4)
        for _ in range(5):
            grad = rng.randn(4).astype(np.float32)
            opt.apply([tf.constant(grad)], 7e-4)
            sq = 0.99 * sq + 0.01 * grad ** 2  # torch.optim.RMSprop: square average starts at 0
            buf = momentum * buf + grad / (np.sqrt(sq) + 1e-5)  # eps outside the root
            x = x - 7e-4 * buf
        np.testing.assert_allclose(var.numpy(), x, rtol=1e-5, atol=1e-7)


def test_rmsprop_style_is_checked():
    import pytest

    from sbtf.common.optimizers import check_rms_prop_style
    assert check_rms_prop_style("torch") == "torch"
    with pytest.raises(ValueError, match="'tf'.*'torch'"):
        check_rms_prop_style("pytorch")
