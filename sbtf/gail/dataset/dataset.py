"""Expert datasets for behaviour cloning (``pretrain``) and GAIL, in the stable-baselines 2.x format.

An expert dataset is a dict (saved as an ``.npz`` archive) with the keys

* ``obs``: observations, first axis = timestep (concatenated over episodes). For image
  environments recorded by :func:`generate_expert_traj` with a ``save_path``, ``obs`` is a
  ``str`` array of image file paths instead; the images are read lazily, one minibatch at a time.
* ``actions``: ``(N, 1)`` for ``Discrete`` action spaces, ``(N,) + shape`` for ``Box``.
* ``rewards``: ``(N,)`` (not used for training; length-checked when present).
* ``episode_returns``: ``(n_episodes,)``.
* ``episode_starts``: ``(N,)`` bool, ``True`` on the first transition of every episode.

Differences from stable-baselines 2.10, all fixes of SB2 bugs:

* ``traj_limitation=n`` keeps exactly the first ``n`` episodes (SB2 also dropped the last
  transition of the ``n``-th episode), and ``returns`` / ``avg_ret`` / ``num_traj`` describe
  those ``n`` episodes (SB2 kept every episode return and reported ``num_traj == -1`` when
  ``traj_limitation == -1``).
* Observations keep their per-sample shape (SB2 flattened observations with more than one
  dimension, which its own ``pretrain`` / GAIL placeholders could not be fed with).
* :class:`DataLoader` runs in-process (no worker process, no queue); it never yields an empty
  minibatch.
* ``.npz`` files are read without pickles, and every array size is checked from its header before it is read
  (:func:`read_expert_npz`); only numeric arrays and text arrays (image paths) are accepted.
"""
from __future__ import annotations

import os
import warnings
import zipfile
import zlib
from typing import Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from sbtf.common.file_errors import (CorruptedFileError, FileLimitError, ModelDataError, ModelFileError,
                                     describe_value, get_load_limits)
from sbtf.common.fileio.load_budget import exception_text
from sbtf.common.fileio.safe_zip import NUMERIC_KINDS, open_zip, read_npz

REQUIRED_KEYS = ("obs", "actions", "episode_returns", "episode_starts")


