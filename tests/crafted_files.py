"""Generators of crafted (hostile or broken) files for every loader, and of the good files they are made from.

Each case is ``(name, loader, filename, expect)``: ``loader`` names how the runner opens it
(:mod:`tests.load_runner`), ``expect`` is ``"error"`` (a typed ``ModelFileError``) or ``"load"`` (loads and acts like
the good file). The canary command of the hostile cases would create :data:`CANARY`.
"""
from __future__ import annotations

import base64
import bz2
import io
import json
import lzma
import os
import pickle
import struct
import zipfile
import zlib
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import numpy as np

CANARY = "/tmp/sbtf_crafted_canary"
SHARED_ZOO = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "sb2_zoo"
Case = Tuple[str, str, str, str]


# ------------------------------------------------------------------------------------------------ work bounds
def _high_water_mark() -> int:
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise OSError("no VmHWM")


def _reset_high_water_mark() -> bool:
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
            handle.write("5")
        _high_water_mark()
        return True
    except OSError:
        return False


def peak_memory_growth(action: Callable[[], object]) -> int:
    """
    How far the process's memory peak rose while ``action()`` ran (bytes), exceptions included: the resident-set
    high-water mark (reset first through ``/proc/self/clear_refs``: C allocations count too, at no cost), or the
    ``tracemalloc`` peak where that is not available. The work bound of the crafted-file tests: never seconds.
    """
    import tracemalloc

    if _reset_high_water_mark():
        with open("/proc/self/statm", encoding="ascii") as handle:
            start = int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        try:
            action()
        finally:
            growth = _high_water_mark() - start
        return max(growth, 0)
    tracemalloc.start()
    try:
        action()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


# ------------------------------------------------------------------------------------------------ good files
def make_good_files(folder: Path) -> Dict[str, Path]:
    """A small trained PPO2 zip, a VecNormalize file, an obs_rms/ret_rms pair, an expert npz and a replay buffer."""
    import gymnasium as gym

    from sbtf import PPO2
    from sbtf.common.buffers import ReplayBuffer
    from sbtf.common.vec_env import DummyVecEnv, VecNormalize

    folder.mkdir(parents=True, exist_ok=True)
    model = PPO2("MlpPolicy", "CartPole-v1", n_steps=64, nminibatches=1, noptepochs=1, seed=0)
    model.learn(128)
    model.save(folder / "good.zip")
    venv = VecNormalize(DummyVecEnv([lambda: gym.make("CartPole-v1")]))
    venv.reset()
    for _ in range(20):
        venv.step(np.array([venv.action_space.sample()]))
    venv.save(str(folder / "vecnormalize.pkl"))
    stats = folder / "stats"
    stats.mkdir(exist_ok=True)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        venv.save_running_average(str(stats))
    np.savez(folder / "expert.npz", actions=np.zeros((20, 1)), obs=np.zeros((20, 4), np.float32),
             rewards=np.ones(20), episode_returns=np.array([10.0, 10.0]),
             episode_starts=np.array([True] + [False] * 9 + [True] + [False] * 9))
    buffer = ReplayBuffer(50)
    for i in range(10):
        buffer.add(np.ones(4) * i, 0, 1.0, np.ones(4), False)
    buffer.save(str(folder / "buffer.npz"))
    return {"model": folder / "good.zip", "vecnorm": folder / "vecnormalize.pkl", "stats": stats,
            "expert": folder / "expert.npz", "buffer": folder / "buffer.npz"}


