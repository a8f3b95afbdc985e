"""Segment trees for prioritized experience replay (stable-baselines 2.x ``common/segment_tree.py`` API).

The tree is stored in one NumPy array of ``2 * stored`` nodes (node 1 is the root, node ``i`` has the
children ``2i`` and ``2i + 1``, leaf ``j`` is node ``stored + j``), where ``stored`` is the smallest power of two
that holds every leaf set so far (the others are neutral): memory follows the data, not the capacity. Setting
items and searching a prefix sum accept whole index arrays, so a batch of priorities is updated and a batch of indices
is sampled with a few NumPy operations per tree level instead of a Python loop per element.
"""
from __future__ import annotations

import operator
from typing import Callable, Optional, Union

import numpy as np

IndexLike = Union[int, np.integer, np.ndarray, list]


def unique(sorted_array: np.ndarray) -> np.ndarray:
    """
    ``np.unique`` for an already sorted array (SB2 helper).

    :param sorted_array: (np.ndarray) sorted values
    :return: (np.ndarray) the values without repeats
    """
    if len(sorted_array) <= 1:
        return sorted_array
    keep = np.append(sorted_array[1:] != sorted_array[:-1], True)
    return sorted_array[keep]


#: leaves a tree stores when it is created; the storage doubles as leaves beyond it are set (up to the capacity)
INITIAL_STORED_LEAVES = 1024


