"""Minibatch iteration over a dict of aligned arrays (stable-baselines 2.x ``common.Dataset``)."""
from __future__ import annotations

from typing import Dict, Iterator, Optional

import numpy as np


class Dataset:
    """
    A dataset of aligned arrays with shuffling minibatch iteration.

    :param data_map: (dict) name -> array, all with the same first dimension
    :param shuffle: (bool) shuffle the data at each pass
    """

    def __init__(self, data_map: Dict[str, np.ndarray], shuffle: bool = True):
        self.data_map = data_map
        self.shuffle = shuffle
        self.n_samples = next(iter(data_map.values())).shape[0]
        for key, value in data_map.items():
            if value.shape[0] != self.n_samples:
                raise ValueError(f"Error: {key!r} has {value.shape[0]} samples, expected {self.n_samples}")
        self._next_id = 0
        self.shuffle_dataset()

    def shuffle_dataset(self) -> None:
        """Shuffle all arrays with one permutation (no-op when ``shuffle`` is False)."""
        if not self.shuffle:
            return
        perm = np.arange(self.n_samples)
        np.random.shuffle(perm)
        for key in self.data_map:
            self.data_map[key] = self.data_map[key][perm]

    def next_batch(self, batch_size: int) -> Dict[str, np.ndarray]:
        """The next minibatch (the last one of a pass may be smaller); a new pass reshuffles."""
        if self._next_id >= self.n_samples:
            self._next_id = 0
            self.shuffle_dataset()
        cur_id = self._next_id
        cur_batch_size = min(batch_size, self.n_samples - self._next_id)
        self._next_id += cur_batch_size
        return {key: value[cur_id:cur_id + cur_batch_size] for key, value in self.data_map.items()}

    def iterate_once(self, batch_size: int) -> Iterator[Dict[str, np.ndarray]]:
        """One pass over the data in minibatches."""
        self.shuffle_dataset()
        while self._next_id <= self.n_samples - batch_size:
            yield self.next_batch(batch_size)
        self._next_id = 0

    def subset(self, num_elements: int, deterministic: bool = True) -> "Dataset":
        """A dataset of the first ``num_elements`` samples."""
        return Dataset({key: value[:num_elements] for key, value in self.data_map.items()}, deterministic)


def iterbatches(arrays, *, num_batches: Optional[int] = None, batch_size: Optional[int] = None, shuffle=True,
                include_final_partial_batch=True):
    """Iterate over tuples of minibatches of aligned arrays (SB2 ``iterbatches``)."""
    assert (num_batches is None) != (batch_size is None), "Provide num_batches or batch_size, but not both"
    arrays = tuple(map(np.asarray, arrays))
    n_samples = arrays[0].shape[0]
    assert all(a.shape[0] == n_samples for a in arrays[1:])
    inds = np.arange(n_samples)
    if shuffle:
        np.random.shuffle(inds)
    sections = np.arange(0, n_samples, batch_size)[1:] if num_batches is None else num_batches
    for batch_inds in np.array_split(inds, sections):
        if include_final_partial_batch or len(batch_inds) == batch_size:
            yield tuple(a[batch_inds] for a in arrays)
