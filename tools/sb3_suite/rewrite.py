"""Rewrite stable-baselines3's (or sb3-contrib's) own test files mechanically so that they run on sbtf.

Usage::

    python tools/sb3_suite/rewrite.py PATH/TO/stable-baselines3/tests OUT_DIR
    python tools/sb3_suite/rewrite.py PATH/TO/stable-baselines3-contrib/tests OUT_DIR
    python -m pytest -q OUT_DIR --junitxml=OUT_DIR/report.xml
    python tools/sb3_suite/summarize.py OUT_DIR/report.xml

It reads a checkout (or an unpacked source distribution) of the tests and downloads nothing. The rules are the same
for every file and name no test:

* module paths: the longest prefix of ``MODULES`` is replaced (``stable_baselines3`` -> ``sbtf.sb3``,
  ``sb3_contrib`` -> ``sbtf.contrib``, SB3's ``common.*`` modules -> the sbtf module that holds the same names);
* torch activations: ``th.nn.ReLU`` / ``nn.ReLU`` / ``torch.nn.ReLU`` -> ``tf.nn.relu`` and the like (``ACTIVATIONS``);
* ``import torch`` (any form) binds the torch names to a stand-in whose use raises ``PyTorchObjectUsed``, so a test
  that inspects PyTorch objects fails with that exception type and is counted as out of scope by ``summarize.py``.
"""
from __future__ import annotations

import argparse
import re
import shutil
from pathlib import Path
from typing import Dict, List

#: SB3 / sb3-contrib module -> sbtf module (the longest matching prefix wins)
MODULES: Dict[str, str] = {
    "stable_baselines3": "sbtf.sb3",
    "stable_baselines3.common": "sbtf.common",
    "stable_baselines3.common.envs": "sbtf.sb3.common.envs",
    "stable_baselines3.common.envs.bit_flipping_env": "sbtf.common.bit_flipping_env",
    "stable_baselines3.common.torch_layers": "sbtf.common.extractors",
    "stable_baselines3.common.policies": "sbtf.sb3.common.policies",
    "stable_baselines3.common.base_class": "sbtf.sb3.common.base_class",
    "stable_baselines3.common.on_policy_algorithm": "sbtf.sb3.common.on_policy_algorithm",
    "stable_baselines3.common.off_policy_algorithm": "sbtf.sb3.common.off_policy_algorithm",
    "stable_baselines3.common.utils": "sbtf.sb3.common.utils",
    "stable_baselines3.common.preprocessing": "sbtf.sb3.common.preprocessing",
    "stable_baselines3.common.callbacks": "sbtf.sb3.common.callbacks",
    "stable_baselines3.common.save_util": "sbtf.sb3.common.save_util",
    "stable_baselines3.common.sb2_compat.rmsprop_tf_like": "sbtf.common.optimizers",
    "stable_baselines3.her": "sbtf.sb3.her",
    "sb3_contrib": "sbtf.contrib",
    "sb3_contrib.common.maskable": "sbtf.contrib.common.maskable",
}

#: PyTorch activation module -> the TensorFlow activation function sbtf takes in its place
ACTIVATIONS: Dict[str, str] = {
    "ReLU": "tf.nn.relu", "Tanh": "tf.nn.tanh", "ELU": "tf.nn.elu", "LeakyReLU": "tf.nn.leaky_relu",
    "Sigmoid": "tf.nn.sigmoid", "SiLU": "tf.nn.silu", "GELU": "tf.nn.gelu", "Softplus": "tf.nn.softplus",
    "SELU": "tf.nn.selu",
}

#: renamed class names (SB3 name -> sbtf name), applied as whole words after the module rewrite
NAMES: Dict[str, str] = {
    "RMSpropTFLike": "TorchStyleRMSProp",
}

PRELUDE = '''# --- added by tools/sb3_suite/rewrite.py: PyTorch is not used by sbtf ---
import tensorflow as tf  # noqa: E402,F401


class PyTorchObjectUsed(Exception):
    """The test reached a PyTorch object (tensor, module, distribution): out of scope for sbtf."""


class _TorchAbsent:
    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        raise PyTorchObjectUsed(f"{self._name}.{attr} (PyTorch) is used by this test")

    def __call__(self, *args, **kwargs):
        raise PyTorchObjectUsed(f"{self._name}(...) (PyTorch) is called by this test")

    def __mro_entries__(self, bases):
        raise PyTorchObjectUsed(f"a class derives from {self._name} (PyTorch)")
# --- end of the added lines ---
'''

