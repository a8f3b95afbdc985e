"""The stable-baselines 2.x logger (itself derived from OpenAI baselines).

Key/value diagnostics are collected with :func:`logkv` / :func:`logkv_mean` and written by
:func:`dumpkvs` to every configured output format (``stdout``, ``log``, ``json``, ``csv``,
``tensorboard``).  Free text goes through :func:`log` and the level helpers.

Differences from stable-baselines 2.x, all additive:

* ``record``, ``record_mean`` and ``dump`` are stable-baselines3 style aliases of
  ``logkv``, ``logkv_mean`` and ``dumpkvs``.
* TensorBoard output is written with ``tf.summary.create_file_writer`` (TensorFlow is only
  imported when that format is used); :func:`read_tb` reads both the TF2 tensor-based
  scalars and the TF1 ``simple_value`` scalars written by stable-baselines 2.x.
* The MPI rank used for per-rank file suffixes is read from an already imported
  ``mpi4py.MPI`` or from the launcher's environment variables, so that configuring the
  logger never initialises MPI by itself.
"""
from __future__ import annotations

import datetime
import json
import os
import sys
import tempfile
import time
import warnings
from collections import defaultdict
from functools import wraps
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, TextIO, Tuple, Union

import numpy as np

DEBUG = 10
INFO = 20
WARN = 30
ERROR = 40
DISABLED = 50


class KVWriter(object):
    """
    Key Value writer
    """

    def writekvs(self, kvs: Dict[str, Any]) -> None:
        """
        write a dictionary to file

        :param kvs: (dict)
        """
        raise NotImplementedError

    def close(self) -> None:
        """
        closes the file
        """


class SeqWriter(object):
    """
    sequence writer
    """

    def writeseq(self, seq: Iterable[str]) -> None:
        """
        write an array to file

        :param seq: (list)
        """
        raise NotImplementedError


class HumanOutputFormat(KVWriter, SeqWriter):
    def __init__(self, filename_or_file: Union[str, TextIO]):
        """
        log to a file, in a human readable format

        :param filename_or_file: (str or File) the file to write the log to
        """
        if isinstance(filename_or_file, (str, os.PathLike)):
            self.file = open(filename_or_file, "wt")
            self.own_file = True
        else:
            if not hasattr(filename_or_file, "write"):
                raise TypeError("Expected file or str, got {}".format(filename_or_file))
            self.file = filename_or_file
            self.own_file = False
        # The 'stdout' format follows later redirections of sys.stdout (notebooks, redirect_stdout, test capture)
        self._follows_stdout = filename_or_file is sys.stdout or filename_or_file is sys.__stdout__

    def _out(self) -> TextIO:
        return sys.stdout if self._follows_stdout and sys.stdout is not None else self.file

    def writekvs(self, kvs: Dict[str, Any]) -> None:
        # Create strings for printing
        key2str = {}
        for (key, val) in sorted(kvs.items(), key=lambda item: str(item[0])):
            if isinstance(val, (float, np.floating)):
                valstr = "%-8.3g" % (val,)
            else:
                valstr = str(val)
            key2str[self._truncate(str(key))] = self._truncate(valstr)

        if len(key2str) == 0:
            warnings.warn("Tried to write empty key-value dict")
            return
        keywidth = max(map(len, key2str.keys()))
        valwidth = max(map(len, key2str.values()))

        dashes = "-" * (keywidth + valwidth + 7)
        lines = [dashes]
        for (key, val) in sorted(key2str.items()):
            lines.append("| %s%s | %s%s |" % (key, " " * (keywidth - len(key)), val, " " * (valwidth - len(val))))
        lines.append(dashes)
        out = self._out()
        out.write("\n".join(lines) + "\n")
        out.flush()

    @classmethod
    def _truncate(cls, string: str) -> str:
        return string[:20] + "..." if len(string) > 23 else string

    def writeseq(self, seq: Iterable[str]) -> None:
        seq = list(seq)
        out = self._out()
        for (i, elem) in enumerate(seq):
            out.write(elem)
            if i < len(seq) - 1:  # add space unless this is the last one
                out.write(" ")
        out.write("\n")
        out.flush()

    def close(self) -> None:
        """
        closes the file
        """
        if self.own_file:
            self.file.close()