# ------------------------------------------------------------------------------------------------ zip helpers
def zip_members(path: Path) -> Dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def write_zip(path: Path, members: Dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, payload in members.items():
            archive.writestr(name, payload)
    return path


def with_data(good: Path, path: Path, edit: Callable[[dict], None]) -> Path:
    members = zip_members(good)
    data = json.loads(members["data"])
    edit(data)
    members["data"] = json.dumps(data).encode()
    return write_zip(path, members)


def npy_bytes(descr: str, shape: tuple, data: bytes = b"") -> bytes:
    header = repr({"descr": descr, "fortran_order": False, "shape": shape}).encode()
    header += b" " * (63 - (len(header) + 10) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + data


def with_param(good: Path, path: Path, payload: bytes) -> Path:
    """``good`` with its first parameter's .npy member replaced by ``payload``."""
    members = zip_members(good)
    first = json.loads(members["parameter_list"])[0]
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(members["parameters"])) as old, zipfile.ZipFile(buffer, "w") as new:
        for info in old.infolist():
            new.writestr(info.filename, payload if info.filename == first + ".npy" else old.read(info))
    members["parameters"] = buffer.getvalue()
    return write_zip(path, members)


def bomb_member(good: Path, path: Path, member: str, megabytes: int, fill: bytes = b"\0") -> Path:
    """``good`` with ``member`` replaced by ``megabytes`` MB of ``fill`` (deflated, streamed: cheap to make)."""
    members = zip_members(good)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, payload in members.items():
            if name != member:
                archive.writestr(name, payload)
        with archive.open(member, "w", force_zip64=True) as handle:
            chunk = fill * (1 << 20)
            for _ in range(megabytes):
                handle.write(chunk)
    return path


def cloudpickle_blob(command: str) -> str:
    class Boom:
        def __reduce__(self):
            return (os.system, (command,))

    return base64.b64encode(pickle.dumps(Boom())).decode()


# ------------------------------------------------------------------------------------------------ raw zips
# 1.2 GB (1,200,000,000 zero bytes) as one bzip2 stream: 881 bytes.
BZIP2_1200MB = base64.b64decode(
    "QlpoOTFBWSZTWQ4J4t8BX45AAMAAAAggADCATUZCoCWpCoCXMUFZJlNZDgni3wFfjkAAwAAACCAAMIBNRkKgJakKgJcxQVkmU1kOCeLfAV+OQA"
    "DAAAAIIAAwgE1GQqAlqQqAlzFBWSZTWQ4J4t8BX45AAMAAAAggADCATUZCoCWpCoCXMUFZJlNZDgni3wFfjkAAwAAACCAAMIBNRkKgJakKgJcx"
    "QVkmU1kOCeLfAV+OQADAAAAIIAAwgE1GQqAlqQqAlzFBWSZTWQ4J4t8BX45AAMAAAAggADCATUZCoCWpCoCXMUFZJlNZDgni3wFfjkAAwAAACC"
    "AAMIBNRkKgJakKgJcxQVkmU1kOCeLfAV+OQADAAAAIIAAwgE1GQqAlqQqAlzFBWSZTWQ4J4t8BX45AAMAAAAggADCATUZCoCWpCoCXMUFZJlNZ"
    "Dgni3wFfjkAAwAAACCAAMIBNRkKgJakKgJcxQVkmU1kOCeLfAV+OQADAAAAIIAAwgE1GQqAlqQqAlzFBWSZTWQ4J4t8BX45AAMAAAAggADCATU"
    "ZCoCWpCoCXMUFZJlNZDgni3wFfjkAAwAAACCAAMIBNRkKgJakKgJcxQVkmU1kOCeLfAV+OQADAAAAIIAAwgE1GQqAlqQqAlzFBWSZTWQ4J4t8B"
    "X45AAMAAAAggADCATUZCoCWpCoCXMUFZJlNZDgni3wFfjkAAwAAACCAAMIBNRkKgJakKgJcxQVkmU1kOCeLfAV+OQADAAAAIIAAwgE1GQqAlqQ"
    "qAlzFBWSZTWQ4J4t8BX45AAMAAAAggADCATUZCoCWpCoCXMUFZJlNZDgni3wFfjkAAwAAACCAAMIBNRkKgJakKgJcxQVkmU1kOCeLfAV+OQADA"
    "AAAIIAAwgE1GQqAlqQqAlzFBWSZTWQ4J4t8BX45AAMAAAAggADCATUZCoCWpCoCXMUFZJlNZDgni3wFfjkAAwAAACCAAMIBNRkKgJakKgJcxQV"
    "kmU1kOCeLfAV+OQADAAAAIIAAwgE1GQqAlqQqAlzFBWSZTWQ4J4t8BX45AAMAAAAggADCATUZCoCWpCoCXMUFZJlNZDgni3wFfjkAAwAAACCAA"
    "MIBNRkKgJakKgJcxQVkmU1mA48rwADK0QgDAAAEAAAggACClNBmMJSRbESki8XckU4UJAjPUyXA=")


Member = Tuple[str, int, bytes, int, int]   # (name, method, compressed bytes, declared size, crc)


def zip_member(name: str, payload: bytes, method: int = zipfile.ZIP_DEFLATED) -> Member:
    """A well-formed member holding ``payload``."""
    if method == zipfile.ZIP_STORED:
        comp = payload
    elif method == zipfile.ZIP_DEFLATED:
        comp = zlib.compress(payload, 6)[2:-4]
    elif method == zipfile.ZIP_BZIP2:
        comp = bz2.compress(payload)
    else:
        comp = lzma_member_stream(payload)
    return name, method, comp, len(payload), zlib.crc32(payload)


def lzma_member_stream(payload: bytes) -> bytes:
    """zip's LZMA layout: version, properties size, 5 property bytes (lc=3 lp=0 pb=2, 8 MiB window), raw LZMA1."""
    props = bytes([(2 * 5 + 0) * 9 + 3]) + (8 << 20).to_bytes(4, "little")
    raw = lzma.compress(payload, format=lzma.FORMAT_RAW, filters=[{"id": lzma.FILTER_LZMA1, "preset": 0}])
    return b"\x09\x14" + struct.pack("<H", 5) + props + raw


def build_zip(members: List[Member]) -> bytes:
    """A zip archive written byte by byte, so that sizes and CRCs can lie."""
    body, central = b"", b""
    for name, method, comp, size, crc in members:
        raw_name = name.encode()
        header = struct.pack("<4s5H3L2H", b"PK\x03\x04", 63, 0, method, 0, 0, crc, len(comp), size, len(raw_name), 0)
        central += struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 63, 63, 0, method, 0, 0, crc, len(comp), size,
                               len(raw_name), 0, 0, 0, 0, 0, len(body)) + raw_name
        body += header + raw_name + comp
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(members), len(members), len(central), len(body), 0)
    return body + central + end