_IMPORT_TORCH = re.compile(r"^(\s*)import (torch[\w.]*)(?: as (\w+))?\s*$", re.M)
_FROM_TORCH = re.compile(r"^(\s*)from (torch[\w.]*) import \(?([^)\n]*)\)?\s*$", re.M)
_MODULE = re.compile(r"\b(stable_baselines3|sb3_contrib)((?:\.\w+)*)")


def _map_module(match: "re.Match[str]") -> str:
    """Replace one dotted SB3 path by its sbtf path (the longest prefix in ``MODULES``)."""
    parts = (match.group(1) + match.group(2)).split(".")
    for cut in range(len(parts), 0, -1):
        head = ".".join(parts[:cut])
        if head in MODULES:
            return ".".join([MODULES[head]] + parts[cut:])
    return match.group(0)


def _torch_imports(text: str) -> str:
    """Bind every name a torch import would bind to a ``_TorchAbsent`` stand-in."""

    def plain(match: "re.Match[str]") -> str:
        indent, module, alias = match.groups()
        name = alias or module.split(".")[0]
        return f"{indent}{name} = _TorchAbsent({module!r})"

    def from_import(match: "re.Match[str]") -> str:
        indent, module, names = match.groups()
        lines = []
        for item in (n.strip() for n in names.split(",")):
            if not item:
                continue
            original, _, alias = item.partition(" as ")
            lines.append(f"{indent}{(alias or original).strip()} = _TorchAbsent({module + '.' + original.strip()!r})")
        return "\n".join(lines)

    return _FROM_TORCH.sub(from_import, _IMPORT_TORCH.sub(plain, text))


def rewrite_source(text: str) -> str:
    """Return ``text`` (one test module) with the rewrite rules applied."""
    for name, activation in ACTIVATIONS.items():
        text = re.sub(rf"\b(?:th|torch)\.nn\.{name}\b(?!\()", activation, text)
        text = re.sub(rf"(?<![\w.])nn\.{name}\b(?!\()", activation, text)
    text = _MODULE.sub(_map_module, text)
    for old, new in NAMES.items():
        text = re.sub(rf"\b{old}\b", new, text)
    uses_torch = bool(_IMPORT_TORCH.search(text) or _FROM_TORCH.search(text))
    text = _torch_imports(text)
    if uses_torch or "tf.nn." in text:
        text = _insert_prelude(text)
    return text


def _insert_prelude(text: str) -> str:
    """Put ``PRELUDE`` after the module docstring and ``__future__`` imports (where Python requires them)."""
    lines = text.splitlines(keepends=True)
    position = 0
    for index, line in enumerate(lines):
        if line.startswith("from __future__"):
            position = index + 1
    return "".join(lines[:position]) + PRELUDE + "".join(lines[position:])


def rewrite_tree(source: Path, target: Path) -> List[Path]:
    """Rewrite every ``*.py`` under ``source`` into ``target`` (same relative paths); other files are copied."""
    if not source.is_dir():
        raise SystemExit(f"{source} is not a folder: give the path of stable-baselines3's (or sb3-contrib's) tests/")
    written = []
    for path in sorted(source.rglob("*")):
        if path.is_dir() or "__pycache__" in path.parts:
            continue
        out = target / path.relative_to(source)
        out.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".py":
            out.write_text(rewrite_source(path.read_text()))
        else:
            shutil.copyfile(path, out)
        written.append(out)
    return written


def main(argv: "List[str] | None" = None) -> None:
    """Command line: ``rewrite.py SOURCE_TESTS_DIR OUT_DIR``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="the tests/ folder of a stable-baselines3 or sb3-contrib checkout")
    parser.add_argument("target", type=Path, help="where the rewritten files go (outside the repository)")
    args = parser.parse_args(argv)
    for path in rewrite_tree(args.source, args.target):
        print(path)


if __name__ == "__main__":
    main()