def _json_value(value: Any) -> Any:
    if hasattr(value, "dtype"):
        value = np.asarray(value)
        if value.shape == () or value.size == 1:
            # a dimensionless numpy array or of length 1 is written as a float
            return float(value.reshape(()))
        return value.tolist()
    return value


class JSONOutputFormat(KVWriter):
    def __init__(self, filename: str):
        """
        log to a file, in the JSON format

        :param filename: (str) the file to write the log to
        """
        self.file = open(filename, "wt")

    def writekvs(self, kvs: Dict[str, Any]) -> None:
        out = {key: _json_value(value) for key, value in sorted(kvs.items(), key=lambda item: str(item[0]))}
        self.file.write(json.dumps(out, default=str) + "\n")
        self.file.flush()

    def close(self) -> None:
        """
        closes the file
        """
        self.file.close()


class CSVOutputFormat(KVWriter):
    def __init__(self, filename: str):
        """
        log to a file, in a CSV format

        :param filename: (str) the file to write the log to
        """
        self.file = open(filename, "w+t")
        self.keys: List[str] = []
        self.sep = ","

    def writekvs(self, kvs: Dict[str, Any]) -> None:
        # Add our current row to the history; a new key rewrites the header and pads old rows
        extra_keys = sorted((k for k in kvs.keys() if k not in self.keys), key=str)
        if extra_keys:
            self.keys.extend(extra_keys)
            self.file.seek(0)
            lines = self.file.readlines()
            self.file.seek(0)
            self.file.truncate()
            self.file.write(self.sep.join(str(k) for k in self.keys) + "\n")
            for line in lines[1:]:
                self.file.write(line.rstrip("\n"))
                self.file.write(self.sep * len(extra_keys))
                self.file.write("\n")
        cells = []
        for key in self.keys:
            value = kvs.get(key)
            cells.append("" if value is None else str(value))
        self.file.write(self.sep.join(cells) + "\n")
        self.file.flush()

    def close(self) -> None:
        """
        closes the file
        """
        self.file.close()


def valid_float_value(value: Any) -> bool:
    """
    Returns True if the value can be successfully cast into a float

    :param value: (Any) the value to check
    :return: (bool)
    """
    try:
        float(value)
        return True
    except (TypeError, ValueError):
        return False


def summary_val(key: str, value: float) -> Any:
    """
    :param key: (str)
    :param value: (float)
    :return: a TF1 ``Summary.Value`` proto holding ``value`` as ``simple_value``
    """
    import tensorflow as tf

    return tf.compat.v1.Summary.Value(tag=key, simple_value=float(value))


class TensorBoardOutputFormat(KVWriter):
    def __init__(self, folder: str):
        """
        Dumps key/value pairs into TensorBoard's numeric format (one event file in ``folder``).

        Each call of :meth:`writekvs` is one step; steps start at 1 as in stable-baselines.

        :param folder: (str) the folder to write the log to
        """
        import tensorflow as tf

        os.makedirs(folder, exist_ok=True)
        self.dir = folder
        self.step = 1
        self._tf = tf
        self.writer = tf.summary.create_file_writer(os.path.abspath(folder))

    def writekvs(self, kvs: Dict[str, Any]) -> None:
        tf = self._tf
        with self.writer.as_default():
            for key, value in kvs.items():
                if value is None or not valid_float_value(value):
                    continue
                if hasattr(value, "dtype") and np.asarray(value).size != 1:
                    continue
                tf.summary.scalar(str(key), float(np.asarray(value).reshape(())), step=self.step)
        self.writer.flush()
        self.step += 1

    def close(self) -> None:
        """
        closes the file
        """
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def make_output_format(_format: str, ev_dir: str, log_suffix: str = "") -> KVWriter:
    """
    return a logger for the requested format

    :param _format: (str) the requested format to log to ('stdout', 'log', 'json', 'csv' or 'tensorboard')
    :param ev_dir: (str) the logging directory
    :param log_suffix: (str) the suffix for the log file
    :return: (KVWriter) the logger
    """
    os.makedirs(ev_dir, exist_ok=True)
    if _format == "stdout":
        return HumanOutputFormat(sys.stdout)
    elif _format == "log":
        return HumanOutputFormat(os.path.join(ev_dir, "log%s.txt" % log_suffix))
    elif _format == "json":
        return JSONOutputFormat(os.path.join(ev_dir, "progress%s.json" % log_suffix))
    elif _format == "csv":
        return CSVOutputFormat(os.path.join(ev_dir, "progress%s.csv" % log_suffix))
    elif _format == "tensorboard":
        return TensorBoardOutputFormat(os.path.join(ev_dir, "tb%s" % log_suffix))
    else:
        raise ValueError("Unknown format specified: %s" % (_format,))


