"""
2-D convolution with a faster kernel gradient on the CPU.

TensorFlow's CPU kernel for the gradient of a strided convolution's kernel (``Conv2DBackpropFilter``) runs 2.5-3.5x
slower than the forward convolution of the same size: for the Nature CNN's first layer (8x8 stride 4, 84x84x4
frames, batch 256) 93-111 ms against 28 ms forward on one core of the benchmark host, the largest single cost of an
Atari update. The same gradient is a forward convolution in another layout:

    dW[i, j, c, n] = sum_{b, y, x} X[b, s*y + i, s*x + j, c] * dY[b, y, x, n]

is a stride-1 convolution with dilation ``s`` of the input seen as (C, H, W, B) (the batch as channels) with the
output gradient seen as a (Oh, Ow, B, N) kernel: an (C, kh, kw, N) output, transposed to (kh, kw, C, N). Measured
(1 thread, batch 256; docs/benchmarks.md "Convolution kernel gradients on the CPU"): first layer 93-111 -> ~41 ms
with the transpositions, second layer (4x4 stride 2) 46-51 -> ~27 ms; a stride-1 3x3 layer does not gain (18 vs
21 ms), so it keeps TensorFlow's kernel. The input gradient of a strided layer is taken on space-to-depth blocks
(:func:`input_gradient`; second layer 31-40 -> 24-28 ms). A whole Nature CNN forward + backward: 18-25 % less time.
The values agree with TensorFlow's kernels to float rounding (relative 1e-6: the sums run in another order).

:func:`conv2d` takes this route for a ``VALID`` convolution with stride > 1 when no GPU is visible (cuDNN's kernel
gradients are fast) and the CPU is an x86-64 one with AVX2 but without AVX-512 (with AVX-512, oneDNN's own gradient
kernels are faster: :func:`cpu_route_pays`); everything else is ``tf.nn.conv2d`` with TensorFlow's own gradient.
``SBTF_CONV_GRAD=native`` or ``dilated`` in the environment forces one or the other. The gradient is itself made of
differentiable ops, so second derivatives (TRPO's Fisher-vector products) still work.
"""
from __future__ import annotations

import functools
import os
from typing import Optional

import tensorflow as tf

#: smallest (static) batch whose 2-4 channel inputs are transposed by XLA: below it the gain (<2 ms per step) does
#: not repay the compilation in a short run
XLA_TRANSPOSE_MIN_BATCH = 128
#: ``SBTF_CONV_GRAD`` value that keeps TensorFlow's own kernel gradient for every convolution
NATIVE = "native"
#: ``SBTF_CONV_GRAD`` value that takes the dilated route on any CPU (measurements, tests)
DILATED = "dilated"


@functools.lru_cache(maxsize=None)
def _gpu_visible() -> bool:
    return bool(tf.config.list_logical_devices("GPU"))


