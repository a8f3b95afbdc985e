"""The optional extras: ``all`` holds every other one, the README names only extras that exist, the pins that keep
``pip install -e ".[all]"`` resolvable are there, and (``-m slow``, needs the package index) pip resolves each extra
alone and all together in a dry run. CI (``.ci/run``) installs ``[all]`` in a fresh venv."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _project() -> dict:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as handle:
        return tomllib.load(handle)["project"]


def _extras() -> dict:
    return _project()["optional-dependencies"]


def _all_members() -> set:
    (spec,) = _extras()["all"]
    match = re.fullmatch(r"sbtf\[([a-z0-9_,-]+)\]", spec)
    assert match, spec
    return set(match.group(1).split(","))


def test_all_installs_every_other_extra():
    assert _all_members() == set(_extras()) - {"all"}
    assert {"video", "optimize", "box2d", "atari", "mpi", "export", "tests"} <= set(_extras())


def test_readme_and_ci_name_only_existing_extras():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        readme = handle.read()
    named = set()
    for group in re.findall(r"\.\[([a-z0-9_,-]+)\]", readme) + re.findall(r"sbtf\[([a-z0-9_,-]+)\]", readme):
        named.update(group.split(","))
    assert named and named <= set(_extras()), named - set(_extras())
    assert 'pip install -e ".[all]"' in readme
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as handle:
        assert 'pip install -e ".[all]"' in handle.read()


def test_pins_that_keep_the_export_stack_resolvable():
    """tensorflowjs 4.22 needs packaging~=23.1 and (through tensorflow-decision-forests 1.12) tensorflow==2.19.0;
    without both pins pip backtracks through old rich / commonmark releases into a `future` source build that fails
    on Python 3.11."""
    assert "tensorflow==2.19.0" in _project()["dependencies"]
    export = _extras()["export"]
    assert any(req.startswith("tensorflowjs==4.22") for req in export)
    assert "packaging>=23.1,<24" in export
    assert any(req.startswith("tensorflow-decision-forests==1.12") for req in export)


@pytest.mark.slow
@pytest.mark.parametrize("extra", sorted(set(_extras())))
def test_pip_resolves_each_extra(extra):
    """A dry-run install of ``.[extra]`` resolves (about a minute each; needs the package index)."""
    result = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed",
                             "-e", ".[{}]".format(extra)], cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stderr[-3000:]