# ================================================================
# API
# ================================================================


def logkv(key: Any, val: Any) -> None:
    """
    Log a value of some diagnostic
    Call this once for each diagnostic quantity, each iteration
    If called many times, last value will be used.

    :param key: (Any) save to log this key
    :param val: (Any) save to log this value
    """
    Logger.CURRENT.logkv(key, val)


def logkv_mean(key: Any, val: Any) -> None:
    """
    The same as logkv(), but if called many times, values averaged.

    :param key: (Any) save to log this key
    :param val: (Number) save to log this value
    """
    Logger.CURRENT.logkv_mean(key, val)


def logkvs(key_values: Dict[Any, Any]) -> None:
    """
    Log a dictionary of key-value pairs

    :param key_values: (dict) the list of keys and values to save to log
    """
    for key, value in key_values.items():
        logkv(key, value)


def dumpkvs() -> None:
    """
    Write all of the diagnostics from the current iteration
    """
    Logger.CURRENT.dumpkvs()


def getkvs() -> Dict[Any, Any]:
    """
    get the key values logs

    :return: (dict) the logged values
    """
    return Logger.CURRENT.name2val


def log(*args: Any, level: int = INFO) -> None:
    """
    Write the sequence of args, with no separators,
    to the console and output files (if you've configured an output file).

    level: int. (see logger.py docs) If the global logger level is higher than
                the level argument here, don't print to stdout.

    :param args: (list) log the arguments
    :param level: (int) the logging level (can be DEBUG=10, INFO=20, WARN=30, ERROR=40, DISABLED=50)
    """
    Logger.CURRENT.log(*args, level=level)


def debug(*args: Any) -> None:
    """
    ``log(*args)`` at the DEBUG level (see ``log``).

    :param args: (list) log the arguments
    """
    log(*args, level=DEBUG)


def info(*args: Any) -> None:
    """
    ``log(*args)`` at the INFO level (see ``log``).

    :param args: (list) log the arguments
    """
    log(*args, level=INFO)


def warn(*args: Any) -> None:
    """
    ``log(*args)`` at the WARN level (see ``log``).

    :param args: (list) log the arguments
    """
    log(*args, level=WARN)


def error(*args: Any) -> None:
    """
    ``log(*args)`` at the ERROR level (see ``log``).

    :param args: (list) log the arguments
    """
    log(*args, level=ERROR)


def set_level(level: int) -> None:
    """
    Set logging threshold on current logger.

    :param level: (int) the logging level (can be DEBUG=10, INFO=20, WARN=30, ERROR=40, DISABLED=50)
    """
    Logger.CURRENT.set_level(level)


def get_level() -> int:
    """
    Get logging threshold on current logger.
    :return: (int) the logging level (can be DEBUG=10, INFO=20, WARN=30, ERROR=40, DISABLED=50)
    """
    return Logger.CURRENT.level


def get_dir() -> Optional[str]:
    """
    Get directory that log files are being written to.
    will be None if there is no output directory (i.e., if you didn't call start)

    :return: (str) the logging directory
    """
    return Logger.CURRENT.get_dir()


record_tabular = logkv
dump_tabular = dumpkvs
# stable-baselines3 names
record = logkv
record_mean = logkv_mean
dump = dumpkvs


class ProfileKV:
    def __init__(self, name: str):
        """
        Usage:
        with logger.ProfileKV("interesting_scope"):
            code

        :param name: (str) the profiling name (logged as ``wait_<name>``)
        """
        self.name = "wait_" + name
        self.t1 = 0.0

    def __enter__(self) -> None:
        self.t1 = time.time()

    def __exit__(self, _type: Any, value: Any, traceback: Any) -> None:
        Logger.CURRENT.name2val[self.name] += time.time() - self.t1


def profile(name: str) -> Callable[[Callable], Callable]:
    """
    Usage:
    @profile("my_func")
    def my_func(): code

    :param name: (str) the profiling name
    :return: (function) the wrapped function
    """

    def decorator_with_name(func: Callable) -> Callable:
        @wraps(func)
        def func_wrapper(*args: Any, **kwargs: Any) -> Any:
            with ProfileKV(name):
                return func(*args, **kwargs)

        return func_wrapper

    return decorator_with_name