class SegmentTree(object):
    """
    A segment tree: an array whose contiguous ranges can be reduced with ``operation`` in O(log capacity).

    Only the leaves set so far take memory: the tree stores the smallest power of two of leaves that holds every
    leaf set (all others are the neutral element), and doubles its storage when a leaf beyond it is set. A
    prioritized buffer of 2**26 transitions therefore costs nothing until it fills, and loading a buffer file
    allocates what its transitions need, not what its capacity announces. Results are those of the full tree.

    :param capacity: (int) number of leaves, a power of two
    :param operation: (callable) associative NumPy ufunc-like ``op(a, b)`` (``np.add``, ``np.minimum``, ...)
    :param neutral_element: (float) the neutral element of ``operation`` (0 for sums, +inf for minima)
    """

    def __init__(self, capacity: int, operation: Callable, neutral_element: float,
                 scalar_operation: Optional[Callable] = None):
        capacity = int(capacity)
        if capacity <= 0 or capacity & (capacity - 1) != 0:
            raise ValueError(f"Error: the capacity of a segment tree must be a positive power of 2, got {capacity}.")
        self._capacity = capacity
        self._operation = operation
        self._scalar_operation = scalar_operation if scalar_operation is not None else operation
        self.neutral_element = neutral_element
        self._allocate(min(capacity, INITIAL_STORED_LEAVES))

    # ------------------------------------------------------------------ storage
    def _allocate(self, stored: int, leaves: Optional[np.ndarray] = None) -> None:
        """
        Store ``stored`` leaves (a power of two): ``leaves`` first, the neutral element after; inner nodes rebuilt.
        """
        self._stored = stored
        self._depth = stored.bit_length() - 1
        self._value = np.full(2 * stored, self.neutral_element, dtype=np.float64)
        if leaves is not None and len(leaves):
            self._value[stored:stored + len(leaves)] = leaves
            self._rebuild()

    def _rebuild(self) -> None:
        size = self._stored
        while size > 1:
            parents = np.arange(size // 2, size)
            self._value[parents] = self._operation(self._value[2 * parents], self._value[2 * parents + 1])
            size //= 2

    def _reserve(self, index: int) -> None:
        """Grow the storage (doubling, up to the capacity) so that leaf ``index`` is stored."""
        if index < self._stored:
            return
        stored = self._stored
        while stored <= index:
            stored *= 2
        self._allocate(min(stored, self._capacity), self._value[self._stored:])

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def stored_leaves(self) -> int:
        """How many leaves take memory now (a power of two, at most ``capacity``)."""
        return self._stored

    def reduce(self, start: int = 0, end: Optional[int] = None) -> float:
        """
        ``operation`` over the leaves ``start, ..., end - 1`` (SB2 semantics: ``end`` is exclusive, None means
        the capacity, a negative ``end`` counts from the capacity).

        :param start: (int) first leaf
        :param end: (int) one past the last leaf
        :return: (float) the reduction
        """
        if end is None:
            end = self._capacity
        if end < 0:
            end += self._capacity
        if start < 0 or end > self._capacity or start > end:
            raise IndexError(f"Error: invalid range [{start}, {end}) for a segment tree of capacity {self._capacity}.")
        result = self.neutral_element
        stored = self._stored
        lo, hi = min(start, stored) + stored, min(end, stored) + stored  # leaves beyond the storage are neutral
        value, op = self._value, self._operation
        while lo < hi:
            if lo & 1:
                result = op(result, value[lo])
                lo += 1
            if hi & 1:
                hi -= 1
                result = op(result, value[hi])
            lo >>= 1
            hi >>= 1
        return float(result)

    def __setitem__(self, idx: IndexLike, val) -> None:
        op = self._operation
        if np.isscalar(idx) and np.ndim(val) == 0:
            # one leaf: walk up the tree with Python floats (much cheaper than NumPy calls per level)
            scalar_op = self._scalar_operation
            node = int(idx)
            if not 0 <= node < self._capacity:
                raise IndexError(f"Error: index {node} out of range for a segment tree of capacity {self._capacity}.")
            self._reserve(node)
            value = self._value
            node += self._stored
            value[node] = val
            node >>= 1
            while node >= 1:
                value[node] = scalar_op(float(value[2 * node]), float(value[2 * node + 1]))
                node >>= 1
            return
        idxs = np.asarray(idx, dtype=np.int64).reshape(-1)
        if idxs.size == 0:
            return
        if idxs.min() < 0 or idxs.max() >= self._capacity:
            raise IndexError(f"Error: indices out of range for a segment tree of capacity {self._capacity}.")
        self._reserve(int(idxs.max()))
        value = self._value
        value[idxs + self._stored] = val
        nodes = unique(np.sort(idxs + self._stored) >> 1)
        while nodes[0] >= 1:
            value[nodes] = op(value[2 * nodes], value[2 * nodes + 1])
            if nodes[-1] == 1:
                break
            nodes = unique(nodes >> 1)

    def __getitem__(self, idx: IndexLike):
        idxs = np.asarray(idx)
        if np.max(idxs) >= self._capacity or np.min(idxs) < 0:
            raise IndexError(f"Error: index out of range for a segment tree of capacity {self._capacity}.")
        if np.max(idxs) < self._stored:
            return self._value[self._stored + idxs]
        inside = idxs < self._stored
        out = np.full(idxs.shape, self.neutral_element, dtype=np.float64)
        out[inside] = self._value[self._stored + idxs[inside]]
        return out if out.ndim else out[()]

    def leaves(self, n: Optional[int] = None) -> np.ndarray:
        """
        A copy of the first ``n`` leaf values (default: all ``capacity`` of them).

        :param n: (int) how many leaves
        :return: (np.ndarray) float64 values
        """
        n = self._capacity if n is None else int(n)
        if not 0 <= n <= self._capacity:
            raise IndexError(f"Error: a segment tree of capacity {self._capacity} has no {n} leaves.")
        out = np.full(n, self.neutral_element, dtype=np.float64)
        kept = min(n, self._stored)
        out[:kept] = self._value[self._stored:self._stored + kept]
        return out

    def set_leaves(self, leaves: np.ndarray) -> None:
        """Set the first ``len(leaves)`` leaves at once (the others become neutral) and rebuild the inner nodes
        (O(len(leaves)): only the leaves given take memory)."""
        leaves = np.asarray(leaves, dtype=np.float64).reshape(-1)
        if leaves.shape[0] > self._capacity:
            raise ValueError(f"Error: expected at most {self._capacity} leaves, got {leaves.shape[0]}.")
        stored = min(self._capacity, INITIAL_STORED_LEAVES)
        while stored < leaves.shape[0]:
            stored *= 2
        self._allocate(stored, leaves)


class SumSegmentTree(SegmentTree):
    """Segment tree of sums, with vectorised prefix-sum search (used to sample proportionally to priorities)."""

    def __init__(self, capacity: int):
        super().__init__(capacity=capacity, operation=np.add, neutral_element=0.0, scalar_operation=operator.add)

    def sum(self, start: int = 0, end: Optional[int] = None) -> float:
        """
        ``arr[start] + ... + arr[end - 1]`` (``end`` exclusive, as SB2's ``reduce``).

        :param start: (int) start position of the reduction (>= 0)
        :param end: (int) end of the reduction (exclusive; None: the capacity)
        :return: (float) the sum
        """
        if start == 0 and end is None:
            return float(self._value[1])
        return self.reduce(start, end)

    def find_prefixsum_idx(self, prefixsum) -> np.ndarray:
        """
        For each ``p`` in ``prefixsum``, the highest index ``i`` such that ``arr[0] + ... + arr[i - 1] <= p``.

        With ``p`` drawn uniformly in ``[0, sum())`` the returned index is ``i`` with probability
        ``arr[i] / sum()``. All entries are searched together, one NumPy step per tree level.

        :param prefixsum: (float or np.ndarray) upper bounds on the prefix sums
        :return: (np.ndarray) int64 indices (same length as ``prefixsum``)
        """
        prefix = np.array(prefixsum, dtype=np.float64, ndmin=1).reshape(-1)
        total = self._value[1]
        if prefix.size and (prefix.min() < 0 or prefix.max() > total + 1e-5):
            raise ValueError(f"Error: prefix sums must lie in [0, {total}], got [{prefix.min()}, {prefix.max()}].")
        value = self._value
        idx = np.ones(prefix.shape[0], dtype=np.int64)
        for _ in range(self._depth):
            left = 2 * idx
            left_value = value[left]
            go_right = left_value <= prefix
            prefix = np.where(go_right, prefix - left_value, prefix)
            idx = left + go_right
        idx -= self._stored
        if self._stored < self._capacity:
            # the stored leaves are the left-most subtree of the full tree: a search whose mass reaches their total
            # goes right above it, through neutral leaves, to the last one (as the full tree does)
            idx = np.where(np.array(prefixsum, dtype=np.float64, ndmin=1).reshape(-1) >= total, self._capacity - 1,
                           idx)
        return idx


class MinSegmentTree(SegmentTree):
    """Segment tree of minima."""

    def __init__(self, capacity: int):
        super().__init__(capacity=capacity, operation=np.minimum, neutral_element=float("inf"), scalar_operation=min)

    def min(self, start: int = 0, end: Optional[int] = None) -> float:
        """
        ``min(arr[start], ..., arr[end - 1])`` (``end`` exclusive, as SB2's ``reduce``).

        :param start: (int) start position of the reduction (>= 0)
        :param end: (int) end of the reduction (exclusive; None: the capacity)
        :return: (float) the minimum
        """
        if start == 0 and end is None:
            return float(self._value[1])
        return self.reduce(start, end)


__all__ = ["SegmentTree", "SumSegmentTree", "MinSegmentTree", "unique", "INITIAL_STORED_LEAVES"]
