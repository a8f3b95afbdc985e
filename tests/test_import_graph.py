"""The import graph of sbtf and sbtf_converters: the core never imports the converters or the command line, and the
packages form no import circle; the core (``sbtf.common``) imports no package built on it.

Every module of ``sbtf`` and ``sbtf_converters`` is parsed (not imported): ``import`` statements at any depth count,
including those inside functions, which is where circles used to hide. Imports under ``if TYPE_CHECKING:`` do not
run and do not count. Run this file as a script to print the graph and the function-level imports between packages::

    python tests/test_import_graph.py [-v]
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set, Tuple

REPO = Path(__file__).resolve().parent.parent
#: (folder holding the package, package name)
ROOTS = ((REPO, "sbtf"), (REPO / "converters", "sbtf_converters"))
#: the only converters module that may import the command line (it registers ``convert`` and ``export``)
CONVERTERS_CLI_PLUGIN = "sbtf_converters.cli_plugin"
#: the core must not depend on the packages built on it (an edge from ``sbtf.common`` to one of these is a circle in
#: the making): the SB2 ``bench`` names, HER and the algorithms register themselves instead
CORE = "sbtf.common"
#: the layer sub-packages of ``sbtf.common``, lowest first: a module of one may import its own sub-package and the
#: ones before it, never one after it (the same table is in docs/architecture.md, "Layout"). The public modules at
#: ``sbtf.common``'s top level (stable-baselines 2's and 3's module paths) sit on all of them.
COMMON_LAYERS = ("fileio", "envs", "nn", "storage", "compile", "algo", "mpi")
#: the most lines a .py file of sbtf, sbtf_converters or the legacy package may have
MAX_FILE_LINES = 1000
#: files over MAX_FILE_LINES that another change is splitting right now; the integrator empties this set once those
#: splits are merged (do not add to it: split the file)
SPLIT_IN_PROGRESS: set = set()


@dataclass(frozen=True)
class Import:
    """One imported module: who imports it, where, and whether the import runs only when a function is called."""

    source: str
    target: str
    line: int
    in_function: bool


def _modules() -> Dict[str, Tuple[Path, bool]]:
    """Every module of the two packages: dotted name -> (file, is a package ``__init__``)."""
    found = {}
    for root, package in ROOTS:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts = parts[:-1]
            found[".".join(parts)] = (path, is_package)
    return found


MODULES = _modules()


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports_of(module: str) -> Iterator[Import]:
    """The sbtf / sbtf_converters modules that ``module`` imports (at any depth, except under TYPE_CHECKING)."""
    path, is_package = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))

    def visit(node: ast.AST, in_function: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            if _is_type_checking(child):
                continue
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            targets: Set[str] = set()
            if isinstance(child, ast.Import):
                targets = {alias.name for alias in child.names}
            elif isinstance(child, ast.ImportFrom):
                base = _resolve(module, is_package, child)
                # ``from pkg import name``: the submodule pkg.name when it is one, else pkg itself
                targets = {f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                           for alias in child.names}
            for target in sorted(targets):
                if target.split(".")[0] in ("sbtf", "sbtf_converters"):
                    yield Import(module, target, child.lineno, nested)
            yield from visit(child, nested)

    yield from visit(tree, False)


def all_imports() -> List[Import]:
    """The imports of every module."""
    return [item for module in sorted(MODULES) for item in imports_of(module)]


def package_of(module: str) -> str:
    """The package a module belongs to in the package graph: ``sbtf.<subpackage or module>``, or sbtf_converters."""
    parts = module.split(".")
    return "sbtf_converters" if parts[0] == "sbtf_converters" else ".".join(parts[:2])


def package_graph(imports: List[Import]) -> Dict[str, Set[str]]:
    """Package -> the packages it imports (self-edges left out)."""
    graph: Dict[str, Set[str]] = defaultdict(set)
    for item in imports:
        source, target = package_of(item.source), package_of(item.target)
        if source != target:
            graph[source].add(target)
    return graph


def function_level_imports(imports: List[Import]) -> List[Import]:
    """Imports inside function bodies whose target lies in another package."""
    return [item for item in imports if item.in_function and package_of(item.source) != package_of(item.target)]


def find_cycle(graph: Dict[str, Set[str]]) -> Optional[List[str]]:
    """One cycle of ``graph`` as a path ``[a, b, ..., a]``, or None."""
    state: Dict[str, int] = {}  # 1: on the current path, 2: done
    path: List[str] = []

    def visit(node: str) -> Optional[List[str]]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


# ------------------------------------------------------------------------------------------------ the rules

def _where(items: List[Import]) -> str:
    return "; ".join(f"{item.source} (line {item.line}) imports {item.target}" for item in items)


def test_the_parser_sees_function_level_imports():
    fake = ast.parse("def f():\n    from sbtf.common import save_util\n")
    assert isinstance(fake.body[0].body[0], ast.ImportFrom)  # the shape imports_of walks into
    found = list(imports_of("sbtf.common.base_class"))
    assert any(item.in_function for item in found) and any(not item.in_function for item in found)


def test_sbtf_never_imports_the_converters():
    offending = [item for item in all_imports()
                 if item.source.split(".")[0] == "sbtf" and item.target.split(".")[0] == "sbtf_converters"]
    assert not offending, _where(offending)


def test_only_the_command_line_imports_the_command_line():
    allowed = {"sbtf.__main__", CONVERTERS_CLI_PLUGIN}
    offending = [item for item in all_imports()
                 if package_of(item.target) == "sbtf.cli" and package_of(item.source) != "sbtf.cli"
                 and item.source not in allowed]
    assert not offending, _where(offending)


def test_the_core_does_not_import_the_command_line():
    offending = [item for item in all_imports() if item.source.startswith("sbtf.common")
                 and package_of(item.target) == "sbtf.cli"]
    assert not offending, _where(offending)


def test_converters_import_the_command_line_only_to_register_subcommands():
    offending = [item for item in all_imports() if item.source.startswith("sbtf_converters")
                 and package_of(item.target) == "sbtf.cli" and item.source != CONVERTERS_CLI_PLUGIN]
    assert not offending, _where(offending)
    plugin = [item for item in all_imports() if item.source == CONVERTERS_CLI_PLUGIN
              and package_of(item.target) == "sbtf.cli"]
    assert plugin and {item.target for item in plugin} == {"sbtf.cli"}  # the public names only


def test_no_circle_between_the_core_the_command_line_and_the_converters():
    def layer(module: str) -> str:
        if module.startswith("sbtf_converters"):
            return "converters"
        return "cli" if package_of(module) in ("sbtf.cli", "sbtf.__main__") else "core"

    graph: Dict[str, Set[str]] = defaultdict(set)
    for item in all_imports():
        if layer(item.source) != layer(item.target):
            graph[layer(item.source)].add(layer(item.target))
    assert find_cycle(graph) is None, dict(graph)


def test_no_circle_between_packages():
    cycle = find_cycle(package_graph(all_imports()))
    assert cycle is None, " -> ".join(cycle)


def test_core_imports_no_algorithm_package():
    """``sbtf.common`` depends only on itself, the logger, the algorithm list and the package root."""
    allowed = {CORE, "sbtf", "sbtf.logger", "sbtf.algorithms", "sbtf._native_logs"}
    outward = sorted(package_graph(all_imports()).get(CORE, set()) - allowed)
    assert not outward, f"sbtf.common imports {outward}"


def common_layer_of(module: str) -> Optional[str]:
    """The ``sbtf.common`` layer sub-package a module belongs to (None for the public top-level modules)."""
    parts = module.split(".")
    if parts[:2] == ["sbtf", "common"] and len(parts) > 3 and parts[2] in COMMON_LAYERS:
        return parts[2]
    return None


def layer_violations(imports: List[Import]) -> List[Import]:
    """Imports from a ``sbtf.common`` layer sub-package into a higher one (see COMMON_LAYERS)."""
    found = []
    for item in imports:
        source, target = common_layer_of(item.source), common_layer_of(item.target)
        if source and target and COMMON_LAYERS.index(target) > COMMON_LAYERS.index(source):
            found.append(item)
    return found


def test_every_common_layer_exists_as_a_package():
    for layer in COMMON_LAYERS:
        assert f"sbtf.common.{layer}" in MODULES and MODULES[f"sbtf.common.{layer}"][1], layer
        assert any(name.startswith(f"sbtf.common.{layer}.") for name in MODULES), f"sbtf.common.{layer} is empty"


def test_common_layers_import_only_downwards():
    offending = layer_violations(all_imports())
    assert not offending, _where(offending)


def test_the_layer_rule_catches_an_upward_import():
    upward = Import("sbtf.common.fileio.safe_zip", "sbtf.common.algo.on_policy", 1, True)
    downward = Import("sbtf.common.algo.on_policy", "sbtf.common.fileio.safe_zip", 1, False)
    public = Import("sbtf.common.fileio.model_schema", "sbtf.common.base_class", 1, True)
    assert layer_violations([upward, downward, public]) == [upward]


def long_files() -> Dict[str, int]:
    """Every .py file of sbtf, sbtf_converters and the legacy package over MAX_FILE_LINES: path -> lines."""
    found = {}
    for folder in (REPO / "sbtf", REPO / "converters" / "sbtf_converters", REPO / "legacy"):
        for path in sorted(folder.rglob("*.py")):
            if "node_modules" in path.parts:
                continue
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > MAX_FILE_LINES:
                found[path.relative_to(REPO).as_posix()] = lines
    return found


def test_no_file_over_the_line_limit():
    over = {path: lines for path, lines in long_files().items() if path not in SPLIT_IN_PROGRESS}
    assert not over, f"split these files along their responsibilities (at most {MAX_FILE_LINES} lines): {over}"


def test_split_in_progress_lists_only_files_still_over_the_limit():
    """Once a listed file is split, its entry goes (so the allow-list cannot hide a file that grows again)."""
    stale = sorted(path for path in SPLIT_IN_PROGRESS if path not in long_files())
    assert not stale, f"remove {stale} from SPLIT_IN_PROGRESS: they are within the limit now"


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}}) is None


def test_importing_sbtf_and_its_registries_does_not_import_tensorflow():
    code = ("import sys; import sbtf, sbtf.algorithms, sbtf.common.fileio.formats; "
            "sbtf.algorithms.get('PPO2'); "
            "print(sorted(m for m in ('tensorflow', 'sbtf_converters', 'sbtf.cli', 'sbtf.ppo2') if m in sys.modules))")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO), str(REPO / "converters")] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env,
                            check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]"


def main() -> None:  # pragma: no cover - a report for humans
    """Print the package graph, its circles and the function-level imports between packages."""
    imports = all_imports()
    graph = package_graph(imports)
    for package in sorted(graph):
        print(f"{package} -> {', '.join(sorted(graph[package]))}")
    print("circle:", " -> ".join(find_cycle(graph) or ["none"]))
    late = function_level_imports(imports)
    print(f"function-level imports between packages: {len(late)}")
    if "-v" in sys.argv:
        for item in late:
            print(f"  {item.source}:{item.line} -> {item.target}")


if __name__ == "__main__":  # pragma: no cover
    main()
