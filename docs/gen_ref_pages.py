"""Generate the API reference pages of the documentation site (run by mkdocs-gen-files at build time).

Walks the ``sbtf`` package on disk and writes one page per public module (``reference/<dotted/path>.md`` holding
``::: <module>``) plus ``reference/SUMMARY.md``, the reference's navigation (read by mkdocs-literate-nav). A module
or package whose name starts with ``_`` is private and skipped, with everything below it; nothing is listed by hand,
so moving or adding modules needs no change here.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator, Tuple

ROOT = Path(__file__).resolve().parent.parent
#: (folder that holds the package, package name): the packages whose public modules the reference covers
PACKAGES = ((ROOT, "sbtf"),)


def public_modules(base: Path, package: str) -> Iterator[Tuple[str, ...]]:
    """
    The dotted names (as tuples of parts) of the public modules of ``package``, sorted.

    :param base: the folder that contains the package's folder
    :param package: the top-level package's name
    """
    for path in sorted((base / package).rglob("*.py")):
        parts = path.relative_to(base).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        elif parts[-1] == "__main__":
            continue
        if any(part.startswith("_") for part in parts):
            continue
        if not (path.parent / "__init__.py").exists():
            continue  # data or script folders (hyperparams/, ...) are not packages
        yield parts


def main() -> None:
    """Write the reference pages and their navigation (inside a MkDocs build, through mkdocs-gen-files)."""
    import mkdocs_gen_files

    nav = mkdocs_gen_files.Nav()
    for base, package in PACKAGES:
        for parts in public_modules(base, package):
            doc_path = Path("reference", *parts, "index.md") if (base.joinpath(*parts) / "__init__.py").exists() \
                else Path("reference", *parts).with_suffix(".md")
            nav[parts] = doc_path.relative_to("reference").as_posix()
            with mkdocs_gen_files.open(doc_path, "w") as handle:
                name = ".".join(parts)
                handle.write(f"# `{name}`\n\n::: {name}\n    options:\n      show_root_heading: false\n")
    with mkdocs_gen_files.open("reference/SUMMARY.md", "w") as handle:
        handle.writelines(nav.build_literate_nav())


if __name__ in ("__main__", "<run_path>"):  # mkdocs-gen-files runs the script with runpy.run_path; tests import it
    main()