def bomb(name: str, method: int, declared: int = 1000, inflated: int = 4 << 20, prefix: bytes = b"") -> Member:
    """A member declaring ``declared`` bytes whose stream inflates to ``prefix`` + ``inflated`` zero bytes."""
    if method == zipfile.ZIP_BZIP2 and not prefix and inflated >= 1_000_000_000:
        comp = BZIP2_1200MB
    else:
        _, _, comp, _, _ = zip_member(name, prefix + bytes(inflated), method)
    return name, method, comp, declared, zlib.crc32((prefix + bytes(inflated))[:declared])


def corrupt(name: str, method: int, size: int = 200_000) -> Member:
    """A member whose compressed stream is damaged in its middle (a valid start, then garbage)."""
    payload = np.random.default_rng(0).integers(0, 4, size, dtype=np.uint8).tobytes()
    _, _, comp, _, crc = zip_member(name, payload, method)
    damaged = bytearray(comp)
    for pos in range(len(damaged) // 3, len(damaged) // 3 + 64):
        damaged[pos] ^= 0xA5
    return name, method, bytes(damaged), size, crc


# ------------------------------------------------------------------------------------------------ pickle helpers
def p_global(module: str, name: str) -> bytes:
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def p_str(text: str) -> bytes:
    raw = text.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def p_int(value: int) -> bytes:
    raw = value.to_bytes((value.bit_length() + 8) // 8 or 1, "little", signed=True)
    return b"\x8a" + bytes([len(raw)]) + raw


def p_reduce(module: str, name: str, *args: bytes) -> bytes:
    return p_global(module, name) + b"(" + b"".join(args) + b"tR"


def pickle_with_obs_rms(value: bytes) -> bytes:
    """A VecNormalize-shaped pickle: ``{"obs_rms": <value>, "ret_rms": <value>}``."""
    return b"\x80\x02}(" + p_str("obs_rms") + value + p_str("ret_rms") + value + b"u."


def forged_dtype_array() -> bytes:
    """``_reconstruct(ndarray, (0,), b'b')`` + BUILD with a dtype whose BUILD state forges flags/itemsize."""
    dtype = (p_reduce("numpy", "dtype", p_str("f8"), b"\x89", b"\x88")  # dtype('f8', False, True)
             + b"(K\x03" + p_str("<") + b"NNN" + b"J\xff\xff\xff\x7f" + b"J\x01\x00\x00\x00" + b"K?tb")
    return (p_reduce("numpy.core.multiarray", "_reconstruct", p_global("numpy", "ndarray"), b"K\x00\x85",
                     b"C\x01b") + b"(K\x01K\x10\x85" + dtype + b"\x89" + b"B" + struct.pack("<I", 16) + b"A" * 16
            + b"tb")


def object_array() -> bytes:
    """An ndarray of dtype object whose data is a list (``_reconstruct`` + BUILD)."""
    return (p_reduce("numpy.core.multiarray", "_reconstruct", p_global("numpy", "ndarray"), b"K\x00\x85",
                     b"C\x01b")
            + b"(K\x01K\x02\x85" + p_reduce("numpy", "dtype", p_str("O8"), b"\x89", b"\x88")
            + b"\x89]" + p_str("a") + p_str("b") + b"\x86" + b"tb")


def colliding_dict(n: int) -> bytes:
    body = b"".join(p_int(k * (2 ** 61 - 1)) + b"K\x00" for k in range(1, n))
    return b"}(" + body + b"u"


def nested_lists(depth: int) -> bytes:
    return b"]" * depth + b"a" * (depth - 1)


SELF_REF = b"]q\x00h\x00a"


# ------------------------------------------------------------------------------------------------ the cases
def make_cases(good: Dict[str, Path], folder: Path) -> List[Case]:
    """Write every crafted file into ``folder``; return the cases."""
    folder.mkdir(parents=True, exist_ok=True)
    model = good["model"]
    cases: List[Case] = []

    def add(name: str, loader: str, path: Path, expect: str = "error") -> None:
        cases.append((name, loader, str(path), expect))

    touch = f"touch {CANARY}"
    # --- code execution through the sbtf zip's JSON data ---------------------------------------
    entries = {
        "enum_exec": {"__enum__": "builtins:exec", "value": f"open({CANARY!r}, 'w')"},
        "enum_system": {"__enum__": "os:system", "value": touch},
        "data_object_system": {"__data_object__": "os:system", "state": touch},
        "class_popen": {"__class__": "subprocess:Popen"},
        "pickle_blob": {"__pickle__": cloudpickle_blob(touch), "repr": "x", "type": "x:y"},
    }
    for name, entry in entries.items():
        path = with_data(model, folder / f"json_{name}.zip", lambda d, e=entry: d.update(gamma=e))
        add(f"json_{name}", "model", path)
        add(f"json_{name}_params", "params", path, "load")  # weights only: the data is not decoded
    path = with_data(model, folder / "json_callable_pickle.zip",
                     lambda d: d.update(learning_rate={"__callable__": {"repr": "f", "sampled": None,
                                                                        "pickle": cloudpickle_blob(touch)}}))
    add("json_callable_pickle", "model_stub_ok", path, "load")  # an inert stand-in, never unpickled
    for key in ("load_parameters", "predict", "_from_data", "set_env"):
        add(f"method_key_{key}", "model",
            with_data(model, folder / f"key_{key}.zip", lambda d, k=key: d.update({k: 1})), "load")
    # --- hangs, depth, memory in the sbtf zip ----------------------------------------------------
    add("json_colliding_keys", "model", with_data(
        model, folder / "json_collide.zip",
        lambda d: d.update(policy_kwargs={"__dict_items__": [[k * (2 ** 61 - 1), 0] for k in range(80000)]})))
    members = zip_members(model)
    members["data"] = b'{"gamma": ' + b"[" * 100000 + b"]" * 100000 + b"}"
    add("json_deep", "model", write_zip(folder / "json_deep.zip", members))
    add("npy_subarray_dtype", "model",
        with_param(model, folder / "npy_subarray.zip", npy_bytes("(20000,20000)<f4", (1,))))
    add("npy_huge_shape", "model", with_param(model, folder / "npy_shape.zip", npy_bytes("<f4", (20000, 20000))))
    add("npy_object", "model", with_param(model, folder / "npy_object.zip", npy_bytes("|O", (3,))))
    for name, array in (("strings", np.array(["a", "b"])), ("datetimes", np.array([1, 2], "M8[s]")),
                        ("bools", np.array([True, False])), ("uint64", np.array([1, 2], np.uint64))):
        buffer = io.BytesIO()
        np.save(buffer, array)
        add(f"param_{name}", "model", with_param(model, folder / f"param_{name}.zip", buffer.getvalue()))
    add("zip_bomb_data", "model", bomb_member(model, folder / "bomb_data.zip", "data", 300, b" "))
    add("zip_bomb_params", "model", bomb_member(model, folder / "bomb_params.zip", "parameters", 300))
    add("huge_layers", "model", with_data(model, folder / "huge_layers.zip",
                                          lambda d: d.update(policy_kwargs={"net_arch": [10 ** 6, 10 ** 6]})))
    add("huge_box", "model", with_data(model, folder / "huge_box.zip", lambda d: d.update(observation_space={
        "__space__": {"type": "Box", "low": 0, "high": 1, "shape": [100000, 100000], "dtype": "float32"}})))
    # --- malformed sbtf zips -----------------------------------------------------------------------
    for member, payload in (("data", b"[]"), ("sbtf_format", b"[1]"), ("parameter_list", b"{}"), ("data", b"\xff")):
        members = zip_members(model)
        members[member] = payload
        add(f"malformed_{member}_{len(cases)}", "model", write_zip(folder / f"malformed_{len(cases)}.zip", members))
    for member in ("data", "parameters", "parameter_list"):
        members = zip_members(model)
        del members[member]
        add(f"missing_{member}", "model", write_zip(folder / f"missing_{member}.zip", members))
    raw = model.read_bytes()
    for fraction in (0.1, 0.5, 0.9, 0.999):
        path = folder / f"truncated_{fraction}.zip"
        path.write_bytes(raw[: int(len(raw) * fraction)])
        add(f"truncated_{fraction}", "model", path)
    # --- legacy pickles: SB2 model, VecNormalize, running averages -----------------------------------
    hostile_pickles = {
        "reduce_system": b"\x80\x02" + p_reduce("os", "system", p_str(touch)) + b".",
        "reduce_posix": b"\x80\x02" + p_reduce("posix", "system", p_str(touch)) + b".",
        "reduce_eval": b"\x80\x02" + p_reduce("builtins", "eval", p_str(f"open({CANARY!r},'w')")) + b".",
        "bytes_bomb": b"\x80\x02" + p_reduce("builtins", "bytes", b"J\x00\x00\x00\xc8") + b".",
        "bytearray_bomb": b"\x80\x02" + p_reduce("builtins", "bytearray", b"J\x00\x00\x00\x7f") + b".",
        "codecs_chain": b"\x80\x02" + p_reduce("_codecs", "encode", p_reduce("_codecs", "encode", p_str("A" * 64),
                                                                             p_str("latin1")), p_str("hex")) + b".",
        "forged_dtype": b"\x80\x02" + pickle_with_obs_rms(forged_dtype_array())[2:],
        "object_array": b"\x80\x02" + pickle_with_obs_rms(object_array())[2:],
        "colliding_keys": b"\x80\x02" + colliding_dict(80000) + b".",
        "deep_lists": b"\x80\x02" + nested_lists(100000) + b".",
        "self_reference": b"\x80\x02" + SELF_REF + b".",
        "build_on_marker": b"\x80\x02" + p_global("stable_baselines.common.policies", "MlpPolicy")
                           + b"N}" + p_str("sb2_path") + p_str("x") + b"s\x86b.",
        "persistent_id": b"\x80\x02P0\n.",
    }
    for name, payload in hostile_pickles.items():
        for loader, suffix in (("model", ".pkl"), ("vecnorm", ".pkl")):
            path = folder / f"pickle_{name}_{loader}{suffix}"
            path.write_bytes(payload)
            add(f"pickle_{name}_{loader}", loader, path)
    vec_raw = good["vecnorm"].read_bytes()
    if b"<f8" in vec_raw:
        path = folder / "vecnorm_O8.pkl"
        path.write_bytes(vec_raw.replace(b"<f8", b"|O8", 1))
        add("vecnorm_f8_to_O8", "vecnorm", path)
    for fraction in (0.3, 0.7):
        path = folder / f"vecnorm_truncated_{fraction}.pkl"
        path.write_bytes(vec_raw[: int(len(vec_raw) * fraction)])
        add(f"vecnorm_truncated_{fraction}", "vecnorm", path)
    stats = folder / "stats_no_count"
    stats.mkdir(exist_ok=True)
    for name in ("obs_rms", "ret_rms"):
        (stats / f"{name}.pkl").write_bytes(pickle.dumps({"mean": np.zeros(4), "var": np.ones(4)}))
    add("running_average_no_count", "running_average", stats)
    stats = folder / "stats_hostile"
    stats.mkdir(exist_ok=True)
    (stats / "obs_rms.pkl").write_bytes(hostile_pickles["reduce_system"])
    (stats / "ret_rms.pkl").write_bytes(hostile_pickles["reduce_system"])
    add("running_average_system", "running_average", stats)
    # --- expert datasets and replay buffers -------------------------------------------------------------
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("obs.npy", npy_bytes("<f4", (500_000_000,)))
        archive.writestr("actions.npy", npy_bytes("<f4", (10,), bytes(40)))
    (folder / "expert_2gb.npz").write_bytes(buffer.getvalue())
    add("expert_2gb", "expert", folder / "expert_2gb.npz")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("obs.npy", npy_bytes("|O", (2,)))
    (folder / "expert_object.npz").write_bytes(buffer.getvalue())
    add("expert_object", "expert", folder / "expert_object.npz")
    buffer_raw = good["buffer"].read_bytes()
    (folder / "buffer_truncated.npz").write_bytes(buffer_raw[: len(buffer_raw) // 2])
    add("buffer_truncated", "buffer", folder / "buffer_truncated.npz")
    with zipfile.ZipFile(folder / "buffer_huge.npz", "w") as archive:
        for name in zipfile.ZipFile(good["buffer"]).namelist():
            archive.writestr(name, npy_bytes("<f8", (400_000_000,)))
    add("buffer_huge", "buffer", folder / "buffer_huge.npz")
    # --- the shared readers' budgets (issue #34) ----------------------------------------------------------------
    def raw_model(name: str, replace: Dict[str, Member]) -> Path:
        members = [replace.get(n, zip_member(n, p)) for n, p in zip_members(model).items()]
        path = folder / f"{name}.zip"
        path.write_bytes(build_zip(members))
        return path

    for target in ("data", "parameters"):
        add(f"bzip2_bomb_{target}", "model", raw_model(f"bzip2_bomb_{target}", {
            target: bomb(target, zipfile.ZIP_BZIP2, 1000, 1_200_000_000)}))
        add(f"bzip2_bomb_{target}_params", "params", raw_model(f"bzip2_bomb_{target}", {
            target: bomb(target, zipfile.ZIP_BZIP2, 1000, 1_200_000_000)}),
            "error" if target == "parameters" else "load")
    for method, label in ((zipfile.ZIP_DEFLATED, "deflate"), (zipfile.ZIP_LZMA, "lzma"), (zipfile.ZIP_BZIP2, "bzip2")):
        add(f"{label}_corrupt_parameters", "model", raw_model(f"{label}_corrupt_parameters", {
            "parameters": corrupt("parameters", method)}))
        add(f"{label}_corrupt_data", "model", raw_model(f"{label}_corrupt_data", {"data": corrupt("data", method)}))
        add(f"{label}_short_declared_data", "model", raw_model(f"{label}_short_declared_data", {
            "data": bomb("data", method, 1000, 1 << 20)}))
    for label, (descr, shape) in {"descr_empty_tuple": ((), (3,)), "shape_true": ("<f4", (True,)),
                                  "shape_40_dims": ("<f4", (1,) * 40), "shape_70_dims": ("<f4", (1,) * 70)}.items():
        add(f"npy_{label}", "model", with_param(model, folder / f"npy_{label}.zip", npy_bytes(descr, shape, bytes(12))))
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            archive.writestr("obs.npy", npy_bytes(descr, shape, bytes(12)))
        (folder / f"expert_npy_{label}.npz").write_bytes(buffer.getvalue())
        add(f"expert_npy_{label}", "expert", folder / f"expert_npy_{label}.npz")
    header = npy_bytes("<f4", (218,))
    (folder / "expert_bzip2_bomb.npz").write_bytes(build_zip([bomb("obs.npy", zipfile.ZIP_BZIP2, len(header) + 872,
                                                                   16 << 20, prefix=header)]))
    add("expert_bzip2_bomb", "expert", folder / "expert_bzip2_bomb.npz")
    (folder / "expert_lzma_corrupt.npz").write_bytes(build_zip([corrupt("obs.npy", zipfile.ZIP_LZMA)]))
    add("expert_lzma_corrupt", "expert", folder / "expert_lzma_corrupt.npz")
    budget_pickles = {
        "empty_sets_3M": b"\x80\x04" + b"\x8f" * 3_000_000 + b".",
        "marks_3M": b"\x80\x04" + b"(" * 3_000_000 + b"N.",
        "memo_colliding_puts": b"\x80\x02N" + b"".join(b"p%d\n" % (k * (2 ** 61 - 1)) for k in range(1, 30_001)) + b".",
    }
    for name, payload in budget_pickles.items():
        for loader in ("vecnorm", "model"):
            path = folder / f"budget_{name}_{loader}.pkl"
            path.write_bytes(payload)
            add(f"budget_{name}_{loader}", loader, path)
    add("json_empty_objects_1M", "model", with_data(model, folder / "json_braces.zip",
                                                    lambda d: d.update(gamma=[{}] * 1_000_000)))
    add("json_colliding_dicts_80x4096", "model", with_data(model, folder / "json_collide_80.zip", lambda d: d.update(
        policy_kwargs={"__dict_items__": [[i, {"__dict_items__": [[k * (2 ** 61 - 1), 0] for k in range(1, 4097)]}]
                                          for i in range(80)]})))
    sb2_zip = SHARED_ZOO / "acktr" / "Pendulum-v0.zip"
    if sb2_zip.exists():
        members = zip_members(sb2_zip)
        data = json.loads(members["data"])
        data["observation_space"][":serialized:"] = base64.b64encode(
            b"\x80\x04" + b"\x8f" * 3_000_000 + b".").decode()
        path = folder / "sb2_zip_serialized_empty_sets.zip"
        path.write_bytes(build_zip([zip_member(n, json.dumps(data).encode() if n == "data" else p)
                                    for n, p in members.items()]))
        add("sb2_zip_serialized_empty_sets", "any:ACKTR", path)
        path = folder / "sb2_zip_bzip2_bomb.zip"
        path.write_bytes(build_zip([bomb(n, zipfile.ZIP_BZIP2, 1000, 1_200_000_000) if n == "parameters"
                                    else zip_member(n, p) for n, p in members.items()]))
        add("sb2_zip_bzip2_bomb", "any:ACKTR", path)
    # --- real SB2 files with hostile edits (when the shared fixtures are there) --------------------------
    zoo_ppo2 = SHARED_ZOO / "ppo2" / "CartPole-v1.pkl"
    if zoo_ppo2.exists():
        raw = zoo_ppo2.read_bytes()
        path = folder / "sb2_with_system.pkl"
        # replace the policy reference by os.system: a reference that is called would run the command
        path.write_bytes(raw.replace(b"stable_baselines.common.policies\nMlpPolicy\n", b"os\nsystem\n", 1)
                         if b"stable_baselines.common.policies\nMlpPolicy\n" in raw else
                         b"\x80\x02" + p_reduce("os", "system", p_str(touch)) + b".")
        add("sb2_pkl_policy_is_system", "model", path)
        for fraction in (0.2, 0.6):
            path = folder / f"sb2_truncated_{fraction}.pkl"
            path.write_bytes(raw[: int(len(raw) * fraction)])
            add(f"sb2_truncated_{fraction}", "model", path)
    return cases
