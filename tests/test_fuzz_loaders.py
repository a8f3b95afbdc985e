"""A seeded mutation fuzzer over real files: sbtf zips, stable-baselines 2 ``.pkl``/``.zip`` agents, VecNormalize and
running-average statistics, expert datasets. Every mutant must load or raise a typed ``ModelFileError``: 0 crashes,
0 hangs (the child's timeout), 0 memory blow-ups (per-case high-water mark), 0 untyped errors, 0 unbounded messages
(and a loaded model must be able to act). Besides byte, JSON and ``.npy`` header edits, mutants exercise the load
budgets of issue #34: members re-compressed with bzip2/lzma/deflate/stored whose declared size, stream or CRC lies,
runs of millions of push opcodes, memo indices chosen to collide, JSON values full of containers or colliding keys.

Default suite: a few hundred mutants; ``pytest -m slow``: thousands. As a script, it prints the outcome table:
``python tests/test_fuzz_loaders.py --n 3000 --seed 1``.
"""
from __future__ import annotations

import argparse
import collections
import io
import json
import random
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from crafted_files import SHARED_ZOO, build_zip, make_good_files  # noqa: E402
from test_crafted_files import MAX_MESSAGE_CHARS, MAX_PEAK_GROWTH_MB, run_cases  # noqa: E402

