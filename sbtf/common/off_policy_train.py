"""The compiled off-policy train steps, one per (number of gradient steps K, variant).

Training runs one compiled call per group of consecutive gradient steps: the step for ``K`` gradient steps takes
``K`` stacked minibatches (a ``TrainStep``: named inputs and outputs, packed into one vector inside) and is traced
once (``n_traces`` counts the traces, so tests can assert that nothing retraces after warm-up). Variants (SAC: update
the target after a single step or not; DQN: copy the target; DDPG: the MPI form) are separate steps.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Tuple

import tensorflow as tf

from sbtf.common.fast_call import FastFunction, TrainStep


class TrainStepCache:
    """
    ``TrainStep`` objects keyed by (number of gradient steps K, variant), built on first use.

    :param builder: ``builder(K, variant) -> TrainStep``
    """

    def __init__(self, builder: Callable[[int, Any], TrainStep]):
        self.builder = builder
        self._steps: Dict[Tuple[int, Any], TrainStep] = {}

    def get(self, n_steps: int, variant: Any = None) -> TrainStep:
        """The step for ``n_steps`` gradient steps of ``variant`` (built on the first request, traced on its call)."""
        key = (int(n_steps), variant)
        step = self._steps.get(key)
        if step is None:
            step = self.builder(int(n_steps), variant)
            self._steps[key] = step
        return step

    def keys(self) -> Iterable[Tuple[int, Any]]:
        """The (K, variant) pairs built so far."""
        return self._steps.keys()

    @property
    def n_traces(self) -> int:
        """How many times the steps were traced (constant after warm-up)."""
        return sum(step.n_traces for step in self._steps.values())

    def clear(self) -> None:
        self._steps.clear()


class TrainFunctionCache:
    """
    Compiled functions with positional inputs keyed by (number of gradient steps K, variant), for code written
    against the former API (``from sbtf.common.off_policy import TrainFunctionCache``); sbtf's algorithms use
    ``TrainStepCache``. Each is a ``tf.function`` with a fixed ``input_signature``, traced once on first use and
    called through ``FastFunction``; ``n_traces`` counts the traces.

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


__all__ = ["TrainStepCache", "TrainFunctionCache"]