class MissingDatasetKeyError(ModelDataError, KeyError):
    """An expert dataset file lacks an array it needs (also a ``KeyError``, as sbtf raised before)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return ModelDataError.__str__(self)


# ---------------------------------------------------------------------------------------------
# image reading / writing (cv2 when importable, Pillow otherwise; matplotlib's own image I/O uses Pillow)
# ---------------------------------------------------------------------------------------------
def _cv2():
    """Return the ``cv2`` module, or None when OpenCV is not installed."""
    try:
        import cv2  # pylint: disable=import-outside-toplevel
    except ImportError:
        return None
    return cv2


def _pil_image():
    """Return ``PIL.Image``, or None when Pillow is not installed."""
    try:
        from PIL import Image  # pylint: disable=import-outside-toplevel
    except ImportError:
        return None
    return Image


def _require_pil():
    image_module = _pil_image()
    if image_module is None:
        raise ImportError("Reading/writing image observations needs OpenCV (cv2) or Pillow (PIL); "
                          "neither could be imported")
    return image_module


def load_image(image_path: str) -> np.ndarray:
    """
    Read one image observation, as recorded by :func:`generate_expert_traj`.

    :param image_path: (str) path to a png/jpg image
    :return: (np.ndarray) ``uint8`` array of shape ``(H, W, C)`` with RGB(A) channel order
        (``C == 1`` for grey images)
    """
    image_path = os.fspath(image_path)
    if not os.path.isfile(image_path):
        raise FileNotFoundError(f"Image observation not found: {image_path!r}")
    cv2 = _cv2()
    if cv2 is not None:
        # IMREAD_UNCHANGED keeps grey and RGBA images as they were written.
        image = cv2.imread(image_path, cv2.IMREAD_UNCHANGED)
        if image is None:
            raise ValueError(f"Could not decode the image observation {image_path!r}")
        if image.ndim == 3 and image.shape[-1] == 3:
            image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        elif image.ndim == 3 and image.shape[-1] == 4:
            image = cv2.cvtColor(image, cv2.COLOR_BGRA2RGBA)
    else:
        with _require_pil().open(image_path) as img:
            if img.mode == "P":  # palette png (not written by sbtf): expand the palette
                img = img.convert("RGBA" if "transparency" in img.info else "RGB")
            image = np.asarray(img)
    image = np.asarray(image)
    if image.ndim == 2:
        image = image[:, :, np.newaxis]
    return image


def save_image(image_path: str, image: np.ndarray) -> None:
    """
    Write one image observation (``uint8``, shape ``(H, W, C)`` with C in {1, 3, 4}, RGB(A) order).

    :param image_path: (str) destination; the format follows the extension (use png to be lossless)
    :param image: (np.ndarray) the observation
    """
    image = np.asarray(image)
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[-1] not in (1, 3, 4):
        raise ValueError(f"Expected a uint8 image of shape (H, W, 1|3|4), got {image.dtype} {image.shape}")
    cv2 = _cv2()
    if cv2 is not None:
        if image.shape[-1] == 3:
            image = cv2.cvtColor(image, cv2.COLOR_RGB2BGR)
        elif image.shape[-1] == 4:
            image = cv2.cvtColor(image, cv2.COLOR_RGBA2BGRA)
        else:
            image = image[:, :, 0]
        if not cv2.imwrite(image_path, np.ascontiguousarray(image)):
            raise OSError(f"Could not write the image observation {image_path!r}")
        return
    image_module = _require_pil()
    if image.shape[-1] == 1:
        image_module.fromarray(np.ascontiguousarray(image[:, :, 0])).save(image_path)
    else:
        image_module.fromarray(image).save(image_path)


def _is_path_array(observations: np.ndarray) -> bool:
    """True when ``observations`` holds image file paths rather than observation values."""
    if observations.dtype.kind in ("U", "S"):
        return True
    if observations.dtype == object and len(observations) > 0:
        return isinstance(observations.flat[0], (str, bytes))
    return False


def _as_path_array(observations: np.ndarray) -> np.ndarray:
    """Turn a bytes/object array of paths into a 1-D ``str`` array."""
    paths = [p.decode() if isinstance(p, bytes) else str(p) for p in observations.reshape(-1)]
    return np.asarray(paths, dtype=str)


def _resolve_image_paths(paths: np.ndarray, base_dir: Optional[str]) -> np.ndarray:
    """
    Make recorded image paths usable from here.

    SB2 stores paths as ``<dirname(save_path)>/<image_folder>/<idx>.<ext>``, i.e. relative to the
    working directory at recording time. They are used as they are when the first one exists,
    otherwise relative to the dataset's folder, otherwise as ``<image_folder>/<file>`` inside the
    dataset's folder. The rule that finds the first image is applied to all of them.
    """
    if len(paths) == 0:
        return paths
    first = str(paths[0])
    candidates = [("as_is", first)]
    if base_dir is not None:
        if not os.path.isabs(first):
            candidates.append(("relative", os.path.join(base_dir, first)))
        candidates.append(("folder", os.path.join(base_dir, os.path.basename(os.path.dirname(first)),
                                                  os.path.basename(first))))
    for rule, candidate in candidates:  # noqa: B007  # rule is read after the loop
        if os.path.isfile(candidate):
            break
    else:
        tried = ", ".join(repr(c) for _, c in candidates)
        raise FileNotFoundError(f"The dataset's observations are image paths but the first image was not found "
                                f"(tried {tried})")
    if rule == "as_is":
        return paths
    if rule == "relative":
        return np.asarray([os.path.join(base_dir, p) for p in paths], dtype=str)
    return np.asarray([os.path.join(base_dir, os.path.basename(os.path.dirname(p)), os.path.basename(p))
                       for p in paths], dtype=str)


def _log(message: str) -> None:
    try:
        from sbtf import logger  # pylint: disable=import-outside-toplevel
    except ImportError:
        print(message)
    else:
        logger.log(message)


# ---------------------------------------------------------------------------------------------
# ExpertDataset
# ---------------------------------------------------------------------------------------------
# reading expert .npz files (sizes checked from the headers; numeric arrays and text arrays of image paths)
# ---------------------------------------------------------------------------------------------
def _npy_header(handle, where: str) -> Tuple[Tuple[int, ...], bool, np.dtype]:
    """The ``(shape, fortran order, dtype)`` of an ``.npy`` header, whatever its dtype (nothing is allocated)."""
    from sbtf.common.fileio.safe_zip import parse_npy_header

    return parse_npy_header(handle, where)


def _is_text(dtype: np.dtype) -> bool:
    return dtype.kind == "U" and dtype.fields is None and dtype.subdtype is None and 0 < dtype.itemsize <= 1 << 16


def read_expert_npz(path: str) -> Dict[str, np.ndarray]:
    """
    The arrays of an expert ``.npz``, read safely: numeric arrays (bool, int, uint, float) and text arrays (the image
    paths of image datasets); every size is checked from the headers against ``max_array_bytes`` before anything is
    read; object, structured and other arrays raise :class:`ModelDataError` saying how to convert the file.
    """
    what = f"expert dataset {path!r}"
    budget = get_load_limits().max_array_bytes
    text: Dict[str, np.ndarray] = {}
    order = []
    with open_zip(path, what) as archive:
        for info in archive.infolist():
            key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
            order.append(key)
            where = f"Array {key!r} of the {what}"
            try:
                handle = archive.open(info)
            except (zipfile.BadZipFile, zlib.error, OSError, NotImplementedError, RuntimeError, ValueError) as exc:
                raise CorruptedFileError(f"{where} cannot be opened ({type(exc).__name__}: {exc}).") from exc
            with handle:
                shape, fortran, dtype = _npy_header(handle, where)
                if dtype.kind in NUMERIC_KINDS:
                    continue  # read below, by safe_zip.read_npz
                if not _is_text(dtype):
                    raise ModelDataError(
                        f"Expert dataset {path!r} holds pickled object arrays or other non-numeric data ({key!r} has "
                        f"dtype {dtype}), which sbtf does not load from files. Store numbers (and image paths as a "
                        "str array): if you trust the file, load it with np.load(path, allow_pickle=True), convert "
                        "each array with np.asarray(value, dtype=np.float32) (or str for image paths) and save it "
                        "again with np.savez, or pass the arrays as traj_data=dict(...).")
                nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
                if nbytes > info.file_size:
                    raise CorruptedFileError(f"{where} announces {nbytes:,} bytes of data but the member holds only "
                                             f"{info.file_size:,}; the file is truncated or corrupted.")
                if nbytes > budget:
                    raise FileLimitError(f"{where} announces {nbytes:,} bytes, beyond the {budget:,}-byte limit; raise "
                                         "it with sbtf.common.file_errors.load_limits(max_array_bytes=...) if you "
                                         "trust the file.")
                try:
                    data = handle.read(nbytes + 1)
                except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError) as exc:
                    raise CorruptedFileError(f"{where} cannot be read ({type(exc).__name__}: {exc}).") from exc
                if len(data) != nbytes:
                    raise CorruptedFileError(f"{where} holds {len(data):,} bytes of data but its header announces "
                                             f"{nbytes:,}; the file is truncated or corrupted.")
                budget -= nbytes
                array = np.frombuffer(bytearray(data), dtype=dtype)
                text[key] = array.reshape(shape[::-1]).transpose() if fortran else array.reshape(shape)
    numeric = read_npz(path, names=[k for k in order if k not in text], max_bytes=budget, what=what)
    return {key: text[key] if key in text else numeric[key] for key in order}


# ---------------------------------------------------------------------------------------------
class ExpertDataset(object):
    """
    Dataset for using behavior cloning or GAIL.

    The structure of the expert dataset is a dict, saved as an ".npz" archive.
    The dictionary contains the keys 'actions', 'episode_returns', 'rewards', 'obs' and 'episode_starts'.
    The corresponding values have data concatenated across episode: the first axis is the timestep,
    the remaining axes index into the data. In case of images, 'obs' contains the paths to
    the images, which are read lazily by the :class:`DataLoader`.

    :param expert_path: (str) The path to trajectory data (.npz file). Mutually exclusive with traj_data.
    :param traj_data: (dict) Trajectory data, in format described above. Mutually exclusive with expert_path.
    :param train_fraction: (float) the train validation split (0 to 1)
        for pre-training using behavior cloning (BC)
    :param batch_size: (int) the minibatch size for behavior cloning
    :param traj_limitation: (int) the number of trajectory to use (if -1, load all)
    :param randomize: (bool) if the dataset should be shuffled
    :param verbose: (int) Verbosity
    :param sequential_preprocessing: (bool) kept for SB2 compatibility: sbtf's DataLoader always
        pre-processes in-process
    """

    EXCLUDED_KEYS = {"dataloader", "train_loader", "val_loader"}

    def __init__(self, expert_path=None, traj_data=None, train_fraction=0.7, batch_size=64,
                 traj_limitation=-1, randomize=True, verbose=1, sequential_preprocessing=False):
        if traj_data is not None and expert_path is not None:
            raise ValueError("Cannot specify both 'traj_data' and 'expert_path'")
        if traj_data is None and expert_path is None:
            raise ValueError("Must specify one of 'traj_data' or 'expert_path'")
        if not 0.0 < float(train_fraction) < 1.0:
            raise ValueError(f"train_fraction must be in (0, 1), got {train_fraction}")
        if int(batch_size) <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size}")

        base_dir = None
        if traj_data is None:
            traj_data, expert_path = self._load_npz(expert_path)
            base_dir = os.path.dirname(os.path.abspath(expert_path))
        elif not isinstance(traj_data, Mapping):
            raise TypeError(f"traj_data must be a dict, got {type(traj_data).__name__}")
        self.expert_path = expert_path

        if expert_path is None:
            self._set_data(traj_data, None, base_dir, train_fraction, traj_limitation, verbose, randomize,
                           sequential_preprocessing, batch_size)
            return
        try:
            self._set_data(traj_data, expert_path, base_dir, train_fraction, traj_limitation, verbose, randomize,
                           sequential_preprocessing, batch_size)
        except ModelFileError:
            raise
        except (ValueError, TypeError, IndexError, KeyError, OverflowError) as exc:  # the file's arrays do not fit
            if isinstance(exc, KeyError) and exc.args and isinstance(exc.args[0], str):
                raise MissingDatasetKeyError(exc.args[0][:500]) from exc
            raise ModelDataError(f"Expert dataset {describe_value(os.fspath(expert_path), 200)} does not hold a valid "
                                 f"dataset ({exception_text(exc)}).") from exc

    def _set_data(self, traj_data, expert_path, base_dir, train_fraction, traj_limitation, verbose, randomize,
                  sequential_preprocessing, batch_size) -> None:
        """Check the arrays of a dataset against each other and keep them (split into training/validation)."""
        missing = [key for key in REQUIRED_KEYS if key not in traj_data]
        if missing:
            source = repr(expert_path) if expert_path is not None else "traj_data"
            raise KeyError(f"Expert dataset {source} is missing the key(s) {missing}; "
                           f"an expert dataset needs {list(REQUIRED_KEYS)} (and usually 'rewards')")
        data = {key: np.asarray(traj_data[key]) for key in list(REQUIRED_KEYS) + ["rewards"] if key in traj_data}

        if verbose > 0:
            for key, val in data.items():
                print(key, val.shape)

        observations = data["obs"]
        actions = data["actions"]
        episode_starts = data["episode_starts"].astype(bool).reshape(-1)
        episode_returns = data["episode_returns"].reshape(-1)
        n_total = len(observations)
        if n_total == 0:
            raise ValueError("The expert dataset is empty (no observations)")
        if len(actions) != n_total:
            raise ValueError(f"The number of actions ({len(actions)}) and observations ({n_total}) differ, "
                             "please check your expert dataset")
        if len(episode_starts) != n_total:
            raise ValueError(f"'episode_starts' has {len(episode_starts)} entries but there are {n_total} "
                             "observations, please check your expert dataset")
        if "rewards" in data and len(data["rewards"]) != n_total:
            raise ValueError(f"'rewards' has {len(data['rewards'])} entries but there are {n_total} "
                             "observations, please check your expert dataset")

        # Episode boundaries: the first transition always opens an episode.
        starts = episode_starts.copy()
        starts[0] = True
        start_indices = np.flatnonzero(starts)
        n_episodes = len(start_indices)
        if len(episode_returns) != n_episodes:
            warnings.warn(f"The expert dataset has {n_episodes} episodes (from 'episode_starts') but "
                          f"{len(episode_returns)} episode returns")

        if traj_limitation is not None and traj_limitation > 0 and traj_limitation < n_episodes:
            num_traj = int(traj_limitation)
            traj_limit_idx = int(start_indices[num_traj])
        else:
            num_traj = n_episodes
            traj_limit_idx = n_total

        observations = observations[:traj_limit_idx]
        actions = actions[:traj_limit_idx]
        if _is_path_array(observations):
            observations = _resolve_image_paths(_as_path_array(observations), base_dir)
        if actions.ndim == 1:
            # SB2 stores Discrete actions as (N, 1); accept (N,) from hand-made dicts.
            actions = actions.reshape(-1, 1)
        elif actions.ndim > 2:
            actions = actions.reshape(len(actions), -1)

        indices = np.random.permutation(len(observations)).astype(np.int64)
        n_train = int(train_fraction * len(indices))
        train_indices = indices[:n_train]
        val_indices = indices[n_train:]
        if len(train_indices) == 0:
            raise ValueError(f"No sample for the training set ({len(indices)} transitions, "
                             f"train_fraction={train_fraction})")
        if len(val_indices) == 0:
            raise ValueError(f"No sample for the validation set ({len(indices)} transitions, "
                             f"train_fraction={train_fraction})")

        self.observations = observations
        self.actions = actions
        self.episode_starts = episode_starts[:traj_limit_idx]
        self.rewards = data["rewards"][:traj_limit_idx] if "rewards" in data else None
        self.returns = episode_returns[:num_traj]
        self.avg_ret = float(np.mean(self.returns)) if len(self.returns) > 0 else float("nan")
        self.std_ret = float(np.std(self.returns)) if len(self.returns) > 0 else float("nan")
        self.verbose = verbose
        self.num_traj = num_traj
        self.num_transition = len(self.observations)
        self.randomize = randomize
        self.sequential_preprocessing = sequential_preprocessing
        self.batch_size = int(batch_size)

        self.dataloader = None
        self.train_loader = DataLoader(train_indices, self.observations, self.actions, batch_size,
                                       shuffle=self.randomize, start_process=False,
                                       sequential=sequential_preprocessing)
        self.val_loader = DataLoader(val_indices, self.observations, self.actions, batch_size,
                                     shuffle=self.randomize, start_process=False,
                                     sequential=sequential_preprocessing)

        if self.verbose >= 1:
            self.log_info()

    @staticmethod
    def _load_npz(expert_path) -> Tuple[Dict[str, np.ndarray], str]:
        path = os.fspath(expert_path)
        if not os.path.isfile(path):
            if not path.endswith(".npz") and os.path.isfile(path + ".npz"):
                path = path + ".npz"
            else:
                raise FileNotFoundError(f"Expert dataset not found: {path!r}")
        if not zipfile.is_zipfile(path):
            raise CorruptedFileError(f"Expert dataset {path!r} is not an .npz archive")
        return read_expert_npz(path), path

    def init_dataloader(self, batch_size):
        """
        Initialize the dataloader used by GAIL.

        :param batch_size: (int)
        """
        indices = np.random.permutation(len(self.observations)).astype(np.int64)
        self.dataloader = DataLoader(indices, self.observations, self.actions, batch_size,
                                     shuffle=self.randomize, start_process=False,
                                     sequential=self.sequential_preprocessing)

    def __del__(self):
        # Nothing to stop: the loaders run in-process.
        pass

    def prepare_pickling(self):
        """
        Drop the dataloaders before pickling (SB2 API; sbtf's loaders are picklable anyway).
        """
        self.dataloader, self.train_loader, self.val_loader = None, None, None

    def log_info(self):
        """
        Log the information of the dataset.
        """
        _log("Total trajectories: {}".format(self.num_traj))
        _log("Total transitions: {}".format(self.num_transition))
        _log("Average returns: {}".format(self.avg_ret))
        _log("Std for returns: {}".format(self.std_ret))

    def get_next_batch(self, split=None):
        """
        Get the batch from the dataset.

        :param split: (str) the type of data split (can be None, 'train', 'val')
        :return: (np.ndarray, np.ndarray) inputs and labels
        """
        loaders = {None: "dataloader", "train": "train_loader", "val": "val_loader"}
        if split not in loaders:
            raise ValueError(f"split must be None, 'train' or 'val', got {split!r}")
        dataloader = getattr(self, loaders[split])
        if dataloader is None:
            if split is None:
                raise ValueError("The GAIL dataloader is not initialised: call init_dataloader(batch_size) first")
            raise ValueError(f"The {split!r} dataloader was dropped by prepare_pickling()")
        try:
            return next(dataloader)
        except StopIteration:
            # End of an epoch: start the next one.
            return next(iter(dataloader))

    def plot(self):
        """
        Show histogram plotting of the episode returns

        :return: (matplotlib.figure.Figure) the figure
        """
        # Isolate dependency since it is only used for plotting and also since
        # different matplotlib backends have further dependencies themselves.
        import matplotlib  # pylint: disable=import-outside-toplevel
        import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel

        fig, ax = plt.subplots()
        ax.hist(self.returns)
        ax.set_xlabel("episode return")
        ax.set_ylabel("episodes")
        ax.set_title(f"Expert returns ({self.num_traj} episodes, mean {self.avg_ret:.2f})")
        if matplotlib.get_backend().lower() not in _non_interactive_backends():
            plt.show()
        return fig


def _non_interactive_backends() -> Sequence[str]:
    try:
        from matplotlib.backends import BackendFilter, backend_registry  # pylint: disable=import-outside-toplevel

        return backend_registry.list_builtin(BackendFilter.NON_INTERACTIVE)
    except ImportError:
        return ["agg", "cairo", "pdf", "pgf", "ps", "svg", "template"]


# ---------------------------------------------------------------------------------------------
# DataLoader
# ---------------------------------------------------------------------------------------------
class DataLoader(object):
    """
    A custom dataloader to preprocessing observations (including images) and feed them to the network.

    An iterator of ``(observations, actions)`` minibatches over ``indices``. One pass over the
    indices is an epoch; at the start of every epoch the indices are shuffled when ``shuffle`` is
    set (with NumPy's global RNG, so ``set_global_seeds`` makes it reproducible). At the end of an
    epoch ``next()`` raises ``StopIteration``; with ``infinite_loop`` the following ``next()``
    starts a new epoch, otherwise the loader stays exhausted until ``iter()`` is called on it.
    When the observations are image paths the images are read for each minibatch only.

    Unlike SB2 everything runs in the calling process, so ``n_workers``, ``max_queue_len``,
    ``start_process``, ``backend`` and ``sequential`` are accepted for compatibility and have
    no effect (``start_process()`` is a no-op and ``process`` is always None).

    :param indices: ([int]) list of observations indices
    :param observations: (np.ndarray) observations or images path
    :param actions: (np.ndarray) actions
    :param batch_size: (int) Number of samples per minibatch
    :param n_workers: (int) unused (SB2: number of preprocessing workers)
    :param infinite_loop: (bool) whether to start a new epoch after the end of one
    :param max_queue_len: (int) unused (SB2: max number of minibatches preprocessed ahead)
    :param shuffle: (bool) Shuffle the minibatch after each epoch
    :param start_process: (bool) unused (SB2: start the preprocessing process)
    :param backend: (str) unused (SB2: joblib backend)
    :param sequential: (bool) unused (sbtf always preprocesses in-process)
    :param partial_minibatch: (bool) Allow partial minibatches (minibatches with a number of element
        lesser than the batch_size)
    """

    def __init__(self, indices, observations, actions, batch_size, n_workers=1,
                 infinite_loop=True, max_queue_len=1, shuffle=False,
                 start_process=True, backend='threading', sequential=False, partial_minibatch=True):
        super(DataLoader, self).__init__()
        batch_size = int(batch_size)
        if batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self.indices = np.asarray(indices, dtype=np.int64).reshape(-1)
        self.original_indices = self.indices.copy()
        self.observations = np.asarray(observations)
        self.actions = np.asarray(actions)
        if len(self.observations) != len(self.actions):
            raise ValueError(f"The number of actions ({len(self.actions)}) and observations "
                             f"({len(self.observations)}) differ")
        if len(self.indices) > 0 and (self.indices.min() < 0 or self.indices.max() >= len(self.observations)):
            raise IndexError(f"indices must be in [0, {len(self.observations)})")
        self.batch_size = batch_size
        self.n_workers = n_workers
        self.infinite_loop = infinite_loop
        self.max_queue_len = max_queue_len
        self.shuffle = shuffle
        self.backend = backend
        self.sequential = sequential
        self.partial_minibatch = partial_minibatch
        self.load_images = _is_path_array(self.observations)
        if self.load_images:
            self.observations = _as_path_array(self.observations)
        self.n_minibatches = len(self.indices) // batch_size
        if partial_minibatch and len(self.indices) % batch_size > 0:
            self.n_minibatches += 1
        self.process = None
        self.start_idx = 0
        self._exhausted = False

    def start_process(self):
        """Start preprocessing process (no-op: sbtf's DataLoader works in-process)."""

    @property
    def _minibatch_indices(self):
        """
        Current minibatch indices given the current pointer (start_idx) and the minibatch size.

        :return: (np.ndarray) 1D array of indices
        """
        return self.indices[self.start_idx:self.start_idx + self.batch_size]

    def sequential_next(self):
        """
        Sequential version of the pre-processing.
        """
        if self._exhausted:
            if not self.infinite_loop:
                raise StopIteration
            self._exhausted = False
            self.start_idx = 0
        if self.start_idx // self.batch_size >= self.n_minibatches:
            self._exhausted = True
            raise StopIteration
        if self.start_idx == 0 and self.shuffle:
            np.random.shuffle(self.indices)
        batch_indices = self._minibatch_indices
        obs = self.observations[batch_indices]
        if self.load_images:
            obs = np.stack([self._make_batch_element(image_path) for image_path in obs], axis=0)
        actions = self.actions[batch_indices]
        self.start_idx += self.batch_size
        return obs, actions

    @classmethod
    def _make_batch_element(cls, image_path):
        """
        Process one element.

        :param image_path: (str) path to an image
        :return: (np.ndarray) the image, shape (H, W, C)
        """
        return load_image(image_path)

    def __len__(self):
        return self.n_minibatches

    def __iter__(self):
        self.start_idx = 0
        self._exhausted = False
        return self

    def __next__(self):
        return self.sequential_next()

    def __del__(self):
        # No worker process to terminate.
        pass
