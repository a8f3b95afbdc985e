"""Every ```python block of README.md and docs/**/*.md runs as written.

Each block is its own test case (id ``docs/sb3.md:L120``, the line of its opening fence), collected when the tests
are collected, so a page added under ``docs/`` is picked up without editing this file. A block runs as a script in
a fresh ``sys.executable`` subprocess, in an empty temporary working directory, with ``TF_CPP_MIN_LOG_LEVEL=3``,
``MPLBACKEND=Agg`` and this checkout's ``sbtf`` first on ``PYTHONPATH``; it passes when it exits with status 0 and
prints what its page says it prints. A timeout bounds the work (a hang or an endless loop fails).
Blocks in other languages (bash, yaml, text, ...) are not collected.

Directives: HTML comments (invisible on the rendered page) on the lines right above the opening fence, one per line,
in any order (see docs/contributing.md, "Examples in the docs"):

- ``<!-- example: skip "reason" -->``: the block cannot run on its own (needs MPI, Atari ROMs, ...); the test is
  reported as skipped with the reason. The reason is required.
- ``<!-- example: slow -->``: runs only under ``pytest -m slow`` (a block that trains for real).
- ``<!-- example: continue -->``: the block continues the previous ```python block of the same page: the test runs
  the blocks concatenated. The previous block is then not run on its own (it is reported as skipped, naming the
  block that runs it), so a chain costs one run. A chain is slow or skipped when one of its blocks is.
- ``<!-- example: output "text" -->``: the standard output must contain ``text`` (repeat for several texts);
  a chain checks the texts of all its blocks.
- ``<!-- example: timeout 600 -->``: seconds before the run counts as a hang (default 600, 3600 for slow blocks:
  a bound on a busy machine, not a speed check).

An unknown directive, a skip without a reason or a ``continue`` with no block before it fails the collection of
that block with a message naming the file and line, never silently.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TIMEOUT = 600
SLOW_TIMEOUT = 3600

# any indentation: a block may sit in a list item, an admonition (!!! note) or a content tab
_FENCE_OPEN = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)")
_DIRECTIVE = re.compile(r"^\s*<!--\s*example:\s*(?P<body>.*?)\s*-->\s*$")


class ExampleSyntaxError(ValueError):
    """A malformed ``<!-- example: ... -->`` directive."""


@dataclass
class Block:
    """One ```python block of a Markdown page and the directives right above it."""

    path: str
    line: int
    code: str
    skip: str | None = None
    slow: bool = False
    continues: bool = False
    outputs: list[str] = field(default_factory=list)
    timeout: int | None = None
    error: str | None = None

    @property
    def id(self) -> str:
        return f"{self.path}:L{self.line}"


def _parse_directive(body: str, block: Block) -> None:
    if body == "slow":
        block.slow = True
    elif body == "continue":
        block.continues = True
    elif body.startswith("skip"):
        match = re.fullmatch(r'skip\s+"(?P<reason>[^"]+)"', body)
        if not match:
            raise ExampleSyntaxError('a skip needs its reason in double quotes: <!-- example: skip "reason" -->')
        block.skip = match.group("reason")
    elif body.startswith("output"):
        match = re.fullmatch(r'output\s+"(?P<text>[^"]+)"', body)
        if not match:
            raise ExampleSyntaxError('an output check needs its text in double quotes: '
                                     '<!-- example: output "Mean reward" -->')
        block.outputs.append(match.group("text"))
    elif body.startswith("timeout"):
        match = re.fullmatch(r"timeout\s+(?P<seconds>[1-9]\d*)", body)
        if not match:
            raise ExampleSyntaxError("a timeout needs a whole number of seconds: <!-- example: timeout 600 -->")
        block.timeout = int(match.group("seconds"))
    else:
        raise ExampleSyntaxError(f"unknown directive <!-- example: {body} -->: use skip \"reason\", slow, continue, "
                                 "output \"text\" or timeout N")


def parse_blocks(text: str, path: str) -> list[Block]:
    """The ```python blocks of a Markdown text, with their directives (``path`` only names them)."""
    lines = text.splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        match = _FENCE_OPEN.match(lines[index])
        if not match:
            index += 1
            continue
        fence, info, indent = match.group("fence"), match.group("info").lower(), len(match.group("indent"))
        start = index
        body: list[str] = []
        index += 1
        while index < len(lines) and not re.match(r"^ *" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}\s*$",
                                                  lines[index]):
            line = lines[index]
            body.append(line[indent:] if line[:indent].strip() == "" else line.lstrip())
            index += 1
        index += 1
        if info not in ("python", "py", "python3"):
            continue
        block = Block(path=path, line=start + 1, code="\n".join(body) + "\n")
        above = start - 1
        while above >= 0 and _DIRECTIVE.match(lines[above]):
            try:
                _parse_directive(_DIRECTIVE.match(lines[above]).group("body"), block)
            except ExampleSyntaxError as error:
                block.error = f"{path}:{above + 1}: {error}"
            above -= 1
        blocks.append(block)
    return blocks


@dataclass
class Example:
    """What one test case runs: a block, or a chain of blocks joined by ``continue``."""

    id: str
    code: str
    skip: str | None
    slow: bool
    outputs: list[str]
    timeout: int
    error: str | None


def build_examples(blocks: list[Block]) -> list[Example]:
    """One example per block of one page; a block continued by the next one is skipped, naming the chain's end."""
    examples: list[Example] = []
    chain: list[Block] = []
    for position, block in enumerate(blocks):
        if block.continues and not chain:
            block.error = block.error or (f"{block.id}: <!-- example: continue --> but no ```python block before it on "
                                          "this page")
        chain = chain + [block] if block.continues else [block]
        continued_by = blocks[position + 1] if position + 1 < len(blocks) and blocks[position + 1].continues else None
        errors = [b.error for b in chain if b.error]
        skips = [f"{b.skip} ({b.id})" if b is not block else b.skip for b in chain if b.skip]
        if continued_by is not None and not errors:
            skips = [f"runs as the start of {continued_by.id} (the next block continues it)"]
        slow = any(b.slow for b in chain)
        timeouts = [b.timeout for b in chain if b.timeout]
        examples.append(Example(
            id=block.id,
            code="\n".join(b.code for b in chain),
            skip="; ".join(skips) if skips else None,
            slow=slow,
            outputs=[text for b in chain for text in b.outputs],
            timeout=max(timeouts) if timeouts else (SLOW_TIMEOUT if slow else DEFAULT_TIMEOUT),
            error=errors[0] if errors else None,
        ))
    return examples