@functools.lru_cache(maxsize=None)
def _cpu_flags() -> frozenset:
    """The instruction-set flags of the CPU (Linux ``/proc/cpuinfo``; empty elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def cpu_route_pays() -> bool:
    """
    Whether this CPU is one the route was measured to win on: x86-64 with AVX2 and without AVX-512. There
    TensorFlow's oneDNN runs strided kernel gradients 2.5-3.5x slower than their forward convolutions and the route
    takes 18-25 % off a Nature CNN forward + backward; on a CPU with AVX-512 oneDNN's own gradient kernels are the
    faster ones (Nature CNN batch 256: 73-79 ms against 89-93 ms with the route, docs/benchmarks.md "On a CPU with
    AVX-512"). Other CPUs (ARM, no ``/proc/cpuinfo``) were not measured and keep TensorFlow's kernels.
    """
    flags = _cpu_flags()
    return "avx2" in flags and "avx512f" not in flags


def dilated_filter_gradient_pays(stride: int, padding: str) -> bool:
    """Whether :func:`conv2d` computes the kernel gradient as a dilated forward convolution (see the module
    docstring): ``VALID`` padding, stride > 1, no GPU, and a CPU where it was measured to pay
    (:func:`cpu_route_pays`); ``SBTF_CONV_GRAD=native`` / ``dilated`` in the environment overrides the CPU rule."""
    if padding != "VALID" or stride <= 1:
        return False
    choice = os.environ.get("SBTF_CONV_GRAD", "").strip().lower()
    if choice == NATIVE:
        return False
    if choice == DILATED:
        return True
    return not _gpu_visible() and cpu_route_pays()


@tf.function(jit_compile=True, autograph=False)
def _batch_to_channels_xla(inputs: tf.Tensor) -> tf.Tensor:
    return tf.transpose(inputs, (3, 1, 2, 0))


def _batch_to_channels(inputs: tf.Tensor) -> tf.Tensor:
    """
    (B, H, W, C) -> (C, H, W, B), by the fastest route measured (1 thread, docs/benchmarks.md "Convolution kernel
    gradients on the CPU"): for large batches of 2-4 channel images (stacked grey frames, RGB) XLA's transpose
    (84x84x4, batch 256: 8 ms against 32-33 ms for TensorFlow's kernel and for the (B, H*W, C) view; compiled once per
    shape, ~0.1 s, plus XLA's start-up in a process's first compilation), otherwise a transpose of the (B, H*W, C)
    view (20x20x32, batch 256: 6.4 ms against 13 ms; 84x84x4, batch 40: 1.4 ms against 3.2 ms, XLA 1.1 ms).
    """
    batch, height, width, channels = inputs.shape
    if None in (height, width, channels):
        return tf.transpose(inputs, (3, 1, 2, 0))
    if batch is not None and batch >= XLA_TRANSPOSE_MIN_BATCH and 1 < channels <= 4:
        return _batch_to_channels_xla(inputs)
    flat = tf.reshape(inputs, (-1, height * width, channels))
    return tf.reshape(tf.transpose(flat, (2, 1, 0)), (channels, height, width, -1))


def filter_gradient(inputs: tf.Tensor, output_grad: tf.Tensor, kernel_height: int, kernel_width: int,
                    stride: int) -> tf.Tensor:
    """
    The gradient of a ``VALID`` convolution's kernel, computed as a forward convolution (see the module docstring).

    :param inputs: (tf.Tensor) the convolution's input (B, H, W, C)
    :param output_grad: (tf.Tensor) the gradient of its output (B, Oh, Ow, N)
    :param kernel_height: (int) kernel rows
    :param kernel_width: (int) kernel columns
    :param stride: (int) the convolution's stride (both directions)
    :return: (tf.Tensor) the kernel gradient (kh, kw, C, N)
    """
    @tf.custom_gradient
    def kernel_grad(x, dy):
        batch_as_channels = _batch_to_channels(x)  # (C, H, W, B)
        grad_as_kernel = tf.transpose(dy, (1, 2, 0, 3))  # (Oh, Ow, B, N)
        out = tf.nn.conv2d(batch_as_channels, grad_as_kernel, strides=1, padding="VALID", dilations=stride)
        # VALID: H - s*(Oh-1) lies in [kh, kh + s); rows beyond kh belong to no kernel tap
        dw = tf.transpose(out[:, :kernel_height, :kernel_width, :], (1, 2, 0, 3))

        def second_order(ddw):
            # dw is bilinear in (x, dy): its gradients are the convolution's input gradient and the convolution
            # itself (TensorFlow's CPU kernels cannot differentiate the dilated convolution above)
            ddx = tf.raw_ops.Conv2DBackpropInput(input_sizes=tf.shape(x), filter=ddw, out_backprop=dy,
                                                 strides=[1, stride, stride, 1], padding="VALID")
            ddy = tf.nn.conv2d(x, ddw, strides=stride, padding="VALID")
            return ddx, ddy

        return dw, second_order

    return kernel_grad(inputs, output_grad)


def _space_to_depth_kernel(kernel: tf.Tensor, stride: int) -> tf.Tensor:
    """(m*s, n*s, C, N) -> (m, n, s*s*C, N): the kernel of the same convolution on ``tf.nn.space_to_depth(x, s)``
    (whose channels are ordered (row offset, column offset, channel))."""
    kh, kw, c_in, c_out = (int(d) for d in kernel.shape)
    m, n = kh // stride, kw // stride
    blocks = tf.reshape(kernel, (m, stride, n, stride, c_in, c_out))
    return tf.reshape(tf.transpose(blocks, (0, 2, 1, 3, 4, 5)), (m, n, stride * stride * c_in, c_out))


def input_gradient(output_grad: tf.Tensor, kernel: tf.Tensor, input_shape, stride: int) -> Optional[tf.Tensor]:
    """
    The gradient of a strided ``VALID`` convolution's input as a stride-1 convolution, or None where this route
    does not apply (a kernel side not a multiple of the stride, an input size unknown when traced).

    A stride-``s`` convolution with a (m*s, n*s) kernel is a stride-1 convolution with an (m, n) kernel of
    ``tf.nn.space_to_depth(x, s)``; the gradient of that input is the "full" stride-1 correlation of the output
    gradient (padded by m-1, n-1) with the flipped kernel, and ``tf.nn.depth_to_space`` brings it back (input rows
    and columns no output reads get 0). Measured on the Nature CNN's second layer (batch 256, 1 thread): 32-40 ms
    for TensorFlow's ``Conv2DBackpropInput``, 24-28 ms this way.

    :param output_grad: (tf.Tensor) (B, Oh, Ow, N)
    :param kernel: (tf.Tensor) (kh, kw, C, N)
    :param input_shape: (tf.TensorShape) the input's static shape (B, H, W, C)
    :param stride: (int) the convolution's stride
    :return: (tf.Tensor or None) (B, H, W, C)
    """
    kh, kw = int(kernel.shape[0]), int(kernel.shape[1])
    height, width = input_shape[1], input_shape[2]
    out_h, out_w = output_grad.shape[1], output_grad.shape[2]
    if kh % stride or kw % stride or None in (height, width, out_h, out_w):
        return None
    m, n = kh // stride, kw // stride
    flipped = tf.transpose(tf.reverse(_space_to_depth_kernel(kernel, stride), [0, 1]), (0, 1, 3, 2))
    padded = tf.pad(output_grad, [[0, 0], [m - 1, m - 1], [n - 1, n - 1], [0, 0]])
    grad_blocks = tf.nn.conv2d(padded, flipped, strides=1, padding="VALID")  # (B, Oh+m-1, Ow+n-1, s*s*C)
    grad = tf.nn.depth_to_space(grad_blocks, stride)
    used_h, used_w = stride * (out_h + m - 1), stride * (out_w + n - 1)
    return tf.pad(grad, [[0, 0], [0, height - used_h], [0, width - used_w], [0, 0]])


def _conv2d_dilated_filter_gradient(inputs: tf.Tensor, kernel: tf.Tensor, stride: int) -> tf.Tensor:
    @tf.custom_gradient
    def conv(x, w):
        out = tf.nn.conv2d(x, w, strides=stride, padding="VALID")

        def grad(dy):
            dx = input_gradient(dy, w, x.shape, stride)
            if dx is None:
                dx = tf.raw_ops.Conv2DBackpropInput(input_sizes=tf.shape(x), filter=w, out_backprop=dy,
                                                    strides=[1, stride, stride, 1], padding="VALID")
            dw = filter_gradient(x, dy, int(w.shape[0]), int(w.shape[1]), stride)
            return dx, dw

        return out, grad

    return conv(inputs, kernel)


def conv2d(inputs: tf.Tensor, kernel, stride: int, padding: str = "VALID") -> tf.Tensor:
    """
    ``tf.nn.conv2d(inputs, kernel, stride, padding)`` (NHWC, square stride); on the CPU a strided ``VALID``
    convolution gets the faster kernel gradient of :func:`filter_gradient`. Same values forward, the kernel
    gradient to float rounding.

    :param inputs: (tf.Tensor) (B, H, W, C)
    :param kernel: (tf.Tensor or tf.Variable) (kh, kw, C, N)
    :param stride: (int) stride in both directions
    :param padding: (str) ``"VALID"`` or ``"SAME"``
    :return: (tf.Tensor) (B, Oh, Ow, N)
    """
    if dilated_filter_gradient_pays(stride, padding):
        return _conv2d_dilated_filter_gradient(inputs, tf.convert_to_tensor(kernel), stride)
    return tf.nn.conv2d(inputs, kernel, strides=stride, padding=padding)


__all__ = ["NATIVE", "conv2d", "dilated_filter_gradient_pays", "filter_gradient", "input_gradient"]
