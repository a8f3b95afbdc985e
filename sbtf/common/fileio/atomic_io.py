"""Atomic file writes: a reader sees the old file or the new one, never half of one.

Every file is written to a temporary file in the destination folder (``.tmp-<pid>-<random>-<name>``),
flushed to disk and renamed over the target. A process killed inside that window leaves its temporary
file behind; the next save to the same path removes such orphans (temporary files of processes that no
longer run). Files get the permissions a plain ``open()`` would give (``0666 & ~umask``, usually 0644).
:func:`atomic_write_many` replaces several files together: all are written first, then renamed; if a
rename fails, the files already replaced are put back.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from typing import Dict, Mapping, Union

__all__ = ["atomic_write_bytes", "atomic_write_many", "remove_orphan_temporaries"]

PathLike = Union[str, os.PathLike]
_PREFIX = ".tmp-"


def _file_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _pid_running(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return True
    return True


def remove_orphan_temporaries(path: PathLike) -> list:
    """
    Remove the temporary files an interrupted save to ``path`` left behind (their writer no longer runs).

    :return: (list) the paths removed
    """
    path = os.path.abspath(os.fspath(path))
    folder, name = os.path.split(path)
    removed = []
    try:
        entries = os.listdir(folder)
    except OSError:
        return removed
    for entry in entries:
        if not (entry.startswith(_PREFIX) and entry.endswith("-" + name)):
            continue
        pid_text = entry[len(_PREFIX):].split("-", 1)[0]
        if not pid_text.isdigit() or _pid_running(int(pid_text)):
            continue
        try:
            os.remove(os.path.join(folder, entry))
            removed.append(os.path.join(folder, entry))
        except OSError:
            pass
    return removed


def _write_temporary(path: str, payload: bytes) -> str:
    folder, name = os.path.split(path)
    os.makedirs(folder, exist_ok=True)
    remove_orphan_temporaries(path)
    fd, tmp_path = tempfile.mkstemp(prefix=f"{_PREFIX}{os.getpid()}-", suffix="-" + name, dir=folder)
    try:
        os.fchmod(fd, _file_mode())
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        if os.path.exists(tmp_path):
            os.remove(tmp_path)
        raise
    return tmp_path


def atomic_write_bytes(path: PathLike, payload: bytes) -> None:
    """Write ``payload`` to ``path`` through a temporary file and ``os.replace`` (never half-written)."""
    path = os.path.abspath(os.fspath(path))
    tmp_path = _write_temporary(path, payload)
    try:
        os.replace(tmp_path, path)
    except BaseException:
        if os.path.exists(tmp_path):
            os.remove(tmp_path)
        raise


def atomic_write_many(payloads: Mapping[PathLike, bytes]) -> None:
    """
    Replace several files together: every new file is written in full before any is renamed into place, and
    a failed rename restores the files already replaced.

    :param payloads: (dict) path -> bytes
    """
    targets = {os.path.abspath(os.fspath(p)): data for p, data in payloads.items()}
    written: Dict[str, str] = {}
    try:
        for path, data in targets.items():
            written[path] = _write_temporary(path, data)
    except BaseException:
        for tmp_path in written.values():
            if os.path.exists(tmp_path):
                os.remove(tmp_path)
        raise
    backups: Dict[str, str] = {}
    replaced = []
    try:
        for path, tmp_path in written.items():
            if os.path.exists(path):
                folder, tmp_name = os.path.split(tmp_path)
                marker = f"{_PREFIX}{os.getpid()}-"
                backup = os.path.join(folder, tmp_name.replace(marker, marker + "old", 1))
                try:
                    os.link(path, backup)
                except OSError:
                    shutil.copy2(path, backup)
                backups[path] = backup
            os.replace(tmp_path, path)
            replaced.append(path)
    except BaseException:
        for path in replaced:
            if path in backups:
                os.replace(backups.pop(path), path)
            else:
                os.remove(path)
        for tmp_path in written.values():
            if os.path.exists(tmp_path):
                os.remove(tmp_path)
        raise
    finally:
        for backup in backups.values():
            if os.path.exists(backup):
                os.remove(backup)