def documented_pages() -> list[Path]:
    """README.md and every Markdown page under docs/, globbed now (pages added later are picked up)."""
    pages = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("**/*.md"))
    return [page for page in pages if page.is_file()]


def collect_examples() -> list[Example]:
    examples: list[Example] = []
    for page in documented_pages():
        relative = page.relative_to(ROOT).as_posix()
        examples.extend(build_examples(parse_blocks(page.read_text(encoding="utf-8"), relative)))
    return examples


def _params() -> list:
    params = []
    for example in collect_examples():
        marks = []
        if example.slow:
            marks.append(pytest.mark.slow)
        if example.skip and not example.error:
            marks.append(pytest.mark.skip(reason=example.skip))
        params.append(pytest.param(example, id=example.id, marks=marks))
    return params


def _subprocess_env() -> dict[str, str]:
    """This process's environment, quiet TensorFlow, no display, and the imported sbtf's checkout first."""
    env = dict(os.environ)
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    env["MPLBACKEND"] = "Agg"
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env["PYTHONUNBUFFERED"] = "1"
    import sbtf

    paths = [str(Path(sbtf.__file__).resolve().parents[1])]
    try:
        import sbtf_converters

        paths.append(str(Path(sbtf_converters.__file__).resolve().parents[1]))
    except ImportError:
        pass
    legacy = ROOT / "legacy"
    if legacy.is_dir():
        paths.append(str(legacy))
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def run_example(example: Example, workdir: Path) -> str:
    """Run ``example`` as a script in ``workdir``; fail the test unless it exits with 0 and prints its texts."""
    if example.error:
        pytest.fail(example.error)
    script = workdir / "example.py"
    script.write_text(example.code, encoding="utf-8")
    try:
        result = subprocess.run([sys.executable, str(script)], check=False, cwd=workdir, env=_subprocess_env(),
                                capture_output=True, text=True, timeout=example.timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as expired:
        # the output collected before the kill comes as bytes, even with text=True
        stdout = expired.stdout.decode(errors="replace") if isinstance(expired.stdout, bytes) else expired.stdout
        pytest.fail(f"{example.id} did not finish within {example.timeout} s (a hang, an endless loop or too much work "
                    f"for the default suite: bound it, or mark it <!-- example: slow -->)\n--- stdout ---\n"
                    f"{(stdout or '')[-6000:]}")
    report = f"--- stdout ---\n{result.stdout[-6000:]}\n--- stderr ---\n{result.stderr[-6000:]}"
    if result.returncode != 0:
        pytest.fail(f"{example.id} exited with status {result.returncode}\n{report}")
    for text in example.outputs:
        if text not in result.stdout:
            pytest.fail(f"{example.id} should print {text!r}\n{report}")
    return result.stdout


@pytest.mark.parametrize("example", _params())
def test_example_runs(example: Example, tmp_path: Path) -> None:
    run_example(example, tmp_path)


# The collector itself: the directives' grammar and the chains.

_PAGE = '''Text.

```python
a = 1
```

<!-- example: slow -->
<!-- example: output "2" -->
<!-- example: continue -->
```python
print(a + 1)
```

```bash
echo not collected
```

<!-- example: skip "needs MPI: run under mpirun" -->
```python
import mpi4py
```
'''


def test_parse_blocks_reads_directives_and_ignores_other_languages():
    blocks = parse_blocks(_PAGE, "docs/x.md")
    assert [(b.id, b.code) for b in blocks] == [("docs/x.md:L3", "a = 1\n"), ("docs/x.md:L10", "print(a + 1)\n"),
                                                ("docs/x.md:L19", "import mpi4py\n")]
    assert (blocks[1].slow, blocks[1].continues, blocks[1].outputs) == (True, True, ["2"])
    assert blocks[2].skip == "needs MPI: run under mpirun"


def test_build_examples_runs_a_chain_once():
    first, chained, mpi = build_examples(parse_blocks(_PAGE, "docs/x.md"))
    assert first.skip == "runs as the start of docs/x.md:L10 (the next block continues it)"
    assert (chained.code, chained.slow, chained.outputs, chained.skip) == ("a = 1\n\nprint(a + 1)\n", True, ["2"], None)
    assert chained.timeout == SLOW_TIMEOUT
    assert (mpi.skip, mpi.slow, mpi.timeout) == ("needs MPI: run under mpirun", False, DEFAULT_TIMEOUT)


@pytest.mark.parametrize("directive, message", [
    ("skip", "a skip needs its reason in double quotes"),
    ('skip ""', "a skip needs its reason in double quotes"),
    ("sloow", "unknown directive <!-- example: sloow -->"),
    ("timeout soon", "a timeout needs a whole number of seconds"),
    ("output Mean", "an output check needs its text in double quotes"),
])
def test_a_malformed_directive_fails_that_block(directive, message):
    (example,) = build_examples(parse_blocks(f"<!-- example: {directive} -->\n```python\npass\n```\n", "d.md"))
    assert example.error.startswith("d.md:1: " + message)


def test_continue_without_a_block_before_fails():
    (example,) = build_examples(parse_blocks("<!-- example: continue -->\n```python\npass\n```\n", "d.md"))
    assert example.error == "d.md:L2: <!-- example: continue --> but no ```python block before it on this page"


def _example(code: str, outputs: tuple = (), timeout: int = DEFAULT_TIMEOUT) -> Example:
    return Example(id="d.md:L1", code=code, skip=None, slow=False, outputs=list(outputs), timeout=timeout, error=None)


def test_run_example_checks_the_output_in_the_working_directory(tmp_path):
    code = "import os\nopen('made.txt', 'w').close()\nprint('Mean reward:', os.environ['TF_CPP_MIN_LOG_LEVEL'])\n"
    assert run_example(_example(code, outputs=("Mean reward: 3",)), tmp_path) == "Mean reward: 3\n"
    assert (tmp_path / "made.txt").is_file()


@pytest.mark.parametrize("code, outputs, message", [
    ("print('Mean reward: 1')", ("Mean return",), "d.md:L1 should print 'Mean return'"),
    ("import numpy as np\nnp.zeros(obs)", (), "d.md:L1 exited with status 1"),
])
def test_run_example_fails_naming_the_block(tmp_path, code, outputs, message):
    with pytest.raises(pytest.fail.Exception, match=message) as failure:
        run_example(_example(code, outputs), tmp_path)
    assert ("NameError: name 'obs' is not defined" in str(failure.value)) == ("obs" in code)


def test_run_example_bounds_an_endless_loop(tmp_path):
    # what it printed before the kill is shown when there is any (none if the busy machine never started it)
    with pytest.raises(pytest.fail.Exception, match=r"d.md:L1 did not finish within 1 s .*\n--- stdout ---\n"):
        run_example(_example("print('started', flush=True)\nwhile True:\n    pass\n", timeout=1), tmp_path)


def test_an_indented_block_is_collected_dedented():
    page = "!!! note\n\n    <!-- example: output \"2\" -->\n    ```python\n    if True:\n        print(2)\n    ```\n"
    (block,) = parse_blocks(page, "d.md")
    assert (block.line, block.code, block.outputs) == (4, "if True:\n    print(2)\n", ["2"])
