"""Hooks through which other packages add file formats to sbtf: readers of foreign model files, and exporters.

sbtf itself reads and writes only its own model format. Reading stable-baselines 2.x files and exporting to
SavedModel / TF.js / ONNX live in the ``sbtf_converters`` package, which sbtf never imports by name: the converters
*register* what they provide here, and :meth:`BaseRLModel.load <sbtf.common.base_class.BaseRLModel.load>` /
:meth:`BaseRLModel.export <sbtf.common.base_class.BaseRLModel.export>` look it up.

How plugins are found (once, on the first lookup that finds nothing registered):

1. the entry points of the group :data:`ENTRY_POINT_GROUP` (``sbtf.plugins``): each target is called if it is a
   function (``register()``), or just imported if it is a module; a package declares one in its pyproject::

       [project.entry-points."sbtf.plugins"]
       converters = "sbtf_converters.plugin:register_formats"

2. then, for the modules of :data:`FALLBACK_PLUGINS` that no entry point named, an import of that module and a
   call of its ``register_formats()`` -- so an installation whose metadata predates the entry point (an old
   editable install, a checkout on ``PYTHONPATH``) still finds the converters when they are importable.

Importing a plugin package also registers it (``import sbtf_converters`` fills these hooks), so code that uses the
converters directly never depends on discovery.
"""
from __future__ import annotations

import importlib
import inspect
import threading
import warnings
from typing import Any, Callable, Dict, List, Optional

from sbtf.common.file_errors import ModelFileError

__all__ = [
    "ENTRY_POINT_GROUP", "FALLBACK_PLUGINS", "CONVERTERS_INSTALL_HINT", "ModelReader", "Exporter",
    "MissingReaderError", "MissingExporterError", "register_model_reader", "register_exporter", "model_reader",
    "exporter", "registered_model_readers", "load_plugins",
]

#: the entry-point group that plugins declare
ENTRY_POINT_GROUP = "sbtf.plugins"
#: plugin modules tried by import when no entry point names them (each has a ``register_formats()``)
FALLBACK_PLUGINS = ("sbtf_converters.plugin",)
#: what to install for the formats sbtf_converters provides
CONVERTERS_INSTALL_HINT = ("the sbtf_converters package (part of the sbtf distribution: pip install sbtf; in a "
                           "source checkout, put its converters/ folder on PYTHONPATH)")

#: ``reader(cls, payload, env=None, custom_objects=None, allow_pickle=False, **kwargs) -> model``
ModelReader = Callable[..., Any]
#: ``exporter(model, path, format="savedmodel", vecnormalize=None, **kwargs) -> str`` (the path written)
Exporter = Callable[..., str]

_LOCK = threading.RLock()
_READERS: Dict[str, ModelReader] = {}
_EXPORTER: List[Exporter] = []  # at most one: the latest registered
_searched = [False]



class MissingReaderError(ModelFileError):
    """A model file of a kind that no installed plugin reads (the message says what to install)."""


class MissingExporterError(ImportError):
    """``export`` was called but no exporter is installed (the message says what to install)."""


def register_model_reader(kind: str, reader: ModelReader) -> None:
    """
    Make :meth:`BaseRLModel.load` read files of ``kind`` with ``reader`` (replacing a previous reader of that kind).

    :param kind: (str) what :func:`sbtf.common.save_util.inspect_model_bytes` calls the file (``"sb2-zip"``,
        ``"sb2-pkl"``)
    :param reader: (callable) ``reader(cls, payload, env=None, custom_objects=None, allow_pickle=False, **kwargs)``
        returns a model of class ``cls`` from the file's bytes
    """
    if not isinstance(kind, str) or not kind or kind == "sbtf":
        raise ValueError(f"kind must name a foreign file kind (not 'sbtf'), got {kind!r}")
    if not callable(reader):
        raise TypeError(f"reader must be callable, got {reader!r}")
    with _LOCK:
        _READERS[kind] = reader


