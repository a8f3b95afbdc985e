"""The cache of compiled off-policy train functions: one ``tf.function`` per (number of gradient steps K, variant).

Training runs one compiled call per group of consecutive gradient steps: the function for ``K`` gradient steps takes
``K`` stacked minibatches and has a fixed ``input_signature``; each ``K`` is traced once (``n_traces`` counts the
traces, so tests can assert that nothing retraces after warm-up).
"""
from __future__ import annotations

from typing import Any, Callable, Dict

import tensorflow as tf

from sbtf.common.fast_call import FastFunction


class TrainFunctionCache:
    """
    Compiled train functions keyed by (number of gradient steps K, variant). Each is a ``tf.function`` with a fixed
    ``input_signature``, traced once on first use and called through ``FastFunction``; ``n_traces`` counts the
    traces.

    :param builder: ``builder(K, variant) -> (python_fn, input_signature)``
    :param jit_compile: (bool) compile with XLA
    """

    def __init__(self, builder: Callable, jit_compile: bool = True):
        self.builder = builder
        self.jit_compile = jit_compile
        self.n_traces = 0
        self._fns: Dict[Any, FastFunction] = {}

    def get(self, n_steps: int, variant: Any = None) -> FastFunction:
        """The compiled function for ``n_steps`` gradient steps of ``variant`` (traced on the first request)."""
        key = (int(n_steps), variant)
        fn = self._fns.get(key)
        if fn is None:
            python_fn, signature = self.builder(int(n_steps), variant)

            def traced(*args):
                self.n_traces += 1
                return python_fn(*args)

            compiled = tf.function(traced, input_signature=signature, jit_compile=self.jit_compile,
                                   reduce_retracing=False)
            fn = FastFunction(compiled.get_concrete_function())
            self._fns[key] = fn
        return fn

    def clear(self) -> None:
        self._fns.clear()


__all__ = ["TrainFunctionCache"]
