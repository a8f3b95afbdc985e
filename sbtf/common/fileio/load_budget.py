"""Budgets of what a file may make sbtf build: spaces, networks, shapes (see ``docs/security.md``, "Budgets").

A model file describes its spaces and its network in a few bytes (``Box(shape=(500000000,))``,
``Discrete(2000000)``), but building them takes memory in proportion to what they describe. Everything
large that a loader builds from a file is therefore first compared with what the file itself carries:

* **spaces** (:func:`space_budget`, :func:`check_space_elements`): a space of a file may not have more
  elements than the largest parameter array the file stores can take in (a network reads each observation
  element with at least one weight, and writes each action with at least one), with a floor of
  :data:`SPACE_ELEMENTS_FLOOR` elements, and never more than :data:`MAX_SPACE_ELEMENTS` (no real agent comes
  near it). All the spaces one load builds share a total of four times that limit;
* **networks** (:func:`parameter_budget`, :func:`charge_weight`): while a model is built from a file, the
  weights its sbtf layers create may hold at most :data:`NETWORK_BUDGET_FACTOR` times the values the file
  stores, plus :data:`NETWORK_BUDGET_SLACK` (target networks, old policies, perturbed actors are copies of
  stored ones). A layer that would go beyond it raises before its weights are allocated;
* **shapes** (:func:`checked_prod`): a product of sizes read from a file is computed with Python integers (a
  NumPy ``prod`` wraps around int64: ``[2**62 + 1, 4]`` would give 4) and bounded.

Every refusal is a :class:`~sbtf.common.file_errors.FileLimitError` (a ``ModelFileError``) that says which limit
and how to raise it for a file you trust (``load_limits(max_space_elements=...)``, ``set_load_limits``).
"""
from __future__ import annotations

import contextlib
import math
import threading
from typing import Any, Iterable, Iterator, Optional

from sbtf.common.file_errors import FileLimitError, ModelDataError, describe_value, get_load_limits

__all__ = ["MAX_SPACE_ELEMENTS", "SPACE_ELEMENTS_FLOOR", "NETWORK_BUDGET_FACTOR", "NETWORK_BUDGET_SLACK",
           "space_budget", "check_space_elements", "space_limit", "parameter_budget", "charge_weight",
           "checked_prod", "largest_array", "count_text", "exception_text"]

#: hard cap on the elements of one space read from any file (16,777,216: e.g. 2048 x 2048 x 4; real agents stay
#: far below); ``LoadLimits.max_space_elements`` lowers or raises it
MAX_SPACE_ELEMENTS = 1 << 24
#: spaces up to this many elements are accepted whatever the file stores (256 x 256 x 1 images; the default of
#: ``LoadLimits.space_elements_floor``)
SPACE_ELEMENTS_FLOOR = 1 << 16
#: a model built from a file may create sbtf layer weights of this many times the values the file stores ...
NETWORK_BUDGET_FACTOR = 4
#: ... plus this many values
NETWORK_BUDGET_SLACK = 1 << 20

_STATE = threading.local()


def exception_text(exc: BaseException, limit: int = 300) -> str:
    """``"TypeError: <message>"`` of an exception raised on file data, cut to ``limit`` characters."""
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - a broken __str__ must not hide the real error
        text = ""
    text = text if len(text) <= limit else text[: limit - 3] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def count_text(n: int) -> str:
    """``n`` with thousands separators, or its order of magnitude when it is too long to print."""
    return f"{n:,}" if abs(n) < 10 ** 30 else f"about {float(n):.2e}" if abs(n) < 10 ** 300 else "more than 10**300"


def _max_space_elements() -> int:
    return int(getattr(get_load_limits(), "max_space_elements", MAX_SPACE_ELEMENTS))


# ------------------------------------------------------------------------------------------------ spaces
class _SpaceBudget:
    def __init__(self, carried: Optional[int], what: str):
        cap = _max_space_elements()
        floor = int(getattr(get_load_limits(), "space_elements_floor", SPACE_ELEMENTS_FLOOR))
        self.limit = cap if carried is None else min(cap, max(int(carried), floor))
        self.carried = carried
        self.total_limit = 4 * self.limit
        self.used = 0
        self.what = what


@contextlib.contextmanager
def space_budget(carried: Optional[int], what: str = "the file") -> Iterator[None]:
    """
    Inside the block, every space built from a file is checked (:func:`check_space_elements`) against
    ``carried``: the number of values of the largest array the file stores (None: only the hard cap).

    :param carried: (int or None) elements of the largest array the file carries
    :param what: (str) the file, for messages
    """
    stack = getattr(_STATE, "spaces", None)
    if stack is None:
        stack = _STATE.spaces = []
    stack.append(_SpaceBudget(carried, what))
    try:
        yield
    finally:
        stack.pop()


def space_limit() -> int:
    """The most elements one space may have now (the innermost :func:`space_budget`, else the hard cap)."""
    stack = getattr(_STATE, "spaces", None)
    return stack[-1].limit if stack else _max_space_elements()


