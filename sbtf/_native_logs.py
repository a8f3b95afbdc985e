"""A quiet TensorFlow start-up: TensorFlow's C++ libraries print a dozen lines on import on every machine (plugin
registration, CUDA probing on machines without a GPU, XLA service banners) straight to file descriptor 2, where
Python cannot filter them.

:func:`install` (called by ``import sbtf``) sets ``TF_CPP_MIN_LOG_LEVEL=3`` unless the user set it, and puts an
import hook in front of the first ``import tensorflow``: while TensorFlow loads, probes its devices and starts its
XLA CPU client, file descriptor 2 goes to a temporary file; afterwards the lines that are known start-up noise are
dropped and anything else (a real error, a Python warning) is written to stderr as it was. Set ``SBTF_TF_LOGS=1``
to see everything TensorFlow prints.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import re
import sys
import tempfile
from typing import Any, Optional

__all__ = ["install", "NOISE"]

#: start-up lines of TensorFlow / XLA that say nothing to a user
NOISE = re.compile("|".join([
    r"Unable to register cu(FFT|DNN|BLAS) factory",
    r"computation placer already registered",
    r"All log messages before absl::InitializeLog\(\) is called are written to STDERR",
    r"failed call to cuInit",
    r"could not find cuda drivers",
    r"Could not find cuda drivers",
    r"TF-TRT Warning",
    r"This TensorFlow binary is optimized to use available CPU instructions",
    r"To enable the following instructions",
    r"oneDNN custom operations are on",
    r"XLA service 0x[0-9a-f]+ initialized for platform",
    r"StreamExecutor device \(\d+\)",
    r"Compiled cluster using XLA",
    r"cuda_executor\.cc",
    r"Unable to register cu\w+ factory",
]))


def _enabled() -> bool:
    return os.environ.get("SBTF_TF_LOGS", "").strip().lower() not in ("1", "true", "yes", "on")


class _FdSilencer:
    """Send file descriptor 2 to a temporary file; on exit, replay what was not start-up noise."""

    def __enter__(self) -> "_FdSilencer":
        try:
            sys.stderr.flush()
        except (AttributeError, ValueError, OSError):
            pass
        self.saved = os.dup(2)
        self.capture = tempfile.TemporaryFile()
        os.dup2(self.capture.fileno(), 2)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        try:
            sys.stderr.flush()
        except (AttributeError, ValueError, OSError):
            pass
        os.dup2(self.saved, 2)
        os.close(self.saved)
        self.capture.seek(0)
        text = self.capture.read().decode("utf-8", "replace")
        self.capture.close()
        kept = [line for line in text.splitlines(keepends=True) if line.strip() and not NOISE.search(line)]
        if kept:
            try:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()
            except (AttributeError, ValueError, OSError):
                pass


class _QuietLoader(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader):
        self.loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Optional[Any]:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        with _FdSilencer():
            self.loader.exec_module(module)
            _warm_up(module)


def _warm_up(tf: Any) -> None:
    """Probe the devices and start XLA's CPU client now (0.1 s), so that their banners fall in the quiet window."""
    try:
        tf.config.list_physical_devices()
        tf.function(lambda x: x + 1.0, jit_compile=True)(tf.constant(1.0))
    except Exception:  # noqa: BLE001 - a warm-up failure must not break the import; the real use will report it
        pass


class _TensorFlowImportHook(importlib.abc.MetaPathFinder):
    """Wraps the loader of the first ``import tensorflow`` (then removes itself)."""

    def find_spec(self, fullname: str, path: Any = None,
                  target: Any = None) -> Optional[importlib.machinery.ModuleSpec]:
        if fullname != "tensorflow":
            return None
        _remove_hook()
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _QuietLoader(spec.loader)
        return spec


_HOOK = _TensorFlowImportHook()


def _remove_hook() -> None:
    try:
        sys.meta_path.remove(_HOOK)
    except ValueError:
        pass


def _quiet_lazy_start(tf: Any) -> None:
    """
    TensorFlow was imported before sbtf: its import-time lines are printed already, and its C++ log level was fixed
    by the first of them (``TF_CPP_MIN_LOG_LEVEL`` is read once), but the device probing (``failed call to
    cuInit`` on machines without a GPU) and XLA's CPU client banners still come on first use, in the middle of the
    user's output. Start both now, with file descriptor 2 filtered as for a quiet import.
    """
    if getattr(tf, "_sbtf_quiet_start_done", False) or not hasattr(tf, "config"):
        return  # a second install(), or TensorFlow still being imported
    with _FdSilencer():
        _warm_up(tf)
    try:
        tf._sbtf_quiet_start_done = True
    except (AttributeError, TypeError):
        pass


def install() -> None:
    """Quiet TensorFlow's native start-up logs (no-op with ``SBTF_TF_LOGS=1``); when TensorFlow is already imported,
    quiet what it would still print on first use (:func:`_quiet_lazy_start`)."""
    if not _enabled():
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if "tensorflow" in sys.modules:
        _quiet_lazy_start(sys.modules["tensorflow"])
        return
    if _HOOK in sys.meta_path:
        return
    sys.meta_path.insert(0, _HOOK)
