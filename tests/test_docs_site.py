"""The documentation site: it builds without a warning, and every algorithm has its page.

The build needs the ``docs`` extra (``pip install -e ".[docs]"``); without MkDocs that test skips and says so.
"""
from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sbtf import algorithms

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _nav_pages(node) -> list:
    """Every page path listed in mkdocs.yml's ``nav`` (nested lists and dicts)."""
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [page for item in node for page in _nav_pages(item)]
    if isinstance(node, dict):
        return [page for value in node.values() for page in _nav_pages(value)]
    return []


def _mkdocs_config() -> dict:
    """mkdocs.yml read as plain YAML (it uses no custom tags)."""
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text())


def _renders(target: str, algo: algorithms.Algorithm) -> bool:
    """
    Whether ``::: target`` renders ``algo``'s class: its own ``module.Class`` path, or the module below it that
    defines the class (for a package that exports it lazily, e.g. ``sbtf.gail.model.GAIL``). Read from the source
    files, without importing TensorFlow.
    """
    if target == f"{algo.module}.{algo.class_name}":
        return True
    module, _, name = target.rpartition(".")
    if name != algo.class_name or not module.startswith(algo.module + "."):
        return False
    base = ROOT.joinpath(*module.split("."))
    source = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
    return source.is_file() and re.search(rf"^class {name}\b", source.read_text(), re.M) is not None


def _algorithm_pages() -> dict:
    """The algorithm pages in the navigation, by the path each one renders with ``::: path``."""
    pages = {}
    for page in _nav_pages(_mkdocs_config()["nav"]):
        if not page.startswith("algorithms/"):
            continue
        for target in re.findall(r"^::: ([\w.]+)$", (DOCS / page).read_text(), re.M):
            pages[target] = page
    return pages


@pytest.mark.parametrize("algo", algorithms.all_algorithms(), ids=lambda algo: algo.cli_name)
def test_every_algorithm_has_its_page(algo):
    pages = [page for target, page in _algorithm_pages().items() if _renders(target, algo)]
    assert pages, (f"{algo.name} ({algo.target}) has no page: add docs/algorithms/<family>/<name>.md rendering it "
                   f"with '::: <module>.{algo.class_name}' and list it in mkdocs.yml's nav")
    text = (DOCS / pages[0]).read_text()
    for section in ("## Can I use it?", "## Example", "## Results and speed", "## Parameters"):
        assert section in text, f"{pages[0]} lacks its '{section}' section"
    assert "```python" in text, f"{pages[0]} has no Python example"
    table = text.split("## Can I use it?", 1)[1].split("## Example", 1)[0]
    for space in ("Box", "Discrete", "MultiDiscrete", "MultiBinary", "Dict"):
        assert f"| {space} |" in table, f"{pages[0]}'s 'Can I use it?' table has no {space} row"


def test_every_nav_entry_exists():
    missing = [page for page in _nav_pages(_mkdocs_config()["nav"])
               if not page.endswith("/") and not (DOCS / page).is_file()]
    assert not missing, f"mkdocs.yml's nav lists pages that do not exist under docs/: {missing}"


def test_reference_walk_covers_public_modules_only():
    spec = importlib.util.spec_from_file_location("gen_ref_pages", DOCS / "gen_ref_pages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # defines the walk; main() runs only inside a MkDocs build
    names = {".".join(parts) for parts in module.public_modules(ROOT, "sbtf")}
    for expected in ("sbtf", "sbtf.ppo2", "sbtf.sb3", "sbtf.sb3.ppo", "sbtf.contrib", "sbtf.contrib.tqc",
                     "sbtf.common", "sbtf.common.vec_env", "sbtf.algorithms"):
        assert expected in names
    assert not [name for name in names if any(part.startswith("_") for part in name.split("."))]
    assert not [name for name in names if name.startswith("sbtf.hyperparams")]


@pytest.mark.slow
def test_site_builds_without_warnings(tmp_path):
    if shutil.which("mkdocs") is None and importlib.util.find_spec("mkdocs") is None:
        pytest.skip('MkDocs is not installed: pip install -e ".[docs]"')
    for plugin in ("material", "mkdocstrings_handlers.python", "mkdocs_gen_files", "mkdocs_literate_nav",
                   "mkdocs_section_index"):
        if importlib.util.find_spec(plugin) is None:
            pytest.skip(f'{plugin} is not installed: pip install -e ".[docs]"')
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
                            cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    for page in ("index.html", "algorithms/sb2/ppo2/index.html", "reference/sbtf/index.html",
                 "changelog/index.html"):
        assert (tmp_path / page).is_file(), f"the site has no {page}"
    ppo2 = (tmp_path / "algorithms/sb2/ppo2/index.html").read_text()
    assert "nminibatches" in ppo2, "PPO2's page does not render its parameters from the docstring"
