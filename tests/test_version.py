"""sbtf's version: one source (pyproject.toml), read from the package metadata; ``sbtf --version`` prints it."""
import importlib.metadata
import subprocess
import sys
import tomllib
from pathlib import Path

import sbtf
from sbtf._version import UNKNOWN_VERSION, read_version
from sbtf.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_version_is_the_installed_metadata():
    assert sbtf.__version__ == importlib.metadata.version("sbtf")


def test_pyproject_is_the_one_version_source():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" in project and "version" not in project.get("dynamic", [])
    assert "[metadata]" not in (ROOT / "setup.cfg").read_text()  # setup.cfg configures tools only
    # no other hard-coded copy in the package
    assert f'__version__ = "{project["version"]}"' not in (ROOT / "sbtf" / "__init__.py").read_text()


def test_source_tree_without_install_reads_pyproject(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "sbtf"\nversion = "9.8.7"\n')
    assert read_version("sbtf-not-installed-anywhere", pyproject) == "9.8.7"
    pyproject.write_text('[project]\nname = "other"\nversion = "1.0"\n')
    assert read_version("sbtf-not-installed-anywhere", pyproject) == UNKNOWN_VERSION
    assert read_version("sbtf-not-installed-anywhere", tmp_path / "absent.toml") == UNKNOWN_VERSION


def test_sbtf_version_flag_prints_it(capsys):
    try:
        main(["--version"])
    except SystemExit as exit_:
        assert exit_.code == 0
    assert capsys.readouterr().out.strip() == f"sbtf {sbtf.__version__}"


def test_version_in_a_fresh_interpreter():
    result = subprocess.run([sys.executable, "-c", "import sbtf; print(sbtf.__version__)"], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.strip() == importlib.metadata.version("sbtf")
