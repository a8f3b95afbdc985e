"""What sbtf_converters adds to sbtf's file-format hooks (:mod:`sbtf.common.fileio.formats`).

* readers of stable-baselines 2.x model files (``sb2-zip``, ``sb2-pkl``), so that ``PPO2.load("old_agent.pkl")``
  reads them through :func:`sbtf_converters.legacy.load_sb2_model`;
* the reader of stable-baselines3 / sb3-contrib model zips (``sb3-zip``), so that ``sbtf.sb3.PPO.load("ppo.zip")``
  reads them through :func:`sbtf_converters.sb3_reader.load_sb3_model` (no PyTorch needed);
* the exporter behind ``model.export(...)``: :func:`sbtf_converters.export.export_model`.

sbtf finds this module through the ``sbtf.plugins`` entry point (``sbtf_converters.plugin:register_formats``) or, in
an installation without entry-point metadata, by importing it; importing :mod:`sbtf_converters` registers it too.
The registered functions import the reader / exporter modules (and TensorFlow) only when they are first called.
"""
from __future__ import annotations

from typing import Any

from sbtf.common.fileio import formats

__all__ = ["SB2_FILE_KINDS", "SB3_FILE_KIND", "register_formats", "read_sb2_model", "read_sb3_model", "export_model"]

#: the kinds of stable-baselines 2.x model files (as ``sbtf.common.save_util.inspect_model_bytes`` names them)
SB2_FILE_KINDS = ("sb2-zip", "sb2-pkl")
#: the kind of stable-baselines3 / sb3-contrib model zips
SB3_FILE_KIND = "sb3-zip"


def read_sb2_model(cls: type, payload: bytes, env: Any = None, custom_objects: Any = None, allow_pickle: bool = False,
                   **kwargs: Any) -> Any:
    """The model reader of stable-baselines 2.x files (see :func:`sbtf_converters.legacy.load_sb2_model`)."""
    from sbtf_converters.legacy import load_sb2_model  # pylint: disable=import-outside-toplevel  # on first use

    return load_sb2_model(cls, payload, env=env, custom_objects=custom_objects, allow_pickle=allow_pickle, **kwargs)


def read_sb3_model(cls: type, payload: bytes, env: Any = None, custom_objects: Any = None, allow_pickle: bool = False,
                   **kwargs: Any) -> Any:
    """
    The model reader of stable-baselines3 / sb3-contrib zips (see :func:`sbtf_converters.sb3_reader.load_sb3_model`).
    """
    from sbtf_converters.sb3_reader import load_sb3_model  # pylint: disable=import-outside-toplevel  # on first use

    return load_sb3_model(cls, payload, env=env, custom_objects=custom_objects, allow_pickle=allow_pickle, **kwargs)


def export_model(model: Any, path: Any, **kwargs: Any) -> str:
    """The exporter behind ``model.export`` (see :func:`sbtf_converters.export.export_model`)."""
    from sbtf_converters import export  # pylint: disable=import-outside-toplevel  # imports TensorFlow

    return export.export_model(model, path, **kwargs)


def register_formats() -> None:
    """Register the stable-baselines 2 and 3 readers and the exporter with sbtf (idempotent)."""
    for kind in SB2_FILE_KINDS:
        formats.register_model_reader(kind, read_sb2_model)
    formats.register_model_reader(SB3_FILE_KIND, read_sb3_model)
    formats.register_exporter(export_model)
