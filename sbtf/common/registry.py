"""The explicit registry of classes a model file may name.

A model file stores classes by name (``"sbtf.common.policies:MlpPolicy"``). When it is opened, a name is
looked up *only* here — never imported, never resolved against ``sys.modules`` — so a file cannot reach an
arbitrary callable such as ``os:system``. What is registered:

* every policy class (subclasses of ``sbtf.common.policies.BasePolicy`` register themselves when they are
  defined, so a user's ``class CustomPolicy(FeedForwardPolicy)`` defined before ``load`` is found, as in
  stable-baselines), every algorithm class (subclasses of ``BaseRLModel``), and sbtf's enums;
* whatever the caller passes to :func:`register_class` (e.g. a policy defined outside sbtf's hierarchy);
* replay buffer classes (kind ``"replay_buffer"``), stored by their class name (``replay_buffer_class``):
  ``sbtf.common.buffers`` and ``sbtf.her.her_replay_buffer`` register theirs;
* feature extractors (kind ``"extractor"``): subclasses of ``sbtf.common.extractors.BaseFeaturesExtractor`` register
  themselves, and a policy registers any other Keras layer class it is given as extractor. A plain Keras layer class
  of a user's module is also found when that module is *already imported* (``sys.modules``; never imported from a
  name read from a file), but never a class of Keras, TensorFlow or sbtf themselves.

Everything else must come from the caller through ``custom_objects``, or from ``allow_pickle=True`` for
files the caller trusts.
"""
from __future__ import annotations

import importlib
import sys
import threading
from typing import Dict, Optional

from sbtf.algorithms import all_algorithms

__all__ = ["class_key", "register_class", "lookup_class", "registered_names", "registered_classes", "KINDS"]

KINDS = ("policy", "algorithm", "enum", "extractor", "replay_buffer", "optimizer")

_LOCK = threading.Lock()
_CLASSES: Dict[str, Dict[str, type]] = {kind: {} for kind in KINDS}  # explicit names
_AUTO: Dict[str, list] = {kind: [] for kind in KINDS}  # named by their current module:qualname
# modules whose import registers sbtf's own classes (imported on the first lookup): the policies, and every
# algorithm of the algorithm registry
_BUILTIN_MODULES = (
    "sbtf.common.policies", "sbtf.common.extractors", "sbtf.deepq.policies", "sbtf.sac.policies",
    "sbtf.td3.policies", "sbtf.ddpg.policies", "sbtf.her.replay_buffer",
    "sbtf.common.buffers", "sbtf.her.her_replay_buffer",
) + tuple(algo.module for algo in all_algorithms())
_builtins_loaded = [False]


def class_key(cls: type) -> str:
    """The name a class is stored under in a model file: ``module:qualname``."""
    return f"{cls.__module__}:{cls.__qualname__}"


def register_class(cls: type, kind: str = "policy", name: Optional[str] = None) -> type:
    """
    Allow model files to name ``cls`` (returns ``cls``, so it can be used as a decorator).

    :param cls: (type) the class
    :param kind: (str) one of ``KINDS``
    :param name: (str) the stored name (default ``module:qualname``)
    """
    if kind not in _CLASSES:
        raise ValueError(f"unknown registry kind {kind!r}; expected one of {KINDS}")
    with _LOCK:
        if name is None:
            # the key is computed at lookup time: classes made by factories get their module/qualname set after
            # creation (after __init_subclass__ ran)
            _AUTO[kind].append(cls)
        else:
            _CLASSES[kind][name] = cls
    return cls


def _load_builtins() -> None:
    if _builtins_loaded[0]:
        return
    _builtins_loaded[0] = True
    for module in _BUILTIN_MODULES:
        try:
            importlib.import_module(module)
        except ImportError:  # pragma: no cover - an optional part missing (e.g. MPI-only modules)
            continue


def lookup_class(name: str, kinds: tuple = KINDS) -> Optional[type]:
    """The registered class stored under ``name`` (of one of ``kinds``), or None."""
    _load_builtins()
    if not isinstance(name, str):
        return None
    with _LOCK:
        for kind in kinds:
            found = _CLASSES.get(kind, {}).get(name)
            if found is not None:
                return found
            for cls in reversed(_AUTO.get(kind, [])):  # the latest definition of a name wins
                if class_key(cls) == name:
                    return cls
    if "extractor" in kinds:
        return _imported_layer_class(name)
    return None


def registered_classes(kind: str) -> Dict[str, type]:
    """The classes registered under explicit names for ``kind`` (e.g. ``"replay_buffer"``: name -> class)."""
    _load_builtins()
    with _LOCK:
        return dict(_CLASSES[kind])


#: modules whose classes are never taken from ``sys.modules`` by a name read from a file (they hold layers that read
#: files or run stored graphs, e.g. keras.layers.TFSMLayer); sbtf's own extractors are registered explicitly
_NEVER_FROM_MODULES = ("keras", "tensorflow", "tf_keras", "tensorflow_probability", "tf2onnx", "sbtf", "tensorflowjs")


def _imported_layer_class(name: str) -> Optional[type]:
    """A Keras layer class named ``module:qualname`` of a user's module that is already imported, or None."""
    module_name, _, qualname = name.partition(":")
    if not module_name or not qualname or "<" in qualname or module_name.split(".")[0] in _NEVER_FROM_MODULES:
        return None
    keras_module = sys.modules.get("keras")
    module = sys.modules.get(module_name)
    if keras_module is None or module is None:
        return None
    obj = module
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    if isinstance(obj, type) and issubclass(obj, keras_module.layers.Layer) and obj.__module__ == module_name:
        return obj
    return None


def registered_names(kind: str) -> list:
    """The stored names of the registered classes of one kind (sorted)."""
    _load_builtins()
    with _LOCK:
        return sorted(set(_CLASSES.get(kind, {})) | {class_key(c) for c in _AUTO.get(kind, [])})