# ================================================================
# Backend
# ================================================================


class Logger(object):
    # A logger with no output files. (See right below class definition)
    #  So that you can still log to the terminal without setting up any output files
    DEFAULT: Optional["Logger"] = None
    CURRENT: "Logger" = None  # type: ignore[assignment]  # Current logger being used by the free functions above

    def __init__(self, folder: Optional[str], output_formats: List[KVWriter]):
        """
        the logger class

        :param folder: (str) the logging location
        :param output_formats: ([KVWriter]) the list of output formats
        """
        self.name2val: Dict[Any, Any] = defaultdict(float)  # values this iteration
        self.name2cnt: Dict[Any, int] = defaultdict(int)
        self._excluded: Dict[Any, Tuple[str, ...]] = {}  # record(exclude=...): formats that skip a key
        self.level = INFO
        self.dir = folder
        self.output_formats = output_formats

    # Logging API, forwarded
    # ----------------------------------------
    def logkv(self, key: Any, val: Any) -> None:
        """
        Log a value of some diagnostic
        Call this once for each diagnostic quantity, each iteration
        If called many times, last value will be used.

        :param key: (Any) save to log this key
        :param val: (Any) save to log this value
        """
        self.name2val[key] = val

    def logkv_mean(self, key: Any, val: Any) -> None:
        """
        The same as logkv(), but if called many times, values averaged.

        :param key: (Any) save to log this key
        :param val: (Number) save to log this value
        """
        if val is None:
            self.name2val[key] = None
            return
        oldval, cnt = self.name2val[key], self.name2cnt[key]
        if oldval is None:
            oldval, cnt = 0.0, 0
        self.name2val[key] = oldval * cnt / (cnt + 1) + val / (cnt + 1)
        self.name2cnt[key] = cnt + 1

    def record(self, key: Any, value: Any, exclude: Optional[Union[str, Tuple[str, ...]]] = None) -> None:
        """
        stable-baselines3's name of :meth:`logkv`.

        :param key: (Any) the key
        :param value: (Any) the value
        :param exclude: (str or tuple) output formats that should not write it (``"stdout"``, ``"log"``, ``"json"``,
            ``"csv"``, ``"tensorboard"``)
        """
        self.logkv(key, value)
        self._excluded[key] = _as_tuple(exclude)

    def record_mean(self, key: Any, value: Any, exclude: Optional[Union[str, Tuple[str, ...]]] = None) -> None:
        """stable-baselines3's name of :meth:`logkv_mean` (``exclude``: see :meth:`record`)."""
        self.logkv_mean(key, value)
        self._excluded[key] = _as_tuple(exclude)

    @property
    def name_to_value(self) -> Dict[Any, Any]:
        """stable-baselines3's name of the values recorded since the last dump."""
        return self.name2val

    @property
    def name_to_count(self) -> Dict[Any, int]:
        """stable-baselines3's name of the counts of the averaged values."""
        return self.name2cnt

    def dumpkvs(self) -> None:
        """
        Write all of the diagnostics from the current iteration
        """
        if self.level == DISABLED:
            return
        for fmt in self.output_formats:
            if isinstance(fmt, KVWriter):
                names = next((n for cls, n in _FORMAT_NAMES.items() if isinstance(fmt, cls)), ())
                fmt.writekvs({key: value for key, value in self.name2val.items()
                              if not set(names) & set(self._excluded.get(key, ()))})
        self.name2val.clear()
        self.name2cnt.clear()
        self._excluded.clear()

    def dump(self, step: int = 0) -> None:
        """stable-baselines3's name of :meth:`dumpkvs` (``step``: accepted; TensorBoard counts its own steps)."""
        self.dumpkvs()

    def log(self, *args: Any, level: int = INFO) -> None:
        """
        Write the sequence of args, with no separators,
        to the console and output files (if you've configured an output file).

        level: int. (see logger.py docs) If the global logger level is higher than
                    the level argument here, don't print to stdout.

        :param args: (list) log the arguments
        :param level: (int) the logging level (can be DEBUG=10, INFO=20, WARN=30, ERROR=40, DISABLED=50)
        """
        if self.level <= level:
            self._do_log(args)

    # Configuration
    # ----------------------------------------
    def set_level(self, level: int) -> None:
        """
        Set logging threshold on current logger.

        :param level: (int) the logging level (can be DEBUG=10, INFO=20, WARN=30, ERROR=40, DISABLED=50)
        """
        self.level = level

    def get_dir(self) -> Optional[str]:
        """
        Get directory that log files are being written to.
        will be None if there is no output directory (i.e., if you didn't call start)

        :return: (str) the logging directory
        """
        return self.dir

    def close(self) -> None:
        """
        closes the file
        """
        for fmt in self.output_formats:
            fmt.close()

    # Misc
    # ----------------------------------------
    def _do_log(self, args: Sequence[Any]) -> None:
        """
        log to the requested format outputs

        :param args: (list) the arguments to log
        """
        for fmt in self.output_formats:
            if isinstance(fmt, SeqWriter):
                fmt.writeseq(map(str, args))


