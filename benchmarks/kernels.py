"""
The kernels under every ratio of docs/benchmarks.md, on this machine, 1 thread: float32 matrix products of the
off-policy MLPs' shapes (GFLOP/s) and a Nature CNN forward + backward on 84x84x4 uint8 frames (ms per batch).

    python benchmarks/kernels.py --lib tf                      # TensorFlow: graph and XLA products, CNN with
                                                               # sbtf's convolution (this CPU's gradient rule)
    SBTF_CONV_GRAD=dilated python benchmarks/kernels.py --lib tf   # the CNN with the dilated gradient route
    SBTF_CONV_GRAD=native python benchmarks/kernels.py --lib tf    # ... with oneDNN's own gradients
    /work/sb3venv/bin/python benchmarks/kernels.py --lib torch     # PyTorch (SB3's side)
    python benchmarks/kernels.py --lib numpy                   # NumPy's BLAS, products only

The CPU flags that decide which kernels run (AVX2, AVX-512) are printed first: the same library can be twice as fast
on one host as on another (docs/benchmarks.md, "On a CPU with AVX-512 the picture changes").
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Callable, List, Tuple

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import numpy as np  # noqa: E402 (after the thread limits)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_benchmarks import cpu_flags  # noqa: E402 (standard library only, like this folder's harness)

PRODUCT_SHAPES: List[Tuple[int, int, int]] = [(256, 256, 256), (256, 400, 300), (400, 256, 300), (1024, 1024, 1024)]
CNN_BATCHES = (256, 40, 32)


def best_seconds(run: Callable[[], object], inner: int = 5, rounds: int = 5) -> float:
    """The best mean time of ``inner`` calls over ``rounds`` rounds (after two warm-up calls)."""
    run()
    run()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(inner):
            run()
        best = min(best, (time.perf_counter() - start) / inner)
    return best


def shown_cpu_flags() -> str:
    """The vector instruction sets of this CPU that matter here (Linux only)."""
    flags = cpu_flags()
    if flags is None:
        return "unknown"
    return " ".join(sorted(flags & {"avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile"}))


def tf_kernels() -> None:
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    from sbtf.common.nn.conv_ops import conv2d, dilated_filter_gradient_pays

    rng = np.random.default_rng(0)
    for jit in (False, True):
        for m, k, n in PRODUCT_SHAPES:
            a = tf.constant(rng.random((m, k), dtype=np.float32))
            b = tf.constant(rng.random((k, n), dtype=np.float32))
            # ten products per call, so that the call's own cost does not count
            products = tf.function(lambda x, y: tf.add_n([tf.matmul(x + float(i), y) for i in range(10)]),
                                   jit_compile=jit, autograph=False)
            seconds = best_seconds(lambda products=products, a=a, b=b: products(a, b).numpy()) / 10
            print(f"tf {'xla' if jit else 'graph'} product {(m, k, n)}: {2 * m * k * n / seconds / 1e9:.0f} GFLOP/s")
    route = "dilated route" if dilated_filter_gradient_pays(4, "VALID") else "oneDNN's gradients"
    weights = [tf.Variable(rng.normal(0, 0.05, shape).astype(np.float32))
               for shape in ((8, 8, 4, 32), (4, 4, 32, 64), (3, 3, 64, 64), (3136, 512))]
    for batch in CNN_BATCHES:
        frames = tf.constant(rng.integers(0, 255, (batch, 84, 84, 4)).astype(np.uint8))

        @tf.function(autograph=False)
        def forward_backward(x):
            with tf.GradientTape() as tape:
                h = tf.cast(x, tf.float32) / 255.0
                h = tf.nn.relu(conv2d(h, weights[0], 4))
                h = tf.nn.relu(conv2d(h, weights[1], 2))
                h = tf.nn.relu(conv2d(h, weights[2], 1))
                h = tf.nn.relu(tf.reshape(h, (tf.shape(h)[0], -1)) @ weights[3])
                loss = tf.reduce_sum(h * h)
            return tape.gradient(loss, weights)

        seconds = best_seconds(lambda frames=frames: [g.numpy() for g in forward_backward(frames)])
        print(f"tf Nature CNN fwd+bwd batch {batch} ({route}): {seconds * 1e3:.1f} ms")


def torch_kernels() -> None:
    import torch

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    for m, k, n in PRODUCT_SHAPES:
        a = torch.from_numpy(rng.random((m, k), dtype=np.float32))
        b = torch.from_numpy(rng.random((k, n), dtype=np.float32))
        seconds = best_seconds(lambda a=a, b=b: a @ b, inner=20)
        print(f"torch product {(m, k, n)}: {2 * m * k * n / seconds / 1e9:.0f} GFLOP/s")
    nn = torch.nn
    net = nn.Sequential(nn.Conv2d(4, 32, 8, 4), nn.ReLU(), nn.Conv2d(32, 64, 4, 2), nn.ReLU(), nn.Conv2d(64, 64, 3, 1),
                        nn.ReLU(), nn.Flatten(), nn.Linear(3136, 512), nn.ReLU())
    for batch in CNN_BATCHES:
        frames = torch.from_numpy(rng.integers(0, 255, (batch, 4, 84, 84)).astype(np.uint8))

        def forward_backward(frames=frames):
            net.zero_grad()
            h = net(frames.float() / 255.0)
            (h * h).sum().backward()

        print(f"torch Nature CNN fwd+bwd batch {batch}: {best_seconds(forward_backward) * 1e3:.1f} ms")


def numpy_kernels() -> None:
    rng = np.random.default_rng(0)
    for m, k, n in PRODUCT_SHAPES:
        a = rng.random((m, k), dtype=np.float32)
        b = rng.random((k, n), dtype=np.float32)
        seconds = best_seconds(lambda a=a, b=b: a @ b, inner=20)
        print(f"numpy product {(m, k, n)}: {2 * m * k * n / seconds / 1e9:.0f} GFLOP/s")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lib", choices=("tf", "torch", "numpy"), required=True)
    args = parser.parse_args(argv)
    print(f"CPU flags: {shown_cpu_flags()}; 1 thread")
    {"tf": tf_kernels, "torch": torch_kernels, "numpy": numpy_kernels}[args.lib]()
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.exit(main())