JSON_VALUES = [None, True, -1, 0, 2 ** 63, 1e308, float("inf"), "", "x" * 1000, [], {}, [[[[1]]]],
               {"__class__": "os:system"}, {"__enum__": "builtins:eval", "value": "1"},
               {"__ndarray__": [1], "dtype": "O", "shape": [1]}, {"__space__": {"type": "Box"}},
               {"__dict_items__": [[1, 2], [[1], 3]]}, {"__tuple__": 5}, {"__data_object__": "x", "state": {}},
               {"__callable__": {"sampled": [[1, "a"]]}}, {"__activation__": 3},
               # budgets (issue #34): many containers, keys chosen to collide, deep nesting
               [{}] * 300_000, [[]] * 300_000,
               {"__dict_items__": [[k * (2 ** 61 - 1), 0] for k in range(1, 600)]},
               {"__dict_items__": [[i, {"__dict_items__": [[k * (2 ** 61 - 1), i] for k in range(1, 300)]}]
                                   for i in range(20)]},
               {"__tuple__": [[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]}]


# ------------------------------------------------------------------------------------------------ mutators
def byte_mutation(data: bytes, rng: random.Random) -> bytes:
    data = bytearray(data)
    kind = rng.choice(["flip", "flip", "insert", "delete", "truncate", "duplicate", "set_ff", "set_00"])
    if not data:
        return bytes(data)
    pos = rng.randrange(len(data))
    if kind == "flip":
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif kind == "insert":
        data[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    elif kind == "delete":
        del data[pos:pos + rng.randint(1, 64)]
    elif kind == "truncate":
        del data[pos:]
    elif kind == "duplicate":
        end = min(len(data), pos + rng.randint(1, 256))
        data[end:end] = data[pos:end] * rng.randint(1, 4)
    elif kind == "set_ff":
        data[pos:pos + 4] = b"\xff\xff\xff\x7f"
    else:
        data[pos:pos + 4] = b"\0\0\0\0"
    return bytes(data)


def _json_paths(value, path=()):
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _json_paths(item, path + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value[:20]):
            yield from _json_paths(item, path + (index,))


def json_mutation(text: bytes, rng: random.Random) -> bytes:
    """Replace one value anywhere in a JSON document by a value from :data:`JSON_VALUES` (valid JSON out)."""
    try:
        document = json.loads(text)
    except ValueError:
        return byte_mutation(text, rng)
    paths = [p for p in _json_paths(document) if p]
    if not paths:
        return json.dumps(rng.choice(JSON_VALUES)).encode()
    path = rng.choice(paths)
    target = document
    for key in path[:-1]:
        target = target[key]
    if rng.random() < 0.15 and isinstance(target, dict):
        target[f"__{rng.choice(['class', 'pickle', 'weird'])}__"] = 1
    else:
        target[path[-1]] = rng.choice(JSON_VALUES)
    return json.dumps(document).encode()


def npy_header_mutation(npz: bytes, rng: random.Random) -> bytes:
    """Edit the header text of one array of an npz (dtype / shape / order)."""
    with zipfile.ZipFile(io.BytesIO(npz)) as archive:
        members = {info.filename: archive.read(info) for info in archive.infolist()}
    name = rng.choice(sorted(members))
    raw = members[name]
    header_end = raw.find(b"\n", 10) + 1
    header = raw[10:header_end].decode("latin1")
    replacements = [("'<f4'", rng.choice(["'<f8'", "'|O'", "'<U4'", "'(3,3)<f4'", "'<M8[s]'", "'|b1'", "'>f4'",
                                          "'<c16'", "()", "[('a',)]", "{}", "'<f4' + 'x'"])),
                    ("'fortran_order': False", "'fortran_order': " + rng.choice(["True", "1", "None"])),
                    ("'shape': (", f"'shape': ({rng.choice([0, 1, 7, 10 ** 9, 2 ** 40, 'True', '-1', '1.5'])}, "),
                    ("'shape': (", "'shape': (" + "1, " * rng.choice([33, 40, 65, 70]))]
    old, new = rng.choice(replacements)
    header = header.replace(old, new, 1)
    header = header.rstrip("\n").rstrip() + " " * 4 + "\n"
    members[name] = raw[:8] + len(header).to_bytes(2, "little") + header.encode("latin1") + raw[header_end:]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for member, payload in members.items():
            archive.writestr(member, payload)
    return buffer.getvalue()


def zip_mutation(data: bytes, rng: random.Random) -> bytes:
    """Mutate one member of a zip (byte-, JSON- or npy-level) and re-zip it, so the CRCs are valid."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = {info.filename: archive.read(info) for info in archive.infolist()}
    except (zipfile.BadZipFile, ValueError):
        return byte_mutation(data, rng)
    name = rng.choice(sorted(members))
    payload = members[name]
    roll = rng.random()
    if name == "parameters" and roll < 0.5:
        payload = npy_header_mutation(payload, rng)
    elif name != "parameters" and roll < 0.7:
        payload = json_mutation(payload, rng)
    elif roll < 0.8 and len(members) > 1:
        other = rng.choice(sorted(set(members) - {name}))
        payload = members[other]  # a member swapped for another
    else:
        payload = byte_mutation(payload, rng)
    members[name] = payload
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for member, content in members.items():
            archive.writestr(member, content)
    return buffer.getvalue()


_METHODS = [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA]


def compression_mutation(data: bytes, rng: random.Random) -> bytes:
    """Re-compress one member with another method (bzip2, lzma, deflate, stored) and make it lie: a declared size
    smaller or larger than its data (a bomb stopped at the declared size), a damaged stream, a wrong CRC."""
    import bz2
    import lzma
    import zlib

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = {info.filename: archive.read(info) for info in archive.infolist()}
    except (zipfile.BadZipFile, ValueError):
        return byte_mutation(data, rng)
    target = rng.choice(sorted(members))
    raw = []
    for name, payload in members.items():
        method = rng.choice(_METHODS) if name == target else zipfile.ZIP_DEFLATED
        if name == target and rng.random() < 0.3:
            payload = payload + bytes(rng.choice([1 << 16, 1 << 20, 8 << 20]))  # trailing zeros: inflates more
        if method == zipfile.ZIP_STORED:
            comp = payload
        elif method == zipfile.ZIP_DEFLATED:
            comp = zlib.compress(payload, 6)[2:-4]
        elif method == zipfile.ZIP_BZIP2:
            comp = bz2.compress(payload, 1)
        else:
            props = bytes([93]) + (1 << 20).to_bytes(4, "little")
            comp = b"\x09\x14\x05\x00" + props + lzma.compress(
                payload, format=lzma.FORMAT_RAW, filters=[{"id": lzma.FILTER_LZMA1, "preset": 0}])
        size, crc = len(payload), zlib.crc32(payload)
        if name == target:
            lie = rng.choice(["smaller", "larger", "damage", "crc", "original size"])
            if lie == "smaller":
                size = rng.randint(0, max(size - 1, 0))
                crc = zlib.crc32(payload[:size])
            elif lie == "larger":
                size += rng.randint(1, 1 << 20)
            elif lie == "damage" and comp:
                damaged = bytearray(comp)
                for _ in range(rng.randint(1, 16)):
                    damaged[rng.randrange(len(damaged))] ^= 1 << rng.randrange(8)
                comp = bytes(damaged)
            elif lie == "crc":
                crc ^= 1 << rng.randrange(32)
            else:
                size = len(members[name])
                crc = zlib.crc32(members[name])
            if method == zipfile.ZIP_STORED and size != len(comp):
                method = zipfile.ZIP_DEFLATED
                comp = zlib.compress(payload, 6)[2:-4]
        raw.append((name, method, comp, size, crc))
    return build_zip(raw)


_PUSHES = [b"\x8f", b"}", b"]", b"N", b"(", b")", b"\x88"]


def pickle_budget_mutation(data: bytes, rng: random.Random) -> bytes:
    """Insert a long run of one push opcode (EMPTY_SET, EMPTY_DICT, MARK, NONE...) somewhere, or give memo PUTs
    indices that all hash alike (``k * (2**61 - 1)``)."""
    if rng.random() < 0.6 or b"q" not in data[2:]:
        pos = rng.randrange(2, max(len(data), 3))
        run = rng.choice(_PUSHES) * rng.choice([10_000, 300_000, 3_000_000])
        return data[:pos] + run + data[pos:]
    start = data.index(b"q", 2)
    puts = b"".join(b"p%d\n" % (k * (2 ** 61 - 1)) for k in range(1, rng.choice([10, 3000, 30_000])))
    return data[:start] + puts + data[start:]


def pickle_zip_mutation(data: bytes, rng: random.Random) -> bytes:
    """A stable-baselines zip whose ``:serialized:`` pickle fields get :func:`pickle_budget_mutation`."""
    import base64

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = {info.filename: archive.read(info) for info in archive.infolist()}
        document = json.loads(members["data"])
    except (zipfile.BadZipFile, ValueError, KeyError):
        return byte_mutation(data, rng)
    fields = [k for k, v in document.items() if isinstance(v, dict) and ":serialized:" in v]
    if not fields:
        return zip_mutation(data, rng)
    field = rng.choice(fields)
    blob = base64.b64decode(document[field][":serialized:"])
    document[field][":serialized:"] = base64.b64encode(pickle_budget_mutation(blob, rng)).decode()
    members["data"] = json.dumps(document).encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for member, content in members.items():
            archive.writestr(member, content)
    return buffer.getvalue()


# ------------------------------------------------------------------------------------------------ seeds
Seed = Tuple[str, str, Path, List[Callable[[bytes, random.Random], bytes]]]


def seeds(good: Dict[str, Path]) -> List[Seed]:
    """(name, loader, file, mutators) of every file the fuzzer starts from."""
    found: List[Seed] = [
        ("sbtf_ppo2_zip", "any:PPO2", good["model"], [zip_mutation, zip_mutation, byte_mutation, compression_mutation]),
        ("sbtf_vecnormalize", "vecnorm", good["vecnorm"], [byte_mutation, pickle_budget_mutation]),
        ("sbtf_obs_rms", "running_average", good["stats"] / "obs_rms.pkl", [byte_mutation, pickle_budget_mutation]),
        ("sbtf_expert_npz", "expert", good["expert"], [compression_mutation, zip_mutation]),
    ]
    for algo, path in (("PPO2", SHARED_ZOO / "ppo2" / "CartPole-v1.pkl"),
                       ("DQN", SHARED_ZOO / "dqn" / "CartPole-v1.pkl"),
                       ("ACKTR", SHARED_ZOO / "acktr" / "Pendulum-v0.zip")):
        if path.exists():
            mutators = ([zip_mutation, byte_mutation, compression_mutation, pickle_zip_mutation]
                        if path.suffix == ".zip" else [byte_mutation, pickle_budget_mutation])
            found.append((f"sb2_{algo.lower()}_{path.suffix[1:]}", f"any:{algo}", path, mutators))
    stats = SHARED_ZOO / "ppo2" / "MountainCar-v0" / "obs_rms.pkl"
    if stats.exists():
        found.append(("sb2_obs_rms", "running_average", stats, [byte_mutation, pickle_budget_mutation]))
    return found


def make_mutants(good: Dict[str, Path], folder: Path, n: int, seed: int) -> List[Tuple[str, str, str, str]]:
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    cases = []
    all_seeds = seeds(good)
    for index in range(n):
        name, loader, path, mutators = all_seeds[index % len(all_seeds)]
        payload = rng.choice(mutators)(path.read_bytes(), rng)
        if loader == "running_average":  # a folder with the mutated obs_rms.pkl and the original ret_rms.pkl
            target = folder / f"m{index}"
            target.mkdir()
            (target / "obs_rms.pkl").write_bytes(payload)
            shutil.copy(path.parent / "ret_rms.pkl", target / "ret_rms.pkl")
        else:
            target = folder / f"m{index}_{path.name}"
            target.write_bytes(payload)
        cases.append((f"{name}#{index}", loader, str(target), "any"))
    return cases


def classify(results: dict, cases: list) -> Tuple[collections.Counter, list]:
    table: collections.Counter = collections.Counter()
    bad = []
    for name, *_ in cases:
        result = results.get(name, {"outcome": "missing", "peak_growth_mb": None, "detail": ""})
        outcome = result["outcome"]
        if outcome == "loaded" or outcome.startswith("typed:"):
            label = "loaded" if outcome == "loaded" else "typed error"
            if result["peak_growth_mb"] is not None and result["peak_growth_mb"] > MAX_PEAK_GROWTH_MB:
                label = "memory"
            elif result.get("message_chars", 0) > MAX_MESSAGE_CHARS:
                label = "unbounded message"
        elif outcome.startswith("crash") or outcome == "missing":
            label = "crash/timeout"
        elif outcome == "untyped:LoadedButCannotAct":
            label = "loaded, cannot act"
        else:
            label = "untyped error"
        table[label] += 1
        if label not in ("loaded", "typed error"):
            bad.append(f"{name}: {label} ({outcome} {result['detail'][:200]}) {result['peak_growth_mb']} MB")
    return table, bad


def fuzz(n: int, seed: int, folder: Path, batches: int = 4) -> Tuple[collections.Counter, list]:
    good = make_good_files(folder / "good")
    cases = make_mutants(good, folder / "mutants", n, seed)
    results: dict = {}
    size = max(1, (len(cases) + batches - 1) // batches)
    for start in range(0, len(cases), size):
        batch_results, _ = run_cases(good, cases[start:start + size], folder, timeout=1800)
        results.update(batch_results)
    return classify(results, cases)


def _assert_clean(table: collections.Counter, bad: list) -> None:
    assert not bad, f"outcomes {dict(table)}; {len(bad)} bad mutants:\n" + "\n".join(bad[:40])


def test_fuzz_default(tmp_path):
    table, bad = fuzz(240, seed=20261125, folder=tmp_path, batches=2)
    _assert_clean(table, bad)
    assert table["typed error"] > 0


@pytest.mark.slow
def test_fuzz_thousands(tmp_path):
    table, bad = fuzz(3000, seed=7, folder=tmp_path, batches=6)
    _assert_clean(table, bad)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    options = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sbtf_fuzz_"))
    outcome_table, failures = fuzz(options.n, options.seed, work, batches=max(1, options.n // 500))
    print("outcomes:", dict(outcome_table))
    print("\n".join(failures[:100]))
    shutil.rmtree(work, ignore_errors=True)