def _as_tuple(exclude: Optional[Union[str, Tuple[str, ...]]]) -> Tuple[str, ...]:
    if exclude is None:
        return ()
    return (exclude,) if isinstance(exclude, str) else tuple(exclude)


#: the names ``record(exclude=...)`` gives each output format (stdout and the log file are both ``HumanOutputFormat``:
#: "stdout" and "log" exclude both, as stable-baselines3)
_FORMAT_NAMES: Dict[type, Tuple[str, ...]] = {HumanOutputFormat: ("stdout", "log"), JSONOutputFormat: ("json",),
                                              CSVOutputFormat: ("csv",), TensorBoardOutputFormat: ("tensorboard",)}


Logger.DEFAULT = Logger.CURRENT = Logger(folder=None, output_formats=[HumanOutputFormat(sys.stdout)])


def _mpi_rank() -> int:
    """The MPI rank of this process without initialising MPI (0 when not under MPI)."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None:
        try:
            return int(mpi.COMM_WORLD.Get_rank())
        except Exception:  # pragma: no cover - a broken MPI install
            pass
    for var in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "MV2_COMM_WORLD_RANK"):
        value = os.environ.get(var)
        if value is not None and value.strip().isdigit():
            return int(value)
    return 0


def configure(folder: Optional[str] = None, format_strs: Optional[Sequence[str]] = None) -> None:
    """
    configure the current logger

    :param folder: (str) the save location (if None, $OPENAI_LOGDIR, if still None, tempdir/openai-[date & time])
    :param format_strs: (list) the output logging format
        (if None, $OPENAI_LOG_FORMAT, if still None, ['stdout', 'log', 'csv'];
        on MPI ranks > 0 $OPENAI_LOG_FORMAT_MPI, if still None, ['log'])
    """
    if folder is None:
        folder = os.getenv("OPENAI_LOGDIR")
    if folder is None:
        folder = os.path.join(tempfile.gettempdir(), datetime.datetime.now().strftime("openai-%Y-%m-%d-%H-%M-%S-%f"))
    folder = os.fspath(folder)
    if not isinstance(folder, str):
        raise TypeError("the log folder must be a str, got {!r}".format(folder))
    os.makedirs(folder, exist_ok=True)

    rank = _mpi_rank()
    log_suffix = "-rank%03i" % rank if rank > 0 else ""

    if format_strs is None:
        if rank == 0:
            format_strs = os.getenv("OPENAI_LOG_FORMAT", "stdout,log,csv").split(",")
        else:
            format_strs = os.getenv("OPENAI_LOG_FORMAT_MPI", "log").split(",")
    format_strs = [f.strip() for f in format_strs if f and f.strip()]
    output_formats = [make_output_format(f, folder, log_suffix) for f in format_strs]

    Logger.CURRENT = Logger(folder=folder, output_formats=output_formats)
    log("Logging to %s" % folder)


def reset() -> None:
    """
    reset the current logger
    """
    if Logger.CURRENT is not Logger.DEFAULT:
        Logger.CURRENT.close()
        Logger.CURRENT = Logger.DEFAULT  # type: ignore[assignment]
        log("Reset logger")


class ScopedConfigure(object):
    def __init__(self, folder: Optional[str] = None, format_strs: Optional[Sequence[str]] = None):
        """
        Class for using context manager while logging

        usage:
        with ScopedConfigure(folder=None, format_strs=None):
            {code}

        :param folder: (str) the logging folder
        :param format_strs: ([str]) the list of output logging format
        """
        self.dir = folder
        self.format_strs = format_strs
        self.prevlogger: Optional[Logger] = None

    def __enter__(self) -> None:
        self.prevlogger = Logger.CURRENT
        configure(folder=self.dir, format_strs=self.format_strs)

    def __exit__(self, *args: Any) -> None:
        Logger.CURRENT.close()
        Logger.CURRENT = self.prevlogger  # type: ignore[assignment]


def _demo(folder: Optional[str] = None) -> str:
    """
    Exercise the logger (stable-baselines 2's ``logger._demo``, which its tests call): levels, key/values and their
    means, the stdout / log / json / csv outputs, :class:`ScopedConfigure`, :func:`reset`. The logger that was
    configured before is restored afterwards.

    :param folder: (str) where to write the demo's files (default: a new temporary folder)
    :return: (str) the folder holding ``progress.json`` and ``progress.csv`` (``a`` and ``b`` over three dumps)
    """
    previous, previous_level = Logger.CURRENT, get_level()
    folder = folder if folder is not None else tempfile.mkdtemp(prefix="sbtf-logger-demo-")
    try:
        info("hi")
        debug("shouldn't appear")
        set_level(DEBUG)
        debug("should appear")
        configure(folder=folder, format_strs=["stdout", "log", "json", "csv"])
        logkv("a", 3)
        logkv("b", 2.5)
        dumpkvs()
        logkv("b", -2.5)
        logkv("a", 5.5)
        dumpkvs()
        info("^^^ should see a = 5.5")
        logkv_mean("b", -22.5)
        logkv_mean("b", -44.4)
        logkv("a", 5.5)
        dumpkvs()
        info("^^^ should see b = -33.45")
        with ScopedConfigure(os.path.join(folder, "scoped"), ["json"]):
            logkv("b", -2.5)
            dumpkvs()
        logkv("a", "longasslongasslongasslongasslongasslongassvalue")
        logkvs({"test": 1})
        warn("hey")
        error("oh")
        reset()
    finally:
        if Logger.CURRENT is not previous and Logger.CURRENT is not Logger.DEFAULT:
            Logger.CURRENT.close()
        Logger.CURRENT = previous
        set_level(previous_level)
    return folder


# ================================================================
# Readers
# ================================================================


def read_json(fname: str) -> Any:
    """
    read a json file using pandas

    :param fname: (str) the file path to read
    :return: (pandas DataFrame) the data in the json
    """
    import pandas

    data = []
    with open(fname, "rt") as file_handler:
        for line in file_handler:
            if line.strip():
                data.append(json.loads(line))
    return pandas.DataFrame(data)


def read_csv(fname: str) -> Any:
    """
    read a csv file using pandas

    :param fname: (str) the file path to read
    :return: (pandas DataFrame) the data in the csv
    """
    import pandas

    return pandas.read_csv(fname, index_col=None, comment="#")


def read_tb(path: str) -> Any:
    """
    read a tensorboard output

    :param path: (str) a tensorboard file OR a directory, where we will find all TB files of the form events.*
    :return: (pandas DataFrame) the tensorboard data, one column per tag, row ``i`` is step ``i + 1``
    """
    import glob

    import pandas
    import tensorflow as tf

    if os.path.isdir(path):
        fnames = sorted(glob.glob(os.path.join(path, "events.*")))
    elif os.path.basename(path).startswith("events."):
        fnames = [path]
    else:
        raise NotImplementedError("Expected tensorboard file or directory containing them. Got %s" % path)
    tag2pairs: Dict[str, List] = defaultdict(list)
    maxstep = 0
    for fname in fnames:
        for event in tf.compat.v1.train.summary_iterator(fname):
            if event.step > 0:
                for value in event.summary.value:
                    kind = value.WhichOneof("value")
                    if kind == "simple_value":
                        scalar = float(value.simple_value)
                    elif kind == "tensor":
                        array = tf.make_ndarray(value.tensor)
                        if array.size != 1:
                            continue
                        scalar = float(array.reshape(()))
                    else:
                        continue
                    tag2pairs[value.tag].append((event.step, scalar))
                maxstep = max(event.step, maxstep)
    data = np.empty((maxstep, len(tag2pairs)))
    data[:] = np.nan
    tags = sorted(tag2pairs.keys())
    for (colidx, tag) in enumerate(tags):
        for (step, value) in tag2pairs[tag]:
            data[step - 1, colidx] = value
    return pandas.DataFrame(data, columns=tags)
