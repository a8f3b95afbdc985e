"""sbtf.common.nn.conv_ops: the CPU route for strided convolutions' gradients equals TensorFlow's own gradient."""
import numpy as np
import pytest
import tensorflow as tf

from sbtf.common.nn import conv_ops
from sbtf.common.nn.conv_ops import conv2d, dilated_filter_gradient_pays, filter_gradient, input_gradient

# (input shape, kernel shape, stride): the Nature CNN's layers, rectangular kernels and inputs, remainders that no
# output reads, kernels that are not a multiple of the stride (filter route only)
CASES = [
    ((3, 84, 84, 4), (8, 8, 4, 32), 4),
    ((3, 20, 20, 32), (4, 4, 32, 64), 2),
    ((2, 23, 17, 3), (6, 4, 3, 5), 2),
    ((2, 29, 30, 2), (6, 3, 2, 4), 3),
    ((2, 15, 16, 3), (3, 3, 3, 4), 2),
    ((2, 64, 64, 1), (8, 8, 1, 32), 4),
    ((128, 24, 24, 4), (8, 8, 4, 6), 4),  # a batch the input is transposed by XLA for
]


def _tf_gradients(x, w, stride, dy):
    with tf.GradientTape() as tape:
        tape.watch([x, w])
        out = tf.nn.conv2d(x, w, strides=stride, padding="VALID")
    return out, tape.gradient(out, [x, w], output_gradients=dy)


@pytest.fixture(autouse=True)
def _dilated_route(monkeypatch):
    """The route on whatever CPU the tests run on (by default it is taken on AVX2 CPUs without AVX-512 only)."""
    monkeypatch.setenv("SBTF_CONV_GRAD", conv_ops.DILATED)


@pytest.mark.parametrize("x_shape,w_shape,stride", CASES)
def test_gradients_equal_tensorflows(x_shape, w_shape, stride):
    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal(x_shape), tf.float32)
    w = tf.constant(rng.standard_normal(w_shape), tf.float32)
    out_ref, (dx_ref, dw_ref) = _tf_gradients(x, w, stride, None)
    dy = tf.constant(rng.standard_normal(out_ref.shape), tf.float32)
    out_ref, (dx_ref, dw_ref) = _tf_gradients(x, w, stride, dy)

    @tf.function(autograph=False)
    def ours(x, w, dy):
        with tf.GradientTape() as tape:
            tape.watch([x, w])
            out = conv2d(x, w, stride)
        return (out,) + tuple(tape.gradient(out, [x, w], output_gradients=dy))

    assert dilated_filter_gradient_pays(stride, "VALID")
    out, dx, dw = ours(x, w, dy)
    np.testing.assert_array_equal(out.numpy(), out_ref.numpy())
    np.testing.assert_allclose(dw.numpy(), dw_ref.numpy(), rtol=1e-4, atol=1e-4 * np.abs(dw_ref.numpy()).max())
    np.testing.assert_allclose(dx.numpy(), dx_ref.numpy(), rtol=1e-4, atol=1e-4 * np.abs(dx_ref.numpy()).max())
    # the parts on their own
    np.testing.assert_allclose(filter_gradient(x, dy, w_shape[0], w_shape[1], stride).numpy(), dw_ref.numpy(),
                               rtol=1e-4, atol=1e-4 * np.abs(dw_ref.numpy()).max())
    dx_route = input_gradient(dy, w, x.shape, stride)
    if w_shape[0] % stride or w_shape[1] % stride:
        assert dx_route is None  # TensorFlow's kernel gives dx
    else:
        np.testing.assert_allclose(dx_route.numpy(), dx_ref.numpy(), rtol=1e-4,
                                   atol=1e-4 * np.abs(dx_ref.numpy()).max())


def test_second_derivatives_equal_tensorflows():
    """TRPO's Fisher-vector products differentiate the gradient again (two stacked layers, so the second-order terms
    of both the kernel and the input gradient are exercised)."""
    rng = np.random.default_rng(1)
    x = tf.constant(rng.standard_normal((2, 28, 28, 3)), tf.float32)
    w1 = tf.Variable(rng.standard_normal((4, 4, 3, 5)).astype(np.float32) * 0.3)
    w2 = tf.Variable(rng.standard_normal((4, 4, 5, 4)).astype(np.float32) * 0.3)
    vectors = [tf.constant(rng.standard_normal(w.shape), tf.float32) for w in (w1, w2)]

    def hessian_vector(conv):
        with tf.GradientTape() as outer:
            with tf.GradientTape() as inner:
                loss = tf.reduce_sum(tf.tanh(conv(tf.tanh(conv(x, w1)), w2)) ** 2)
            grads = inner.gradient(loss, [w1, w2])
            grad_dot_v = tf.add_n([tf.reduce_sum(g * v) for g, v in zip(grads, vectors)])
        return outer.gradient(grad_dot_v, [w1, w2])

    ours = hessian_vector(lambda a, b: conv2d(a, b, 2))
    ref = hessian_vector(lambda a, b: tf.nn.conv2d(a, b, strides=2, padding="VALID"))
    for got, want in zip(ours, ref):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-4 * np.abs(want.numpy()).max())


def test_cpu_rule(monkeypatch):
    monkeypatch.delenv("SBTF_CONV_GRAD")
    for flags, pays in ((("fpu", "sse2", "avx", "avx2", "fma"), True),
                        (("fpu", "avx2", "fma", "avx512f", "avx512bw"), False),
                        (("fp", "asimd"), False), ((), False)):
        monkeypatch.setattr(conv_ops, "_cpu_flags", lambda flags=flags: frozenset(flags))
        assert conv_ops.cpu_route_pays() is pays
        assert dilated_filter_gradient_pays(4, "VALID") is (pays and not conv_ops._gpu_visible())
    monkeypatch.setenv("SBTF_CONV_GRAD", conv_ops.DILATED)
    assert dilated_filter_gradient_pays(4, "VALID")  # forced on a CPU the rule says no to


def test_native_switch_and_unstrided_layers_keep_tensorflows_gradient(monkeypatch):
    assert not dilated_filter_gradient_pays(1, "VALID")  # stride 1: TensorFlow's kernel is as fast
    assert not dilated_filter_gradient_pays(2, "SAME")
    monkeypatch.setenv("SBTF_CONV_GRAD", conv_ops.NATIVE)
    assert not dilated_filter_gradient_pays(4, "VALID")
    x = tf.ones((1, 12, 12, 1))
    w = tf.ones((4, 4, 1, 2))
    np.testing.assert_array_equal(conv2d(x, w, 4).numpy(), tf.nn.conv2d(x, w, 4, "VALID").numpy())