def register_exporter(exporter_function: Exporter) -> None:
    """
    Make :meth:`BaseRLModel.export` call ``exporter_function`` (replacing the previous exporter). The exporter
    checks the format name itself and raises its own error for a format it does not write.

    :param exporter_function: (callable) ``exporter_function(model, path, format=..., vecnormalize=..., **kwargs)``
        writes the export and returns the path written
    """
    if not callable(exporter_function):
        raise TypeError(f"exporter must be callable, got {exporter_function!r}")
    with _LOCK:
        _EXPORTER[:] = [exporter_function]


def registered_model_readers() -> Dict[str, ModelReader]:
    """The registered readers by file kind (plugins are searched first)."""
    load_plugins()
    with _LOCK:
        return dict(_READERS)


def model_reader(kind: str, source: str = "This file") -> ModelReader:
    """
    The reader of a foreign model file.

    :param kind: (str) the file kind (see :func:`register_model_reader`)
    :param source: (str) the file, for the message
    :raises MissingReaderError: (a ModelFileError) when no plugin reads this kind; says what to install
    """
    with _LOCK:
        reader = _READERS.get(kind)
    if reader is None:
        load_plugins()
        with _LOCK:
            reader = _READERS.get(kind)
    if reader is None:
        what = f"a stable-baselines 2.x file ({kind})" if kind.startswith("sb2-") else \
            "a stable-baselines3 model file" if kind == "sb3-zip" else f"a {kind} model file"
        raise MissingReaderError(f"{source} is {what}; reading it needs {CONVERTERS_INSTALL_HINT}, which is not "
                                 "installed (or it registered no reader for this kind of file).")
    return reader


def exporter() -> Exporter:
    """
    The registered exporter.

    :raises MissingExporterError: (an ImportError) when none is installed; says what to install
    """
    with _LOCK:
        found = list(_EXPORTER)
    if not found:
        load_plugins()
        with _LOCK:
            found = list(_EXPORTER)
    if not found:
        raise MissingExporterError(f"exporting a model needs {CONVERTERS_INSTALL_HINT}, which is not installed; the "
                                   "tfjs and onnx formats also need pip install 'sbtf[export]'.")
    return found[0]


def _entry_points() -> list:
    try:
        from importlib.metadata import entry_points  # pylint: disable=import-outside-toplevel
        return list(entry_points(group=ENTRY_POINT_GROUP))
    except Exception:  # pylint: disable=broad-except  # broken metadata must not break loading models
        return []


def _call_target(target: Any, origin: str) -> None:
    if inspect.ismodule(target):
        return
    if not callable(target):
        raise TypeError(f"the plugin {origin} is neither a module nor a function")
    target()


def load_plugins(force: bool = False) -> None:
    """
    Find and register the installed plugins (entry points of :data:`ENTRY_POINT_GROUP`, then
    :data:`FALLBACK_PLUGINS`). Runs once per process unless ``force``. A plugin that fails is skipped with a
    warning: a broken optional package must not stop sbtf from loading its own files.
    """
    with _LOCK:
        if _searched[0] and not force:
            return
        _searched[0] = True
    named_modules = set()
    for entry_point in _entry_points():
        named_modules.add(entry_point.value.partition(":")[0].strip())
        try:
            _call_target(entry_point.load(), entry_point.value)
        except Exception as exc:  # pylint: disable=broad-except
            warnings.warn(f"sbtf plugin {entry_point.name} ({entry_point.value}) could not be loaded: {exc}")
    for module_name in FALLBACK_PLUGINS:
        if module_name in named_modules:
            continue
        module = _import_optional(module_name)
        if module is None:
            continue
        register = getattr(module, "register_formats", None)
        if callable(register):
            try:
                register()
            except Exception as exc:  # pylint: disable=broad-except
                warnings.warn(f"sbtf plugin {module_name} could not be registered: {exc}")


def _import_optional(module_name: str) -> Optional[Any]:
    """Import a plugin module; None when it (or its package) is not installed; a warning when it is broken."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            return None
        warnings.warn(f"sbtf plugin {module_name} could not be imported: {exc}")
    except Exception as exc:  # pylint: disable=broad-except
        warnings.warn(f"sbtf plugin {module_name} could not be imported: {exc}")
    return None