def check_space_elements(count: int, what: str = "A space of the file") -> None:
    """
    Refuse a space of ``count`` elements (Box/MultiBinary: the product of the shape; Discrete: ``n``;
    MultiDiscrete: the sum of ``nvec``, its one-hot width) before it is built.

    :raises FileLimitError: beyond the hard cap, or beyond what the file's stored parameters can take in
    """
    count = int(count)
    cap = _max_space_elements()
    if count > cap:
        raise FileLimitError(f"{what} has {count_text(count)} elements, beyond the {cap:,} of any real agent; "
                             "the file is damaged or hostile. If you trust it, raise the limit with "
                             "sbtf.common.file_errors.load_limits(max_space_elements=...).")
    stack = getattr(_STATE, "spaces", None)
    if not stack:
        return
    budget = stack[-1]
    if count > budget.limit:
        raise FileLimitError(f"{what} has {count:,} elements, more than the parameters stored in {budget.what} can "
                             f"take in (their largest array holds {budget.carried or 0:,} values); the file is "
                             "corrupted or hostile. If you trust it (e.g. a feature extractor that pools a large "
                             "image), load it inside sbtf.common.file_errors.load_limits(space_elements_floor=...).")
    budget.used += count
    if budget.used > budget.total_limit:
        raise FileLimitError(f"The spaces of {budget.what} hold {budget.used:,} elements in all, more than its "
                             f"parameters can take in ({budget.total_limit:,}); the file is corrupted or hostile.")


def largest_array(sizes: Iterable[int]) -> int:
    """The largest of ``sizes`` (0 when empty): what :func:`space_budget` takes."""
    return max((int(s) for s in sizes), default=0)


# ------------------------------------------------------------------------------------------------ networks
class _ParameterBudget:
    def __init__(self, stored: int, what: str):
        self.stored = int(stored)
        self.remaining = NETWORK_BUDGET_FACTOR * self.stored + NETWORK_BUDGET_SLACK
        self.what = what


@contextlib.contextmanager
def parameter_budget(stored_values: int, what: str = "the model file") -> Iterator[None]:
    """
    Inside the block, the weights created by sbtf's layers (:func:`charge_weight`) may hold at most
    ``NETWORK_BUDGET_FACTOR * stored_values + NETWORK_BUDGET_SLACK`` values: a model built from a file
    cannot allocate a network much larger than the parameters the file stores.

    :param stored_values: (int) the number of parameter values the file stores
    :param what: (str) the file, for messages
    """
    stack = getattr(_STATE, "networks", None)
    if stack is None:
        stack = _STATE.networks = []
    stack.append(_ParameterBudget(stored_values, what))
    try:
        yield
    finally:
        stack.pop()


def charge_weight(shape: Any, name: str = "a weight") -> None:
    """
    Called by sbtf's layers before they create a weight: inside :func:`parameter_budget`, refuse a weight that
    would take the network beyond what the file stores (outside it, nothing is checked).

    :raises FileLimitError: before anything is allocated
    """
    stack = getattr(_STATE, "networks", None)
    if not stack:
        return
    budget = stack[-1]
    try:
        count = math.prod(int(s) for s in shape)
    except (TypeError, ValueError):
        return  # an unknown dimension: Keras reports it itself
    budget.remaining -= count
    if budget.remaining < 0:
        raise FileLimitError(f"The model built from {budget.what} would create the weight {name!s:.80} of shape "
                             f"{describe_value(tuple(shape), 80)}, beyond what the file's {budget.stored:,} stored "
                             "parameter values allow; its spaces or policy_kwargs do not match its parameters (the "
                             "file is corrupted or hostile).")


# ------------------------------------------------------------------------------------------------ shapes
def checked_prod(shape: Any, what: str, limit: Optional[int] = None) -> int:
    """
    The product of the sizes ``shape`` read from a file, as a Python int (no int64 wrap-around), checked: every
    size a non-negative integer, the product at most ``limit`` (default: ``max_items`` of the load limits).

    :param shape: (sequence of int-like) the sizes
    :param what: (str) what they are, for messages
    :param limit: (int) the largest product accepted
    :raises ModelDataError: when a size is not a non-negative integer
    :raises FileLimitError: when the product is beyond ``limit``
    """
    try:
        sizes = [int(s) for s in shape]
        exact = all(int(s) == s for s in shape)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ModelDataError(f"{what} is {describe_value(shape)}, not a list of sizes.") from exc
    if not exact or any(s < 0 for s in sizes) or len(sizes) > 32:
        raise ModelDataError(f"{what} is {describe_value(shape)}, not a list of non-negative sizes.")
    product = math.prod(sizes)
    limit = get_load_limits().max_items if limit is None else int(limit)
    if product > limit:
        raise FileLimitError(f"{what} {describe_value(tuple(sizes), 120)} holds {count_text(product)} elements, "
                             f"beyond the limit ({limit:,}); the file is damaged or hostile.")
    return product
