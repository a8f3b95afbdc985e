"""FastFunction's call-op route: the body runs on the calling thread, with the public call's outputs and updates."""
import threading

import numpy as np
import pytest
import tensorflow as tf

from sbtf.common.compile import fast_call
from sbtf.common.compile.fast_call import FastFunction, TrainStep


def _adam_train_step(seed: int, loop: bool = False, jit_compile: bool = False):
    """A 4-64-64-2 ReLU MLP regressed with a Huber loss, Adam through ResourceApplyAdam; returns (function, vars)."""
    rng = np.random.RandomState(seed)
    shapes = [(4, 64), (64,), (64, 64), (64,), (64, 2), (2,)]
    weights = [tf.Variable(rng.randn(*s).astype(np.float32) * 0.3) for s in shapes]
    moments = [tf.Variable(np.zeros(s, np.float32)) for s in shapes for _ in range(2)]

    def one_update(x, y):
        with tf.GradientTape() as tape:
            h = tf.nn.relu(tf.matmul(x, weights[0]) + weights[1])
            h = tf.nn.relu(tf.matmul(h, weights[2]) + weights[3])
            err = tf.matmul(h, weights[4]) + weights[5] - y
            loss = tf.reduce_mean(tf.where(tf.abs(err) < 1.0, 0.5 * err * err, tf.abs(err) - 0.5))
        grads = tape.gradient(loss, weights)
        updates = [tf.raw_ops.ResourceApplyAdam(
            var=w.handle, m=moments[2 * i].handle, v=moments[2 * i + 1].handle, beta1_power=tf.constant(0.9),
            beta2_power=tf.constant(0.999), lr=tf.constant(1e-3), beta1=tf.constant(0.9), beta2=tf.constant(0.999),
            epsilon=tf.constant(1e-7), grad=g) for i, (w, g) in enumerate(zip(weights, grads))]
        with tf.control_dependencies(updates):
            return tf.identity(loss)

    def step(x, y):
        if not loop:
            return {"loss": one_update(x, y), "pair": (x[0, 0], tf.shape(x))}
        total = tf.while_loop(lambda i, acc: i < 3, lambda i, acc: (i + 1, acc + one_update(x, y)),
                              (tf.constant(0), tf.constant(0.0)))[1]
        return {"loss": total, "pair": (x[0, 0], tf.shape(x))}

    concrete = tf.function(step, autograph=False, jit_compile=jit_compile).get_concrete_function(
        tf.TensorSpec((32, 4), tf.float32), tf.TensorSpec((32, 2), tf.float32))
    return concrete, weights + moments


@pytest.mark.parametrize("loop", [False, True])
def test_call_op_route_matches_public_call_bit_for_bit(loop):
    public, public_vars = _adam_train_step(seed=3, loop=loop)
    concrete, fast_vars = _adam_train_step(seed=3, loop=loop)
    fast = FastFunction(concrete)
    assert fast.uses_call_op
    rng = np.random.RandomState(0)
    for _ in range(15):
        x, y = rng.randn(32, 4).astype(np.float32), rng.randn(32, 2).astype(np.float32)
        expected = public(tf.constant(x), tf.constant(y))
        got = fast(x, y)
        assert set(got) == {"loss", "pair"} and isinstance(got["pair"], tuple)
        assert got["loss"].numpy() == expected["loss"].numpy()
        assert got["pair"][0].numpy() == x[0, 0]
        np.testing.assert_array_equal(got["pair"][1].numpy(), [32, 4])
        assert got["pair"][1].dtype == tf.int32
    for a, b in zip(public_vars, fast_vars):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not np.array_equal(public_vars[0].numpy(), _adam_train_step(seed=3)[1][0].numpy())  # the steps trained


def test_call_op_route_runs_the_body_on_the_calling_thread():
    threads = []

    def record(a):
        threads.append(threading.get_ident())
        return a

    concrete = tf.function(lambda x: tf.numpy_function(record, [x], tf.float32, stateful=True) + 1.0,
                           autograph=False).get_concrete_function(tf.TensorSpec((3,), tf.float32))
    fast = FastFunction(concrete)
    assert fast.uses_call_op
    np.testing.assert_array_equal(fast(np.ones(3, np.float32)).numpy(), [2.0, 2.0, 2.0])
    assert threads == [threading.get_ident()]


def test_flat_call_kept_for_xla_tapes_and_opt_out(monkeypatch):
    xla, _ = _adam_train_step(seed=0, jit_compile=True)
    assert not FastFunction(xla).uses_call_op  # the op route would run the body without XLA
    no_outputs = tf.function(lambda: None, autograph=False).get_concrete_function()
    assert not FastFunction(no_outputs).uses_call_op and FastFunction(no_outputs)() is None
    square = tf.function(lambda x: x * x, autograph=False).get_concrete_function(tf.TensorSpec((2,), tf.float32))
    fast = FastFunction(square)
    assert fast.uses_call_op
    x = tf.constant([1.0, 3.0])
    with tf.GradientTape() as tape:  # a tape is recording: the flat call (which records the gradient) is used
        tape.watch(x)
        y = fast(x)
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [2.0, 6.0])
    monkeypatch.setenv(fast_call.CALL_OP_ENV_VAR, "0")
    assert not FastFunction(square).uses_call_op
    np.testing.assert_array_equal(FastFunction(square)(x).numpy(), [1.0, 9.0])


def test_train_step_uses_the_call_op_route():
    v = tf.Variable(np.zeros(3, np.float32))

    def fn(obs):
        v.assign_add(tf.reduce_sum(obs, axis=0))
        return {"total": tf.reduce_sum(v)}

    step = TrainStep(fn, inputs={"obs": tf.TensorSpec((2, 3), tf.float32)}, name="acc")
    out = step(obs=np.ones((2, 3)))
    assert step._functions[False].uses_call_op
    assert float(out["total"]) == 6.0
    assert float(step(obs=np.ones((2, 3)))["total"]) == 12.0
