"""The compiled off-policy train steps, one per (number of gradient steps K, variant).

Training runs one compiled call per group of consecutive gradient steps: the step for ``K`` gradient steps takes
``K`` stacked minibatches (a ``TrainStep``: named inputs and outputs, packed into one vector inside) and is traced
once (``n_traces`` counts the traces, so tests can assert that nothing retraces after warm-up). Variants (SAC: update
the target after a single step or not; DQN: copy the target; DDPG: the MPI form) are separate steps.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Tuple

from sbtf.common.compile.fast_call import TrainStep


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


__all__ = ["TrainStepCache"]
