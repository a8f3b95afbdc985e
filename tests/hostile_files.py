"""Generators of hostile and broken files for every sbtf loader (issue 12), and of the good files they start from.

Everything here is written from scratch (a small pickle assembler, a raw zip writer, deflate/bzip2 bomb builders) so
that the files are exactly the ones described, whatever sbtf's own readers do. Nothing here imports sbtf except
:func:`make_good_files`, which trains the tiny good models (run it in a child: ``python tests/hostile_files.py good
DIR``). The files are small: a few bytes to ~2 MB (the bombs announce gigabytes).

A :class:`Case` names a file, the loader that opens it (see ``tests/hostile_runner.py``), what is acceptable
(``expect``: ``"error"`` = a typed ``ModelFileError``; ``"any"`` = a typed error or a correct load; ``"load"`` = must
load correctly) and ``ref``: the good file whose results a load must reproduce (predictions, statistics).

:func:`ensure_files` builds everything once per test session (several pytest-xdist workers share one copy under a
file lock) and returns the goods, the crafted cases and the CLI cases.
"""
from __future__ import annotations

import base64
import bz2
import dataclasses
import fcntl
import io
import json
import os
import pickle
import pickletools
import re
import struct
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

import numpy as np

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures"
ZOO = FIXTURES / "sb2_zoo"
EXPERT_FIXTURES = FIXTURES / "sb2_expert"
GENERATOR_VERSION = "7"   # bump to rebuild cached files

MiB = 1 << 20
GiB = 1 << 30


def fixtures_present() -> bool:
    """True when ../shared/fixtures (real stable-baselines 2 files) is there (it is not in a fresh clone)."""
    return (ZOO / "ppo2" / "CartPole-v1.pkl").exists()


# ================================================================================================
# a pickle assembler: emits opcodes, so a file can name any global, BUILD anything, forge anything
# ================================================================================================
class Raw(bytes):
    """Already-assembled pickle opcodes (pushes exactly one value)."""


def g(module: str, name: str) -> Raw:
    """GLOBAL ``module.name``."""
    return Raw(b"c" + module.encode() + b"\n" + name.encode() + b"\n")


def g4(module: str, name: str) -> Raw:
    """STACK_GLOBAL (protocol 4 spelling of a global)."""
    return Raw(_str(module) + _str(name) + b"\x93")


def _str(text: str) -> bytes:
    raw = text.encode("utf-8", "surrogatepass")
    return b"X" + struct.pack("<I", len(raw)) + raw


def _int(value: int) -> bytes:
    if 0 <= value < 256:
        return b"K" + bytes([value])
    if 0 <= value < 65536:
        return b"M" + struct.pack("<H", value)
    if -(1 << 31) <= value < (1 << 31):
        return b"J" + struct.pack("<i", value)
    raw = value.to_bytes((value.bit_length() + 8) // 8, "little", signed=True)
    if len(raw) < 256:
        return b"\x8a" + bytes([len(raw)]) + raw
    return b"\x8b" + struct.pack("<I", len(raw)) + raw


def enc(value: Any) -> bytes:
    """Opcodes that push ``value`` (plain Python data, numpy arrays SB2-style, or :class:`Raw`)."""
    if isinstance(value, Raw):
        return bytes(value)
    if value is None:
        return b"N"
    if value is True:
        return b"\x88"
    if value is False:
        return b"\x89"
    if isinstance(value, int):
        return _int(value)
    if isinstance(value, float):
        return b"G" + struct.pack(">d", value)
    if isinstance(value, str):
        return _str(value)
    if isinstance(value, (bytes, bytearray)):
        return b"B" + struct.pack("<I", len(value)) + bytes(value)
    if isinstance(value, np.ndarray):
        return bytes(np_array(value))
    if isinstance(value, tuple):
        if not value:
            return b")"
        if len(value) <= 3:
            return b"".join(enc(v) for v in value) + {1: b"\x85", 2: b"\x86", 3: b"\x87"}[len(value)]
        return b"(" + b"".join(enc(v) for v in value) + b"t"
    if isinstance(value, list):
        return b"]" + (b"(" + b"".join(enc(v) for v in value) + b"e" if value else b"")
    if isinstance(value, dict):
        return b"}" + (b"(" + b"".join(enc(k) + enc(v) for k, v in value.items()) + b"u" if value else b"")
    raise TypeError(f"cannot assemble {type(value).__name__}")


def call(func: bytes, *args: Any) -> Raw:
    """``func(*args)`` (REDUCE)."""
    return Raw(bytes(func) + enc(tuple(args)) + b"R")


def build(obj: bytes, state: Any) -> Raw:
    """``obj`` then BUILD ``state``."""
    return Raw(bytes(obj) + enc(state) + b"b")


def newobj(cls: bytes, args: tuple = ()) -> Raw:
    return Raw(bytes(cls) + enc(args) + b"\x81")


def pkl(value: Any, protocol: int = 3) -> bytes:
    """A whole pickle file pushing ``value``."""
    return b"\x80" + bytes([protocol]) + enc(value) + b"."


def np_dtype(descr: str, state: Optional[tuple] = None) -> Raw:
    """``numpy.dtype(descr, False, True)`` + BUILD ``state`` (default: what numpy writes for ``descr``)."""
    if state is None:
        dt = np.dtype(descr)
        state = (3, "|" if dt.itemsize == 1 or dt.byteorder == "|" else "<", None, None, None, -1, -1, 0)
    return build(call(g("numpy", "dtype"), descr, False, True), state)


def np_array(array: np.ndarray, dtype_ops: Optional[bytes] = None, data: Optional[bytes] = None,
             shape: Optional[tuple] = None) -> Raw:
    """An ndarray as stable-baselines' pickles hold it: ``_reconstruct(ndarray, (0,), b'b')`` + BUILD."""
    array = np.ascontiguousarray(array)
    dtype_ops = dtype_ops if dtype_ops is not None else np_dtype(array.dtype.str.lstrip("<|>"))
    state = (1, tuple(array.shape) if shape is None else shape, Raw(dtype_ops), False,
             array.tobytes() if data is None else data)
    return build(call(g("numpy.core.multiarray", "_reconstruct"), Raw(g("numpy", "ndarray")), (0,), b"b"), state)


def rms_object(mean: Any, var: Any, count: Any = 100.0, module: str = "stable_baselines.common.running_mean_std"
               ) -> Raw:
    """A stable-baselines ``RunningMeanStd`` object (NEWOBJ + BUILD of its ``__dict__``)."""
    return build(newobj(g(module, "RunningMeanStd")), {"mean": mean, "var": var, "count": count})


def strip_frames(raw: bytes) -> bytes:
    """The pickle without its FRAME opcodes (so opcodes can be inserted anywhere)."""
    ops = list(pickletools.genops(raw))
    out = bytearray()
    for index, (op, _arg, pos) in enumerate(ops):
        end = ops[index + 1][2] if index + 1 < len(ops) else len(raw)
        if op.name != "FRAME":
            out += raw[pos:end]
    return bytes(out)


def explicit_memo(raw: bytes) -> bytes:
    """The pickle without FRAME opcodes and with every MEMOIZE replaced by an explicit LONG_BINPUT of the index it
    stood for, so that opcodes inserted later (with their own memo indices) do not shift the file's references."""
    raw = strip_frames(raw)
    ops = list(pickletools.genops(raw))
    out = bytearray()
    keys: set = set()
    for index, (op, arg, pos) in enumerate(ops):
        end = ops[index + 1][2] if index + 1 < len(ops) else len(raw)
        if op.name == "MEMOIZE":
            out += b"r" + struct.pack("<I", len(keys))
            keys.add(len(keys))
            continue
        if op.name in ("PUT", "BINPUT", "LONG_BINPUT"):
            keys.add(int(arg))
        out += raw[pos:end]
    return bytes(out)


def insert_into_first_dict(raw: bytes, key: str, value_ops: bytes) -> bytes:
    """Add ``key: value`` at the start of the first dict of a pickle (an SB2 file's ``data``)."""
    raw = explicit_memo(raw)
    ops = list(pickletools.genops(raw))
    for index, (op, _arg, _pos) in enumerate(ops):
        if op.name == "EMPTY_DICT":
            following = ops[index + 1:index + 4]
            for op2, _a2, pos2 in following:
                if op2.name == "MARK":
                    at = pos2 + 1
                    return raw[:at] + enc(key) + value_ops + raw[at:]
                if op2.name not in ("BINPUT", "LONG_BINPUT", "PUT"):
                    break
    raise ValueError("no dict built with MARK/SETITEMS in this pickle")


# ================================================================================================
# bombs: deflate / zlib / bzip2 streams that expand to gigabytes, built without ever holding them
# ================================================================================================
_CHUNK = 64 * MiB
_CACHE: Dict[Any, Any] = {}


def _deflate_block(fill: bytes, chunk: int) -> Tuple[bytes, bytes]:
    """(compressed chunk after a full flush, final empty block): a full flush resets the compressor, so every
    chunk of the same bytes compresses to the same bytes, which can simply be repeated."""
    key = ("deflate", fill, chunk)
    if key not in _CACHE:
        comp = zlib.compressobj(9, zlib.DEFLATED, -15)
        block = comp.compress(fill * chunk) + comp.flush(zlib.Z_FULL_FLUSH)
        again = comp.compress(fill * chunk) + comp.flush(zlib.Z_FULL_FLUSH)
        assert block == again
        _CACHE[key] = (block, comp.flush(zlib.Z_FINISH))
    return _CACHE[key]


def _repeat_checksum(func: Callable[[bytes, int], int], start: int, fill: bytes, chunk: int, count: int) -> int:
    data = fill * chunk
    value = start
    for _ in range(count):
        value = func(data, value)
    return value


def deflate_bomb(total: int, fill: bytes = b"\0", prefix: bytes = b"", chunk: int = _CHUNK) -> Tuple[bytes, int, int]:
    """Raw deflate of ``prefix + fill * total``: (compressed, crc32, uncompressed size)."""
    assert total % chunk == 0
    block, tail = _deflate_block(fill, chunk)
    head = b""
    if prefix:
        comp = zlib.compressobj(9, zlib.DEFLATED, -15)
        head = comp.compress(prefix) + comp.flush(zlib.Z_FULL_FLUSH)
    crc = _repeat_checksum(zlib.crc32, zlib.crc32(prefix), fill, chunk, total // chunk)
    return head + block * (total // chunk) + tail, crc, len(prefix) + total


def zlib_bomb(total: int, chunk: int = 16 * MiB) -> bytes:
    """A zlib-format stream (what ``zlib_codec`` decodes) of ``total`` zero bytes, ~1/1000 of that size."""
    block, tail = _deflate_block(b"\0", chunk)
    adler = _repeat_checksum(zlib.adler32, 1, b"\0", chunk, total // chunk)
    return b"\x78\xda" + block * (total // chunk) + tail + struct.pack(">I", adler)


def bzip2_bomb(total_blocks: int = 24, block_input: int = 40 * MiB) -> Tuple[bytes, int]:
    """A bzip2 stream of ``total_blocks * block_input`` zero bytes (~1 GB from ~1 KB): one compressed block, repeated
    bit by bit, with the stream's combined CRC recomputed. Returns (stream, uncompressed size)."""
    key = ("bz2", total_blocks, block_input)
    if key in _CACHE:
        return _CACHE[key]
    single = bz2.compress(bytes(block_input), 9)
    bits = int.from_bytes(single, "big")
    nbits = len(single) * 8
    eos_magic = 0x177245385090
    for pad in range(8):
        tail = (bits >> pad) & ((1 << 80) - 1)
        if tail >> 32 == eos_magic:
            block_crc = tail & 0xFFFFFFFF
            eos_start = nbits - pad - 80
            break
    else:  # pragma: no cover
        raise RuntimeError("no bzip2 end-of-stream marker found")
    block_len = eos_start - 32
    block_bits = (bits >> (nbits - eos_start)) & ((1 << block_len) - 1)
    combined = 0
    out = int.from_bytes(b"BZh9", "big")
    for _ in range(total_blocks):
        out = (out << block_len) | block_bits
        combined = (((combined << 1) | (combined >> 31)) & 0xFFFFFFFF) ^ block_crc
    out = (out << 80) | (eos_magic << 32) | combined
    total_bits = 32 + block_len * total_blocks + 80
    pad = (-total_bits) % 8
    out <<= pad
    stream = out.to_bytes((total_bits + pad) // 8, "big")
    _CACHE[key] = (stream, total_blocks * block_input)
    return _CACHE[key]


# ================================================================================================
# zip / npy helpers
# ================================================================================================
def zip_members(path: Path) -> Dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {info.filename: archive.read(info) for info in archive.infolist()}


def zip_bytes(members: Dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as archive:
        for name, payload in members.items():
            archive.writestr(name, payload)
    return buffer.getvalue()


@dataclasses.dataclass
class RawMember:
    """A zip member written as given: ``data`` is already compressed with ``method``; sizes and CRC may lie."""

    name: str
    data: bytes
    method: int = 0
    crc: int = 0
    size: int = 0

    @classmethod
    def stored(cls, name: str, payload: bytes) -> "RawMember":
        return cls(name, payload, 0, zlib.crc32(payload), len(payload))

    @classmethod
    def deflated(cls, name: str, payload: bytes) -> "RawMember":
        comp = zlib.compressobj(6, zlib.DEFLATED, -15)
        return cls(name, comp.compress(payload) + comp.flush(), 8, zlib.crc32(payload), len(payload))


def raw_zip(members: List[RawMember], extra_central: Iterable[Tuple[int, str]] = ()) -> bytes:
    """A zip archive written byte by byte (no zip64). ``extra_central``: more central-directory entries as
    (index of the member whose local header they point at, name)."""
    out = bytearray()
    offsets = []
    for member in members:
        offsets.append(len(out))
        name = member.name.encode()
        needed = {0: 10, 8: 20, 12: 46, 14: 63}.get(member.method, 20)
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, needed, 0, member.method, 0, 0x21, member.crc,
                           len(member.data), member.size, len(name), 0) + name + member.data
    central = bytearray()
    entries = [(i, m.name) for i, m in enumerate(members)] + list(extra_central)
    for index, name_text in entries:
        member = members[index]
        name = name_text.encode()
        needed = {0: 10, 8: 20, 12: 46, 14: 63}.get(member.method, 20)
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0x031E, needed, 0, member.method, 0, 0x21,
                               member.crc, len(member.data), member.size, len(name), 0, 0, 0, 0, 0o644 << 16,
                               offsets[index]) + name
    start = len(out)
    out += central
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(entries), len(entries), len(central), start, 0)
    return bytes(out)


def npy_header(descr: str, shape: tuple, fortran: bool = False, text: Optional[str] = None) -> bytes:
    """An ``.npy`` version-1 header (``text`` replaces the dict text verbatim)."""
    header = (text if text is not None else repr({"descr": descr, "fortran_order": fortran, "shape": shape})).encode(
        "latin1")
    header += b" " * ((63 - (len(header) + 10) % 64) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header


def npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def sbtf_zip_with(good: Path, edit: Callable[[Dict[str, bytes]], None]) -> bytes:
    """The members of a good sbtf zip, edited by ``edit(members)``, zipped again (valid CRCs)."""
    members = zip_members(good)
    edit(members)
    return zip_bytes(members)


def with_data(good: Path, edit: Callable[[dict], Any]) -> bytes:
    """A good sbtf zip whose JSON ``data`` was changed by ``edit(data)`` (which may return a new document)."""
    def apply(members: Dict[str, bytes]) -> None:
        data = json.loads(members["data"])
        new = edit(data)
        members["data"] = json.dumps(data if new is None else new).encode()
    return sbtf_zip_with(good, apply)


def with_data_raw(good: Path, key: str, json_text: bytes) -> bytes:
    """A good sbtf zip whose ``data[key]`` is the JSON text ``json_text`` (deeper than ``json`` can write)."""
    def apply(members: Dict[str, bytes]) -> None:
        data = json.loads(members["data"])
        data[key] = "@@PLACEHOLDER@@"
        members["data"] = json.dumps(data).encode().replace(b'"@@PLACEHOLDER@@"', json_text)
    return sbtf_zip_with(good, apply)


def param_names(good: Path) -> List[str]:
    return json.loads(zip_members(good)["parameter_list"])


def with_params(good: Path, edit: Callable[[Dict[str, bytes]], None]) -> bytes:
    """A good sbtf zip whose inner ``parameters`` npz members (``name.npy`` -> bytes) were changed by ``edit``."""
    def apply(members: Dict[str, bytes]) -> None:
        inner = {}
        with zipfile.ZipFile(io.BytesIO(members["parameters"])) as archive:
            for info in archive.infolist():
                inner[info.filename] = archive.read(info)
        edit(inner)
        members["parameters"] = zip_bytes(inner, zipfile.ZIP_STORED)
    return sbtf_zip_with(good, apply)


def first_param_as(good: Path, convert: Callable[[np.ndarray], np.ndarray]) -> bytes:
    """The first parameter stored as ``convert(value)`` (another dtype, byte order, layout...)."""
    first = param_names(good)[0] + ".npy"

    def edit(inner: Dict[str, bytes]) -> None:
        value = np.load(io.BytesIO(inner[first]), allow_pickle=False)
        inner[first] = npy_bytes(convert(value))
    return with_params(good, edit)


def first_param_raw(good: Path, payload: bytes) -> bytes:
    first = param_names(good)[0] + ".npy"

    def edit(inner: Dict[str, bytes]) -> None:
        inner[first] = payload
    return with_params(good, edit)


def cloudpickle_blob(command: str) -> str:
    """base64 of a pickle whose loading runs ``os.system(command)`` (what a cloudpickled value can hide)."""
    return base64.b64encode(pkl(call(g("os", "system"), command), protocol=4)).decode()


# ================================================================================================
# good files
# ================================================================================================
@dataclasses.dataclass
class Good:
    """A good file: ``loader`` as in hostile_runner (``model:PPO2``...)."""

    name: str
    loader: str
    path: str

    def as_spec(self) -> Dict[str, str]:
        return {"loader": self.loader, "path": self.path}


def make_good_files(folder: Path) -> None:
    """Train and save the small good files (needs sbtf; ~20 s): PPO2 and DQN zips, VecNormalize file, obs_rms /
    ret_rms pair, expert dataset, replay buffer."""
    import warnings

    import gymnasium as gym

    from sbtf import DQN, PPO2
    from sbtf.common.vec_env import DummyVecEnv, VecNormalize

    warnings.simplefilter("ignore")
    folder.mkdir(parents=True, exist_ok=True)
    ppo = PPO2("MlpPolicy", "CartPole-v1", n_steps=64, nminibatches=1, noptepochs=1, seed=0, verbose=0)
    ppo.learn(256)
    ppo.save(str(folder / "sbtf_ppo2.zip"))
    dqn = DQN("MlpPolicy", "CartPole-v1", learning_starts=64, buffer_size=400, target_network_update_freq=50,
              seed=0, verbose=0)
    dqn.learn(256)
    dqn.save(str(folder / "sbtf_dqn.zip"))
    dqn.save_replay_buffer(str(folder / "sbtf_buffer.npz"))
    venv = VecNormalize(DummyVecEnv([lambda: gym.make("CartPole-v1")]))
    venv.reset()
    rng = np.random.RandomState(0)
    for _ in range(50):
        venv.step(np.array([rng.randint(2)]))
    venv.save(str(folder / "vecnormalize.pkl"))
    (folder / "stats").mkdir(exist_ok=True)
    venv.save_running_average(str(folder / "stats"))
    # an expert dataset played by the PPO2 model (SB2's format)
    env = gym.make("CartPole-v1")
    obs_list, actions, rewards, starts, returns = [], [], [], [], []
    for episode in range(3):
        obs, _ = env.reset(seed=episode)
        done, total, first = False, 0.0, True
        while not done and len(obs_list) < 300:
            action, _ = ppo.predict(obs, deterministic=True)
            obs_list.append(obs)
            actions.append([int(action)])
            starts.append(first)
            first = False
            obs, reward, terminated, truncated, _ = env.step(int(action))
            rewards.append(reward)
            total += reward
            done = terminated or truncated
        returns.append(total)
    np.savez(folder / "expert.npz", obs=np.array(obs_list, np.float32), actions=np.array(actions, np.int64),
             rewards=np.array(rewards, np.float64), episode_returns=np.array(returns, np.float64),
             episode_starts=np.array(starts, bool))
    (folder / "DONE").write_text("ok")


def good_files(folder: Path) -> Dict[str, Good]:
    """The goods (own files in ``folder``, plus the SB2 fixtures when ../shared/fixtures is there)."""
    goods = {
        "sbtf_ppo2": Good("sbtf_ppo2", "model:PPO2", str(folder / "sbtf_ppo2.zip")),
        "sbtf_dqn": Good("sbtf_dqn", "model:DQN", str(folder / "sbtf_dqn.zip")),
        "sbtf_vecnorm": Good("sbtf_vecnorm", "vecnorm:CartPole-v1", str(folder / "vecnormalize.pkl")),
        "sbtf_stats": Good("sbtf_stats", "running_average:CartPole-v1", str(folder / "stats")),
        "sbtf_expert": Good("sbtf_expert", "expert", str(folder / "expert.npz")),
        "sbtf_buffer": Good("sbtf_buffer", "buffer", str(folder / "sbtf_buffer.npz")),
    }
    if fixtures_present():
        goods.update({
            "sb2_ppo2_pkl": Good("sb2_ppo2_pkl", "model:PPO2", str(ZOO / "ppo2" / "CartPole-v1.pkl")),
            "sb2_dqn_pkl": Good("sb2_dqn_pkl", "model:DQN", str(ZOO / "dqn" / "CartPole-v1.pkl")),
            "sb2_sac_pkl": Good("sb2_sac_pkl", "model:SAC", str(ZOO / "sac" / "Pendulum-v0.pkl")),
            "sb2_a2c_pkl": Good("sb2_a2c_pkl", "model:A2C", str(ZOO / "a2c" / "CartPole-v1.pkl")),
            "sb2_acktr_zip": Good("sb2_acktr_zip", "model:ACKTR", str(ZOO / "acktr" / "Pendulum-v0.zip")),
            "sb2_stats": Good("sb2_stats", "running_average:MountainCar-v0", str(ZOO / "ppo2" / "MountainCar-v0")),
        })
        if (EXPERT_FIXTURES / "expert_cartpole.npz").exists():
            goods["sb2_expert"] = Good("sb2_expert", "expert", str(EXPERT_FIXTURES / "expert_cartpole.npz"))
    return goods


# ================================================================================================
# crafted cases
# ================================================================================================
@dataclasses.dataclass
class Case:
    """One crafted file and how it must be opened and judged (see the module docstring)."""

    name: str
    group: str
    loader: str
    path: str
    expect: str = "error"
    ref: Optional[str] = None
    after: List[str] = dataclasses.field(default_factory=list)
    args: Dict[str, Any] = dataclasses.field(default_factory=dict)
    note: str = ""

    def as_spec(self) -> Dict[str, Any]:
        return {"name": self.name, "loader": self.loader, "path": self.path, "ref": self.ref, "after": self.after,
                "args": self.args}


@dataclasses.dataclass
class CliCase:
    """``sbtf <argv>`` run in ``cwd``: must exit 0 or fail with one ``error:`` line; never a traceback, a canary,
    a hang or gigabytes. ``must_fail``: exit 0 is wrong too."""

    name: str
    argv: List[str]
    cwd: str
    must_fail: bool = True
    note: str = ""


class _Writer:
    def __init__(self, folder: Path, canary: str):
        self.folder = folder
        self.canary = canary
        self.cases: List[Case] = []
        folder.mkdir(parents=True, exist_ok=True)

    def file(self, name: str, payload: bytes, suffix: str) -> Path:
        path = self.folder / (name.replace("/", "__") + suffix)
        path.write_bytes(payload)
        return path

    def add(self, group: str, name: str, loader: str, path: Path, expect: str = "error", ref: Optional[str] = None,
            after: Optional[List[str]] = None, note: str = "", **args: Any) -> None:
        self.cases.append(Case(f"{group}/{name}", group, loader, str(path), expect, ref, list(after or []), args, note))


# ------------------------------------------------------------------------------------------------ payloads
def hostile_pickle_payloads(canary: str) -> Dict[str, Tuple[str, bytes]]:
    """name -> (kind, opcodes pushing one value). Kinds: exec, build, forge, memory, hash, depth, selfref."""
    touch = f"touch {canary}"
    write = f"open({canary!r}, 'w').close()"
    box_marker = g("stable_baselines.common.policies", "MlpPolicy")
    payloads: Dict[str, Tuple[str, bytes]] = {
        # --- code execution --------------------------------------------------------------------------
        "reduce_os_system": ("exec", call(g("os", "system"), touch)),
        "reduce_posix_system": ("exec", call(g("posix", "system"), touch)),
        "reduce_builtins_eval": ("exec", call(g("builtins", "eval"), write)),
        "reduce_builtins_exec": ("exec", call(g("builtins", "exec"), write)),
        "reduce_py2_builtin_eval": ("exec", call(g("__builtin__", "eval"), write)),
        "reduce_stack_global_system": ("exec", call(g4("os", "system"), touch)),
        "reduce_subprocess_popen": ("exec", call(g("subprocess", "check_call"), ["sh", "-c", touch])),
        "reduce_getattr_import": ("exec", call(call(g("builtins", "getattr"), call(g("builtins", "__import__"), "os"),
                                                    "system"), touch)),
        "inst_os_system": ("exec", Raw(b"(" + _str(touch) + b"ios\nsystem\n")),
        "obj_os_system": ("exec", Raw(b"(" + g("os", "system") + _str(touch) + b"o")),
        "newobj_popen": ("exec", newobj(g("subprocess", "Popen"), (["sh", "-c", touch],))),
        "copyreg_reconstructor": ("exec", call(g("copyreg", "_reconstructor"), Raw(g("subprocess", "Popen")),
                                               Raw(g("builtins", "object")), None)),
        "persistent_id": ("exec", Raw(b"P" + touch.encode() + b"\n")),
        "ext_code": ("exec", Raw(b"\x82\x01")),
        "pickle_module_reduce": ("exec", Raw(pickletools.optimize(pickle.dumps(_SystemCall(touch), protocol=2))[2:-1])),
        # --- BUILD with slot state onto stand-ins / shared classes ----------------------------------
        "build_slots_policy_marker": ("build", build(box_marker, (None, {
            "sb2_name": "system", "sb2_module": "os", "sb2_kind": "function", "sb2_path": "os.system",
            "path": "os.system", "kind": "function", "module": "os", "name": "system", "__name__": "x"}))),
        "build_dict_policy_marker": ("build", build(box_marker, {"sb2_kind": "algorithm", "kind": "algorithm"})),
        "build_slots_box": ("build", build(g("gym.spaces.box", "Box"), (None, {"shape": (9999,), "dtype": "x"}))),
        "build_slots_ordereddict": ("build", build(g("collections", "OrderedDict"),
                                                   (None, {"__setitem__": Raw(g("os", "system"))}))),
        "build_slots_builtin_dict": ("build", build(g("builtins", "dict"), (None, {"get": 1}))),
        "build_slots_ndarray": ("build", build(g("numpy", "ndarray"), (None, {"shape": 1}))),
        "build_slots_rms": ("build", build(g("stable_baselines.common.running_mean_std", "RunningMeanStd"),
                                           (None, {"__init__": 0, "update": 0}))),
        "build_slots_dtype": ("build", build(g("numpy", "dtype"), (None, {"itemsize": 1 << 40}))),
        # --- numpy internals that can forge memory ---------------------------------------------------
        "dtype_forged_flags": ("forge", np_array(np.zeros(2), dtype_ops=np_dtype(
            "f8", (3, "<", None, None, None, 8, 8, 63)), data=b"A" * 16)),
        "dtype_forged_itemsize": ("forge", np_array(np.zeros(2), dtype_ops=np_dtype(
            "f8", (3, "<", None, None, None, 0x7FFFFFFF, 1, 0)), data=b"A" * 16)),
        "dtype_negative_itemsize": ("forge", np_array(np.zeros(2), dtype_ops=np_dtype(
            "f8", (3, "<", None, None, None, -8, 1, 0)), data=b"A" * 16)),
        "dtype_O8_raw_bytes": ("forge", np_array(np.zeros(2), dtype_ops=np_dtype("O8", (
            3, "|", None, None, None, -1, -1, 63)), data=b"AAAAAAAABBBBBBBB")),
        "dtype_fields_object": ("forge", np_array(np.zeros(2), dtype_ops=np_dtype("V8", (
            3, "|", None, ("a",), {"a": (Raw(np_dtype("O8", (3, "|", None, None, None, -1, -1, 63))), 0)}, 8, 1,
            63)), data=b"AAAAAAAABBBBBBBB")),
        "dtype_subarray_huge": ("forge", np_array(np.zeros(1), dtype_ops=np_dtype("f8", (
            3, "<", (Raw(np_dtype("f8")), (20000, 20000)), None, None, -1, -1, 0)), data=b"A" * 8)),
        "reconstruct_object_list": ("forge", build(call(g("numpy.core.multiarray", "_reconstruct"),
                                                        Raw(g("numpy", "ndarray")), (0,), b"b"),
                                                   (1, (2,), Raw(np_dtype("O8", (3, "|", None, None, None, -1, -1,
                                                                                 63))), False, ["a", "b"]))),
        "scalar_O8": ("forge", call(g("numpy.core.multiarray", "scalar"), Raw(np_dtype("O8", (
            3, "|", None, None, None, -1, -1, 63))), b"AAAAAAAA")),
        "scalar_forged_dtype": ("forge", call(g("numpy.core.multiarray", "scalar"), Raw(np_dtype("f8", (
            3, "<", None, None, None, 0x7FFFFFFF, 1, 0))), b"AAAAAAAA")),
        "frombuffer_O8": ("forge", call(g("numpy._core.numeric", "_frombuffer"), b"A" * 16, Raw(np_dtype("O8", (
            3, "|", None, None, None, -1, -1, 63))), (2,), "C")),
        "reconstruct_huge_shape": ("memory", call(g("numpy.core.multiarray", "_reconstruct"),
                                                  Raw(g("numpy", "ndarray")), (60000, 60000), b"b")),
        "reconstruct_build_huge_shape": ("forge", np_array(np.zeros(2), shape=(60000, 60000), data=b"A" * 16)),
        "ndarray_newobj_huge": ("memory", newobj(g("numpy", "ndarray"), ((60000, 60000),))),
        "void_dtype_huge": ("memory", np_array(np.zeros(1), dtype_ops=np_dtype("V3400000000", (
            3, "|", None, None, None, 3400000000, 1, 0)), data=b"A")),
        "numpy_ones": ("memory", call(g("numpy", "ones"), (60000, 60000))),
        # --- memory ---------------------------------------------------------------------------------------
        "bytes_3_4G": ("memory", call(g("builtins", "bytes"), 3_400_000_000)),
        "bytearray_3_4G": ("memory", call(g("builtins", "bytearray"), 3_400_000_000)),
        "bytes_900M_x4": ("memory", enc([Raw(call(g("builtins", "bytes"), 900_000_000)) for _ in range(4)])),
        "codecs_hex_chain": ("memory", _codec_chain(28)),
        "codecs_zlib_1G": ("memory", call(g("_codecs", "decode"), zlib_bomb(GiB), "zlib_codec")),
        "codecs_bz2_x3": ("memory", enc([Raw(call(g("_codecs", "decode"), bzip2_bomb()[0], "bz2_codec"))
                                         for _ in range(3)])),
        "binbytes8_huge_len": ("memory", Raw(b"\x8e" + struct.pack("<Q", 1 << 40) + b"AAAA")),
        "binunicode8_huge_len": ("memory", Raw(b"\x8d" + struct.pack("<Q", 1 << 40) + b"AAAA")),
        "long_text_digits": ("memory", Raw(b"L" + b"9" * 200_000 + b"L\n")),
        "memo_put_huge_index": ("memory", Raw(b"N" + b"r" + struct.pack("<I", 0xFFFFFFF0))),
        "many_marks": ("memory", Raw(b"(" * 400_000 + b"N")),
        "billion_laughs": ("memory", _billion_laughs(40)),
        # --- hash collisions (80k int keys k * (2**61 - 1): all hash to 0) -----------------------------
        "dict_colliding_keys": ("hash", Raw(b"}(" + b"".join(_int(k * (2 ** 61 - 1)) + b"N" for k in range(80_000))
                                            + b"u")),
        "set_colliding_keys": ("hash", Raw(b"\x8f(" + b"".join(_int(k * (2 ** 61 - 1)) for k in range(80_000))
                                           + b"\x90")),
        "frozenset_colliding_keys": ("hash", Raw(b"(" + b"".join(_int(k * (2 ** 61 - 1)) for k in range(80_000))
                                                 + b"\x91")),
        "dict_reduce_colliding": ("hash", call(g("builtins", "dict"), Raw(b"](" + b"".join(
            _int(k * (2 ** 61 - 1)) + b"N\x86" for k in range(80_000)) + b"e"))),
        "ordereddict_colliding": ("hash", call(g("collections", "OrderedDict"), Raw(b"](" + b"".join(
            _int(k * (2 ** 61 - 1)) + b"N\x86" for k in range(80_000)) + b"e"))),
        # --- depth ------------------------------------------------------------------------------------------
        "deep_lists": ("depth", Raw(b"]" * 100_000 + b"a" * 99_999)),
        "deep_tuples": ("depth", Raw(b"N" + b"\x85" * 100_000)),
        "deep_dicts": ("depth", Raw((b"}" + _str("k")) * 50_000 + b"N" + b"s" * 50_000)),
        # --- self reference -------------------------------------------------------------------------------
        "self_list": ("selfref", Raw(b"]" + _put(0) + _get(0) + b"a")),
        "self_dict": ("selfref", Raw(b"}" + _put(0) + _str("mean") + _get(0) + b"s")),
        "mutual_lists": ("selfref", Raw(b"]" + _put(0) + b"]" + _put(1) + _get(0) + b"a" + b"a")),
    }
    return {name: (kind, bytes(ops)) for name, (kind, ops) in payloads.items()}


class _SystemCall:
    """Pickled by the real ``pickle`` module: ``os.system(command)`` when loaded (the usual exploit spelling)."""

    def __init__(self, command: str):
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def _codec_chain(levels: int) -> Raw:
    """``_codecs.encode(... _codecs.encode(b'A' * 64, 'hex') ..., 'hex')``: doubles at each level (64 B -> 16 GB)."""
    value: Any = b"A" * 64
    for _ in range(levels):
        value = call(g("_codecs", "encode"), Raw(enc(value)), "hex_codec")
    return Raw(value)


_MEMO_BASE = 1_000_000  # memo indices of the payloads: far from those of a host file they are inserted into


def _put(index: int) -> bytes:
    return b"r" + struct.pack("<I", _MEMO_BASE + index)


def _get(index: int) -> bytes:
    return b"j" + struct.pack("<I", _MEMO_BASE + index)


def _billion_laughs(levels: int) -> Raw:
    """Lists of lists sharing their items through the memo: 2**levels leaves from a few hundred bytes."""
    ops = bytearray(b"]" + _put(0) + b"N" + b"a")  # memo[0] = [None]
    for level in range(1, levels):
        ops += b"]" + b"(" + _get(level - 1) + _get(level - 1) + b"e" + _put(level) + b"0"
    ops += _get(levels - 1)
    return Raw(bytes(ops))


# ------------------------------------------------------------------------------------------------ sbtf zips
def _sbtf_code_cases(w: _Writer, goods: Dict[str, Good]) -> None:
    group = "sbtf_code"
    ppo = Path(goods["sbtf_ppo2"].path)
    touch = f"touch {w.canary}"
    write = f"open({w.canary!r}, 'w').close()"
    after = ["sbtf_dqn"]
    entries: Dict[str, Tuple[str, Any]] = {
        "enum_builtins_exec": ("gamma", {"__enum__": "builtins:exec", "value": write}),
        "enum_builtins_eval": ("gamma", {"__enum__": "builtins:eval", "value": write}),
        "enum_os_system": ("gamma", {"__enum__": "os:system", "value": touch}),
        "enum_posix_system": ("policy", {"__enum__": "posix:system", "value": touch}),
        "enum_in_policy_kwargs": ("policy_kwargs", {"net_arch": [{"__enum__": "os:system", "value": touch}]}),
        "enum_in_tuple": ("policy_kwargs", {"x": {"__tuple__": [{"__enum__": "builtins:exec", "value": write}]}}),
        "enum_as_dict_key": ("policy_kwargs", {"__dict_items__": [[{"__enum__": "os:system", "value": touch}, 1]]}),
        "data_object_os_system": ("learning_rate", {"__data_object__": "os:system", "state": touch}),
        "data_object_popen": ("learning_rate", {"__data_object__": "subprocess:Popen",
                                                "state": {"args": ["sh", "-c", touch]}}),
        "data_object_registered_algo": ("learning_rate", {"__data_object__": "sbtf.ppo2.ppo2:PPO2",
                                                          "state": {"policy": "MlpPolicy", "env": "CartPole-v1"}}),
        "class_subprocess_popen": ("policy", {"__class__": "subprocess:Popen"}),
        "class_os_system": ("policy", {"__class__": "os:system"}),
        "class_builtins_eval": ("policy", {"__class__": "builtins:eval"}),
        "class_registered_algorithm_as_policy": ("policy", {"__class__": "sbtf.ppo2.ppo2:PPO2"}),
        "class_registered_enum_as_policy": ("policy", {"__class__": "sbtf.her.replay_buffer:GoalSelectionStrategy"}),
        "class_abstract_policy": ("policy", {"__class__": "sbtf.common.policies:ActorCriticPolicy"}),
        "activation_os_system": ("policy_kwargs", {"act_fun": {"__activation__": "os:system"}}),
        "activation_eval_name": ("policy_kwargs", {"act_fun": {"__activation__": "__import__('os').system"}}),
        "space_type_os_system": ("observation_space", {"__space__": {"type": "os:system", "shape": [4]}}),
        "ndarray_object_dtype": ("gamma", {"__ndarray__": ["a", "b"], "dtype": "O", "shape": [2]}),
        "ndarray_object_dtype_2": ("gamma", {"__ndarray__": [1, 2], "dtype": "object", "shape": [2]}),
        "pickle_blob_default": ("cliprange", {"__pickle__": cloudpickle_blob(touch), "repr": "x",
                                              "type": "builtins:float"}),
        "callable_pickle_blob_default": ("learning_rate", {"__callable__": {
            "repr": "<function f>", "sampled": None, "pickle": cloudpickle_blob(touch)}}),
        "callable_pickle_blob_sampled": ("learning_rate", {"__callable__": {
            "repr": "<function f>", "sampled": [[1.0, 0.00025], [0.0, 0.00025]], "pickle": cloudpickle_blob(touch)}}),
    }
    # files that may load (an inert stand-in or a schedule from sampled data replaces the pickle)
    may_load = {"pickle_blob_default", "callable_pickle_blob_default", "callable_pickle_blob_sampled",
                "enum_in_tuple", "enum_in_policy_kwargs", "enum_as_dict_key"}
    for name, (key, value) in entries.items():
        path = w.file(f"{group}/{name}", with_data(ppo, lambda d, k=key, v=value: d.__setitem__(k, v)), ".zip")
        w.add(group, name, "model:PPO2", path, "any" if name in may_load else "error", ref="sbtf_ppo2", after=after,
              note=f"data[{key!r}] = {json.dumps(value)[:80]}")
        # the same file through load_parameters (which needs only the weights) must not run it either
        if name in ("enum_builtins_exec", "enum_os_system", "data_object_os_system", "class_subprocess_popen",
                    "pickle_blob_default", "callable_pickle_blob_default"):
            w.add(group, name + "__load_parameters", "params:sbtf_ppo2", path, "any", ref="sbtf_ppo2", after=after)
    # the data document itself is a tagged value
    path = w.file(f"{group}/data_is_enum_exec", with_data(ppo, lambda d: {"__enum__": "builtins:exec",
                                                                          "value": write}), ".zip")
    w.add(group, "data_is_enum_exec", "model:PPO2", path, ref="sbtf_ppo2", after=after)
    w.add(group, "data_is_enum_exec__load_parameters", "params:sbtf_ppo2", path, "any", ref="sbtf_ppo2", after=after)
    path = w.file(f"{group}/data_is_class_popen", with_data(ppo, lambda d: d.update({"__class__": "subprocess:Popen"})),
                  ".zip")
    w.add(group, "data_has_class_key", "model:PPO2", path, "any", ref="sbtf_ppo2", after=after)
    # --- data keys that name methods / internals: reported, never assigned, the file's weights used -----
    method_keys: Dict[str, Any] = {
        "load_parameters": 1, "predict": 0, "_from_data": 0, "set_env": 0, "get_parameters": "x", "setup_model": 0,
        "__class__": "sbtf.common.policies:MlpPolicy", "__dict__": {"predict": 0}, "__init__": 0,
        "__getattribute__": 0, "policy_tf": 0, "_named_parameters": 0, "action_probability": 0,
        "_on_parameters_loaded": 0,
    }
    for key, value in method_keys.items():
        safe = key.strip("_") or "underscore"
        path = w.file(f"{group}/method_key_{safe}", with_data(ppo, lambda d, k=key, v=value: d.__setitem__(k, v)),
                      ".zip")
        w.add(group, f"method_key_{key}", "model:PPO2", path, "any", ref="sbtf_ppo2", after=after,
              injected_keys=[key], must_report=key, note=f"data[{key!r}] = {value!r}")
    path = w.file(f"{group}/method_keys_all", with_data(ppo, lambda d: d.update(
        {k: v for k, v in method_keys.items() if k not in ("__class__", "__dict__")})), ".zip")
    w.add(group, "method_keys_all", "model:PPO2", path, "any", ref="sbtf_ppo2", after=after,
          injected_keys=[k for k in method_keys if k not in ("__class__", "__dict__")], must_report="predict")
    # DQN file with method keys
    dqn = Path(goods["sbtf_dqn"].path)
    path = w.file(f"{group}/dqn_method_keys", with_data(dqn, lambda d: d.update(
        {"predict": 0, "load_parameters": 1, "replay_buffer": 3, "_setup_learn": 0})), ".zip")
    w.add(group, "dqn_method_keys", "model:DQN", path, "any", ref="sbtf_dqn", after=["sbtf_ppo2"],
          injected_keys=["predict", "load_parameters", "_setup_learn"], must_report="predict")


def _sbtf_resource_cases(w: _Writer, goods: Dict[str, Good]) -> None:
    group = "sbtf_resources"
    ppo = Path(goods["sbtf_ppo2"].path)
    dqn = Path(goods["sbtf_dqn"].path)
    after = ["sbtf_dqn"]
    names = param_names(ppo)

    def add(name: str, payload: bytes, loader: str = "model:PPO2", expect: str = "error", **kw: Any) -> None:
        w.add(group, name, loader, w.file(f"{group}/{name}", payload, ".zip"), expect, ref=kw.pop("ref", "sbtf_ppo2"),
              after=kw.pop("after", after), **kw)

    colliding = [[k * (2 ** 61 - 1), 0] for k in range(80_000)]
    add("json_dict_items_colliding_80k", with_data(ppo, lambda d: d.__setitem__(
        "policy_kwargs", {"__dict_items__": colliding})))
    add("json_dict_items_colliding_tuple_keys", with_data(ppo, lambda d: d.__setitem__(
        "policy_kwargs", {"__dict_items__": [[{"__tuple__": [k * (2 ** 61 - 1)]}, 0] for k in range(40_000)]})))
    add("json_dict_items_colliding__load_parameters", with_data(ppo, lambda d: d.__setitem__(
        "policy_kwargs", {"__dict_items__": colliding})), loader="params:sbtf_ppo2", expect="any")
    deep = 100_000
    add("json_deep_lists_100k", sbtf_zip_with(ppo, lambda m: m.__setitem__(
        "data", m["data"].replace(b'"gamma": 0.99', b'"gamma": ' + b"[" * deep + b"]" * deep, 1))))
    add("json_deep_tuples_50k", sbtf_zip_with(ppo, lambda m: m.__setitem__(
        "data", m["data"].replace(b'"gamma": 0.99', b'"gamma": ' + b'{"__tuple__": [' * 50_000 + b"]}" * 50_000, 1))))
    add("json_deep_dicts_100k", sbtf_zip_with(ppo, lambda m: m.__setitem__(
        "data", m["data"].replace(b'"gamma": 0.99', b'"gamma": ' + b'{"a": ' * deep + b"1" + b"}" * deep, 1))))
    add("json_deep_parameter_list", sbtf_zip_with(ppo, lambda m: m.__setitem__(
        "parameter_list", b"[" * deep + b"]" * deep)))
    add("json_deep_sbtf_format", sbtf_zip_with(ppo, lambda m: m.__setitem__(
        "sbtf_format", b'{"format_version": 1, "x": ' + b"[" * deep + b"]" * deep + b"}")))
    add("json_huge_int_digits", sbtf_zip_with(ppo, lambda m: m.__setitem__(
        "data", m["data"].replace(b'"gamma": 0.99', b'"gamma": ' + b"9" * 1_000_000, 1))))
    add("json_space_bounds_1M_list", with_data(ppo, lambda d: d["observation_space"]["__space__"].update(
        low=[0.0] * 1_000_000, high=[1.0] * 1_000_000, shape=[1_000_000])))
    # npy headers announcing gigabytes
    add("npy_dtype_subarray_20000x20000", first_param_raw(ppo, npy_header("(20000,20000)<f4", (1,)) + b"\0" * 64))
    add("npy_shape_20000x20000", first_param_raw(ppo, npy_header("<f4", (20000, 20000)) + b"\0" * 64))
    add("npy_shape_2_62", first_param_raw(ppo, npy_header("<f4", (2 ** 62,)) + b"\0" * 64))
    add("npy_void_3G", first_param_raw(ppo, npy_header("|V3400000000", (1,)) + b"\0" * 64))
    add("npy_header_call_expression", first_param_raw(ppo, npy_header("", (), text=(
        "{'descr': __import__('os').system('touch %s') or '<f4', 'fortran_order': False, 'shape': (4, 64), }"
        % w.canary)) + b"\0" * 1024))
    add("npy_header_deep_nesting", first_param_raw(ppo, npy_header("", (), text=(
        "{'descr': '<f4', 'fortran_order': False, 'shape': " + "(" * 3000 + ")" * 3000 + ", }")) + b"\0" * 64))
    add("npy_header_huge_number", first_param_raw(ppo, npy_header("", (), text=(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (" + "9" * 5000 + ",), }")) + b"\0" * 64))
    # zip bombs: 2 GiB of zeros in ~2 MB (deflate), 1 GiB in ~1 KB (bzip2), 100 MiB of JSON zeros
    bomb, crc, size = deflate_bomb(2 * GiB)
    members = zip_members(ppo)
    add("zip_bomb_parameters_2GiB", raw_zip([RawMember.deflated(n, p) for n, p in members.items() if n != "parameters"]
                                            + [RawMember("parameters", bomb, 8, crc, size)]))
    add("zip_bomb_data_2GiB", raw_zip([RawMember.deflated(n, p) for n, p in members.items() if n != "data"]
                                      + [RawMember("data", bomb, 8, crc, size)]))
    add("zip_bomb_data_header_says_1KB", raw_zip([RawMember.deflated(n, p) for n, p in members.items() if n != "data"]
                                                 + [RawMember("data", bomb, 8, crc, 1024)]))
    json_bomb, json_crc, json_size = deflate_bomb(100 * MiB, fill=b"0", chunk=4 * MiB)
    add("zip_json_100MiB_of_zeros", raw_zip([RawMember.deflated(n, p) for n, p in members.items() if n != "data"]
                                            + [RawMember("data", json_bomb, 8, json_crc, json_size)]))
    spaces, sp_crc, sp_size = deflate_bomb(256 * MiB, fill=b" ", chunk=4 * MiB)
    add("zip_json_256MiB_of_spaces", raw_zip([RawMember.deflated(n, p) for n, p in members.items() if n != "data"]
                                             + [RawMember("data", spaces, 8, sp_crc, sp_size)]))
    bz, bz_size = bzip2_bomb()
    add("zip_bzip2_bomb_parameters_1GiB", raw_zip([RawMember.deflated(n, p) for n, p in members.items()
                                                   if n != "parameters"]
                                                  + [RawMember("parameters", bz, 12, 0, bz_size)]))
    # the inner npz: a member that inflates to 2 GiB behind a valid small header
    first = names[0] + ".npy"
    inner_bomb, inner_crc, inner_size = deflate_bomb(2 * GiB, prefix=npy_header("<f4", (4, 64)))
    inner = zip_members_of_bytes(members["parameters"])
    inner_members = [RawMember.stored(n, p) for n, p in inner.items() if n != first]
    inner_members.append(RawMember(first, inner_bomb, 8, inner_crc, inner_size))
    add("npz_member_bomb_behind_small_header", raw_zip(
        [RawMember.deflated(n, p) for n, p in members.items() if n != "parameters"]
        + [RawMember.stored("parameters", raw_zip(inner_members))]))
    # the same 16 MiB member named again and again (duplicate central directory entries)
    dup_payload = npy_header("<f4", (4 * MiB - 32,)) + bytes(16 * MiB - 128)
    dup = RawMember.deflated(first, dup_payload)
    add("npz_duplicate_entries_x120", raw_zip(
        [RawMember.deflated(n, p) for n, p in members.items() if n != "parameters"]
        + [RawMember.stored("parameters", raw_zip([dup] + [RawMember.stored(n, p) for n, p in inner.items()
                                                           if n != first], [(0, first)] * 120))]))
    add("zip_many_members_20k", zip_bytes({**members, **{f"junk{i}": b"" for i in range(20_000)}}), expect="any")
    # declared sizes the model does not need: layers, spaces, buffers, threads
    add("net_arch_huge", with_data(ppo, lambda d: d.__setitem__("policy_kwargs", {"net_arch": [100_000, 100_000]})))
    add("layers_huge", with_data(ppo, lambda d: d.__setitem__("policy_kwargs", {"layers": [100_000, 100_000]})))
    add("box_shape_1e9_scalar_bounds", with_data(ppo, lambda d: d.__setitem__("observation_space", {"__space__": {
        "type": "Box", "low": 0.0, "high": 1.0, "shape": [1_000_000_000], "dtype": "float32"}})))
    add("box_shape_100000x100000", with_data(ppo, lambda d: d.__setitem__("observation_space", {"__space__": {
        "type": "Box", "low": 0.0, "high": 1.0, "shape": [100_000, 100_000], "dtype": "float32"}})))
    add("discrete_n_1e9", with_data(ppo, lambda d: d.__setitem__("action_space", {"__space__": {
        "type": "Discrete", "n": 1_000_000_000, "start": 0}})))
    add("multidiscrete_nvec_1e9", with_data(ppo, lambda d: d.__setitem__("action_space", {"__space__": {
        "type": "MultiDiscrete", "nvec": [1_000_000_000, 1_000_000_000], "dtype": "int64"}})))
    add("dict_space_20k_keys", with_data(ppo, lambda d: d.__setitem__("observation_space", {"__space__": {
        "type": "Dict", "spaces": {f"k{i}": {"type": "Discrete", "n": 2, "start": 0} for i in range(20_000)}}})))
    add("n_cpu_tf_sess_1e6", with_data(ppo, lambda d: d.__setitem__("n_cpu_tf_sess", 1_000_000)), expect="any")
    add("n_steps_n_envs_huge", with_data(ppo, lambda d: d.update(n_steps=10 ** 9, n_envs=10 ** 6)), expect="any")
    add("dqn_buffer_size_1e15", with_data(dqn, lambda d: d.__setitem__("buffer_size", 10 ** 15)), loader="model:DQN",
        expect="any", ref="sbtf_dqn", after=["sbtf_ppo2"])
    add("sampled_schedule_huge", with_data(ppo, lambda d: d.__setitem__("learning_rate", {"__callable__": {
        "repr": "f", "sampled": [[1.0 - i / 200_000, 0.001] for i in range(200_000)], "pickle": None}})), expect="any")


def zip_members_of_bytes(payload: bytes) -> Dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(payload)) as archive:
        return {info.filename: archive.read(info) for info in archive.infolist()}


def _sbtf_malformed_cases(w: _Writer, goods: Dict[str, Good]) -> None:
    group = "sbtf_malformed"
    ppo = Path(goods["sbtf_ppo2"].path)
    after = ["sbtf_dqn"]
    names = param_names(ppo)

    def add(name: str, payload: bytes, expect: str = "error", ref: Optional[str] = "sbtf_ppo2",
            loader: str = "model:PPO2") -> None:
        w.add(group, name, loader, w.file(f"{group}/{name}", payload, ".zip"), expect, ref=ref, after=after)

    def member(name: str, payload: bytes) -> Callable[[Dict[str, bytes]], None]:
        return lambda m: m.__setitem__(name, payload)

    for text in (b"[]", b'"text"', b"1", b"null", b"true", b"\xff\xfe", b"{", b"", b"\xef\xbb\xbf{}", b"{} {}",
                 b'{"gamma": NaN, "gamma": 1}'):
        add(f"data_is_{text[:6].hex()}", sbtf_zip_with(ppo, member("data", text)))
    for text in (b"[1]", b'"x"', b"null", b'{"format_version": "1"}', b'{"format_version": 999}',
                 b'{"format_version": -1, "algo": "PPO2"}', b'{"format_version": true}', b'{"format_version": 1e308}',
                 b'{"format_version": 1, "algo": 5}', b'{"format_version": 1, "algo": "../../x"}',
                 b'{"format_version": 1, "algo": ""}'):
        add(f"sbtf_format_is_{text[:24].hex()}", sbtf_zip_with(ppo, member("sbtf_format", text)))
    add("sbtf_format_algo_dqn", sbtf_zip_with(ppo, member("sbtf_format", b'{"format_version": 1, "algo": "DQN"}')))
    add("sbtf_format_missing_algo", sbtf_zip_with(ppo, member("sbtf_format", b'{"format_version": 1}')), "any")
    for label, text in (("dict", b"{}"), ("string", b'"model/pi"'), ("ints", b"[1, 2]"), ("nested", b"[[\"a\"]]"),
                        ("duplicate", json.dumps(names + names[:1]).encode()),
                        ("one_missing", json.dumps(names[1:]).encode()),
                        ("one_extra", json.dumps(names + ["model/extra:0"]).encode()),
                        ("traversal", json.dumps(["../" * 8 + "etc/passwd"] + names[1:]).encode()),
                        ("shuffled", json.dumps(names[::-1]).encode())):
        add(f"parameter_list_{label}", sbtf_zip_with(ppo, member("parameter_list", text)),
            "any" if label == "shuffled" else "error")
    for name in ("data", "parameters", "parameter_list", "sbtf_format"):
        add(f"missing_{name}", sbtf_zip_with(ppo, lambda m, n=name: m.pop(n)))
    add("empty_zip", zip_bytes({}))
    add("extra_member", sbtf_zip_with(ppo, member("extra.py", b"import os; os.system('x')")), "any")
    add("data_duplicate_member", raw_zip([RawMember.deflated(n, p) for n, p in zip_members(ppo).items()]
                                         + [RawMember.deflated("data", b"[]")]))
    add("parameters_not_zip", sbtf_zip_with(ppo, member("parameters", b"garbage" * 100)))
    add("parameters_empty_zip", sbtf_zip_with(ppo, member("parameters", zip_bytes({}))))
    encrypted = bytearray(raw_zip([RawMember.deflated(n, p) for n, p in zip_members(ppo).items()]))
    encrypted[6] |= 1  # 'encrypted' flag of the first local header
    central = encrypted.rfind(b"PK\x01\x02", 0, len(encrypted) - 22)
    first_central = encrypted.find(b"PK\x01\x02")
    encrypted[first_central + 8] |= 1
    add("member_encrypted_flag", bytes(encrypted))
    del central
    weird = raw_zip([RawMember(n, p, 99, zlib.crc32(p), len(p)) if n == "data" else RawMember.deflated(n, p)
                     for n, p in zip_members(ppo).items()])
    add("member_unknown_compression", weird)
    add("member_crc_wrong", raw_zip([RawMember(n, RawMember.deflated(n, p).data, 8, 0x1234, len(p))
                                     if n == "data" else RawMember.deflated(n, p)
                                     for n, p in zip_members(ppo).items()]))
    # parameters of the wrong kind
    conversions: Dict[str, Tuple[Callable[[np.ndarray], np.ndarray], str, Optional[str]]] = {
        "strings": (lambda v: v.astype("U8"), "error", None),
        "bytes_S": (lambda v: v.astype("S8"), "error", None),
        "datetimes": (lambda v: v.astype(np.int64).astype("M8[s]"), "error", None),
        "timedeltas": (lambda v: v.astype(np.int64).astype("m8[s]"), "error", None),
        "bools": (lambda v: v > 0, "error", None),
        "uint64": (lambda v: np.abs(v * 1000).astype(np.uint64), "error", None),
        "complex": (lambda v: v.astype(np.complex128), "error", None),
        "structured": (lambda v: v.astype([("a", "<f4")]), "error", None),
        "void": (lambda v: v.view("V4"), "error", None),
        "big_endian_same_values": (lambda v: v.astype(">f4"), "any", "sbtf_ppo2"),
        "fortran_same_values": (lambda v: np.asfortranarray(v), "any", "sbtf_ppo2"),
        "float64_same_values": (lambda v: v.astype(np.float64), "any", "sbtf_ppo2"),
        "float16": (lambda v: v.astype(np.float16), "any", None),
        "transposed": (lambda v: v.T.copy(), "error", None),
        "scalar": (lambda v: np.float32(1.0).reshape(()), "error", None),
        "nan_inf": (lambda v: np.full_like(v, np.nan), "any", None),
    }
    for label, (convert, expect, ref) in conversions.items():
        payload = first_param_as(ppo, convert)
        add(f"param_{label}", payload, expect, ref)
        if label in ("strings", "datetimes", "bools", "uint64", "complex"):
            w.add(group, f"param_{label}__load_parameters", "params:sbtf_ppo2",
                  w.folder / f"{group}__param_{label}.zip", "error", ref="sbtf_ppo2", after=after)
    add("param_object_header", first_param_raw(ppo, npy_header("|O", (4, 64)) + b"\0" * 2048))
    add("param_object_pickled", first_param_raw(ppo, _object_npy()))
    add("param_truncated_data", first_param_raw(ppo, npy_header("<f4", (4, 64)) + b"\0" * 100))
    add("param_bad_magic", first_param_raw(ppo, b"\x93NUMPX\x01\x00" + b"\0" * 200))
    add("param_header_len_lie", first_param_raw(ppo, b"\x93NUMPY\x01\x00\xff\xff{'descr'"))
    add("param_version_3_utf8_header", first_param_raw(ppo, b"\x93NUMPY\x03\x00" + struct.pack("<I", 10_000_000)
                                                         + b"{"))
    add("param_missing_one", with_params(ppo, lambda inner: inner.pop(names[0] + ".npy")))
    add("param_extra_member", with_params(ppo, lambda inner: inner.__setitem__("model/extra:0.npy",
                                                                               npy_bytes(np.zeros(3, np.float32)))),
        "any", "sbtf_ppo2")
    # spaces and values that do not describe a space / a value of the declared type
    space_edits: Dict[str, Any] = {
        "box_no_low": {"type": "Box", "high": [1.0] * 4, "shape": [4], "dtype": "float32"},
        "box_no_high": {"type": "Box", "low": [1.0] * 4, "shape": [4], "dtype": "float32"},
        "box_low_shape_mismatch": {"type": "Box", "low": [0.0] * 3, "high": [1.0] * 4, "shape": [4],
                                   "dtype": "float32"},
        "box_shape_mismatch": {"type": "Box", "low": [0.0] * 4, "high": [1.0] * 4, "shape": [5], "dtype": "float32"},
        "box_low_gt_high": {"type": "Box", "low": [2.0] * 4, "high": [1.0] * 4, "shape": [4], "dtype": "float32"},
        "box_nan_bounds": {"type": "Box", "low": [float("nan")] * 4, "high": [1.0] * 4, "shape": [4],
                           "dtype": "float32"},
        "box_negative_shape": {"type": "Box", "low": 0.0, "high": 1.0, "shape": [-4], "dtype": "float32"},
        "box_string_dtype": {"type": "Box", "low": 0.0, "high": 1.0, "shape": [4], "dtype": "U4"},
        "box_object_dtype": {"type": "Box", "low": 0.0, "high": 1.0, "shape": [4], "dtype": "O"},
        "box_string_bounds": {"type": "Box", "low": ["a"] * 4, "high": ["b"] * 4, "shape": [4], "dtype": "float32"},
        "box_shape_string": {"type": "Box", "low": 0.0, "high": 1.0, "shape": "4", "dtype": "float32"},
        "box_shape_float": {"type": "Box", "low": 0.0, "high": 1.0, "shape": [4.5], "dtype": "float32"},
        "unknown_type": {"type": "Graph"},
        "no_type": {"shape": [4]},
        "space_is_list": [1, 2],
        "tuple_space_empty": {"type": "Tuple", "spaces": []},
    }
    for label, space in space_edits.items():
        add(f"obs_space_{label}", with_data(ppo, lambda d, s=space: d.__setitem__("observation_space",
                                                                                   {"__space__": s})))
    add("obs_space_deep_tuple_space", with_data_raw(ppo, "observation_space", _deep_space(5000)))
    for label, space in {"discrete_zero": {"type": "Discrete", "n": 0, "start": 0},
                         "discrete_negative": {"type": "Discrete", "n": -3, "start": 0},
                         "discrete_huge_int": {"type": "Discrete", "n": 10 ** 30, "start": 0},
                         "discrete_float": {"type": "Discrete", "n": 2.5, "start": 0},
                         "discrete_string": {"type": "Discrete", "n": "2", "start": 0},
                         "discrete_bool": {"type": "Discrete", "n": True, "start": 0},
                         "discrete_start_huge": {"type": "Discrete", "n": 2, "start": 10 ** 30},
                         "multibinary_negative": {"type": "MultiBinary", "n": -1}}.items():
        add(f"action_space_{label}", with_data(ppo, lambda d, s=space: d.__setitem__("action_space",
                                                                                      {"__space__": s})))
    value_edits: Dict[str, Tuple[str, Any, str]] = {
        "gamma_string": ("gamma", "x", "error"), "gamma_list": ("gamma", [1], "error"),
        "gamma_nan": ("gamma", float("nan"), "any"), "n_steps_negative": ("n_steps", -1, "error"),
        "n_steps_float": ("n_steps", 1.5, "error"), "n_steps_bool": ("n_steps", True, "any"),
        "seed_huge": ("seed", 2 ** 200, "any"), "seed_string": ("seed", "x", "error"),
        "num_timesteps_huge": ("num_timesteps", 10 ** 100, "any"), "verbose_huge": ("verbose", 10 ** 100, "any"),
        "n_envs_zero": ("n_envs", 0, "any"), "n_envs_negative": ("n_envs", -5, "any"),
        "policy_string": ("policy", "MlpPolicy", "any"), "policy_unknown_string": ("policy", "os.system", "error"),
        "policy_null": ("policy", None, "error"), "policy_kwargs_list": ("policy_kwargs", [1], "error"),
        "policy_kwargs_layers_string": ("policy_kwargs", {"layers": "abc"}, "error"),
        "policy_kwargs_layers_negative": ("policy_kwargs", {"layers": [-1]}, "error"),
        "policy_kwargs_layers_zero": ("policy_kwargs", {"layers": [0]}, "error"),
        "policy_kwargs_layers_float": ("policy_kwargs", {"layers": [1.5]}, "error"),
        "policy_kwargs_unknown_arg": ("policy_kwargs", {"no_such_argument": 1}, "error"),
        "policy_kwargs_cnn_on_vectors": ("policy_kwargs", {"feature_extraction": "cnn"}, "error"),
        "vectorize_action_string": ("_vectorize_action", "yes", "any"),
        "learning_rate_string": ("learning_rate", "fast", "any"),
        "cliprange_dict": ("cliprange", {"a": 1}, "any"),
        "sampled_schedule_bad_pairs": ("learning_rate", {"__callable__": {"repr": "f", "sampled": [[1, "a"]]}}, "any"),
        "tuple_not_list": ("policy_kwargs", {"x": {"__tuple__": 5}}, "any"),
        "dict_items_not_pairs": ("policy_kwargs", {"__dict_items__": [[1, 2, 3]]}, "any"),
        "dict_items_unhashable_key": ("policy_kwargs", {"__dict_items__": [[[1], 2]]}, "any"),
        "ndarray_shape_mismatch": ("gamma", {"__ndarray__": [1, 2, 3], "dtype": "float32", "shape": [1000, 1000]},
                                   "any"),
        "ndarray_huge_shape": ("gamma", {"__ndarray__": 0, "dtype": "float64", "shape": [100000, 100000]}, "any"),
        "unknown_tag": ("gamma", {"__weird__": 1}, "any"),
    }
    for label, (key, value, expect) in value_edits.items():
        add(f"value_{label}", with_data(ppo, lambda d, k=key, v=value: d.__setitem__(k, v)), expect)
    for key in ("policy", "observation_space", "action_space"):
        add(f"data_without_{key}", with_data(ppo, lambda d, k=key: d.pop(k)))
    # truncated and empty files
    raw = ppo.read_bytes()
    for cut in sorted({0, 1, 2, 4, 30, 100, len(raw) // 4, len(raw) // 2, len(raw) - 200, len(raw) - 22,
                       len(raw) - 1}):
        add(f"truncated_at_{cut}", raw[:cut])
        if cut in (len(raw) // 2, len(raw) - 1):
            w.add(group, f"truncated_at_{cut}__load_parameters", "params:sbtf_ppo2",
                  w.folder / f"{group}__truncated_at_{cut}.zip", "error", ref="sbtf_ppo2", after=after)
    add("not_a_model_text", b"hello, this is not a model\n")


def _deep_space(depth: int) -> bytes:
    """JSON text of a Tuple space nested ``depth`` deep."""
    return (b'{"__space__": ' + b'{"type": "Tuple", "spaces": [' * depth + b'{"type": "Discrete", "n": 2, "start": 0}'
            + b"]}" * depth + b"}")


def _object_npy() -> bytes:
    """An ``.npy`` of an object array (numpy writes its items as a pickle after the header)."""
    buffer = io.BytesIO()
    np.save(buffer, np.array([{"a": 1}, "b"], dtype=object), allow_pickle=True)
    return buffer.getvalue()


# ------------------------------------------------------------------------------------------------ legacy pickles
_NAKED_KINDS = ("exec", "build", "forge", "memory", "hash", "depth", "selfref")


def _legacy_naked_cases(w: _Writer, goods: Dict[str, Good], payloads: Dict[str, Tuple[str, bytes]]) -> None:
    """Each payload as a whole ``.pkl`` model file, a whole vecnormalize.pkl and a whole obs_rms.pkl."""
    group = "legacy_naked"
    after_model = ["sb2_dqn_pkl"] if "sb2_dqn_pkl" in goods else ["sbtf_dqn"]
    for name, (kind, ops) in payloads.items():
        raw = b"\x80\x04" + ops + b"."
        path = w.file(f"{group}/{name}", raw, ".pkl")
        w.add(group, f"{name}__model", "model:PPO2", path, "error", ref="sbtf_ppo2", after=after_model, kind=kind)
    # more shapes of the same attacks
    touch = f"touch {w.canary}"
    extra = {
        "protocol0_reduce": b"cos\nsystem\n(V" + touch.encode() + b"\ntR.",
        "protocol5_reduce": b"\x80\x05" + call(g4("os", "system"), touch) + b".",
        "tuple_data_params_exec": pkl(({"policy": Raw(call(g("os", "system"), touch))}, {}), 4),
        "empty_file": b"",
        "just_proto": b"\x80\x04",
        "stop_only": b".",
        "unknown_opcode": b"\x80\x04\xff.",
        "pop_empty_stack": b"\x80\x040.",
        "stack_underflow_reduce": b"\x80\x04R.",
        "mark_without_tuple": b"\x80\x04(.",
        "bad_frame_length": b"\x80\x04\x95" + struct.pack("<Q", 1 << 62) + b"N.",
        "get_missing_memo": b"\x80\x04h\x05.",
        "truncated_binunicode": b"\x80\x04X\xff\xff\x00\x00abc",
    }
    for name, raw in extra.items():
        path = w.file(f"{group}/{name}", raw, ".pkl")
        w.add(group, f"{name}__model", "model:PPO2", path, "error", ref="sbtf_ppo2", after=after_model)


def _legacy_model_cases(w: _Writer, goods: Dict[str, Good], payloads: Dict[str, Tuple[str, bytes]]) -> None:
    """Payloads inside real stable-baselines 2 files: a ``.pkl`` model's data dict and a ``.zip``'s serialized
    entries (needs ../shared/fixtures)."""
    group = "legacy_model"
    ppo_raw = Path(goods["sb2_ppo2_pkl"].path).read_bytes()
    after = ["sb2_dqn_pkl"]
    for name, (kind, ops) in payloads.items():
        # an extra key of the data dict: the file is otherwise a real SB2 PPO2 model
        raw = insert_into_first_dict(ppo_raw, "hostile_extra", ops)
        path = w.file(f"{group}/{name}__in_pkl_data", raw, ".pkl")
        w.add(group, f"{name}__in_pkl_data", "model:PPO2", path, "any" if kind in ("selfref", "build") else "error",
              ref="sb2_ppo2_pkl", after=after, kind=kind)
    # the payload replaces a value the model needs
    for name in ("reduce_os_system", "inst_os_system", "dtype_O8_raw_bytes", "dtype_forged_flags",
                 "bytes_3_4G", "dict_colliding_keys", "deep_lists", "build_slots_policy_marker",
                 "build_slots_ordereddict"):
        kind, ops = payloads[name]
        host = explicit_memo(ppo_raw)
        found = re.search(rb"\x8c\x05gamma(r....)G" + re.escape(struct.pack(">d", 0.99)), host, re.DOTALL)
        if found is None:
            continue
        raw = host[:found.start()] + b"\x8c\x05gamma" + found.group(1) + ops + host[found.end():]
        path = w.file(f"{group}/{name}__as_gamma", raw, ".pkl")
        w.add(group, f"{name}__as_gamma", "model:PPO2", path, "error",
              ref="sb2_ppo2_pkl", after=after, kind=kind)
    # a data key that names a method, inside a real SB2 file
    raw = insert_into_first_dict(ppo_raw, "predict", enc(0))
    raw = insert_into_first_dict(raw, "load_parameters", enc(1))
    path = w.file(f"{group}/method_keys__in_pkl_data", raw, ".pkl")
    w.add(group, "method_keys__in_pkl_data", "model:PPO2", path, "any", ref="sb2_ppo2_pkl", after=after,
          injected_keys=["predict", "load_parameters"], must_report="predict")
    # SB2 .zip: pickled ':serialized:' entries
    acktr = Path(goods["sb2_acktr_zip"].path)
    for name, (kind, ops) in payloads.items():
        if kind not in ("exec", "build", "forge", "memory") and name not in ("dict_colliding_keys", "deep_lists",
                                                                             "self_list"):
            continue
        blob = base64.b64encode(b"\x80\x04" + ops + b".").decode()

        def edit(data: dict, blob: str = blob) -> None:
            data["observation_space"][":serialized:"] = blob
        path = w.file(f"{group}/{name}__sb2_zip_serialized", _sb2_zip_with(acktr, edit), ".zip")
        w.add(group, f"{name}__sb2_zip_serialized", "model:ACKTR", path, "error", ref="sb2_acktr_zip",
              after=after, kind=kind)
    for label, value in (("policy_blob_system", {":type:": "x", ":serialized:": cloudpickle_blob(f"touch {w.canary}")}),
                         ("serialized_not_base64", {":type:": "x", ":serialized:": "%%%not base64%%%"}),
                         ("serialized_not_str", {":type:": "x", ":serialized:": 5})):
        path = w.file(f"{group}/{label}__sb2_zip", _sb2_zip_with(acktr, lambda d, v=value: d.__setitem__(
            "policy", v)), ".zip")
        w.add(group, f"{label}__sb2_zip", "model:ACKTR", path, "error", ref="sb2_acktr_zip", after=after)
    # truncated real files
    for good, loader in (("sb2_ppo2_pkl", "model:PPO2"), ("sb2_dqn_pkl", "model:DQN"),
                         ("sb2_acktr_zip", "model:ACKTR"), ("sb2_sac_pkl", "model:SAC")):
        raw = Path(goods[good].path).read_bytes()
        for cut in (1, 2, 11, len(raw) // 3, len(raw) // 2, len(raw) - 2, len(raw) - 1):
            path = w.file(f"{group}/{good}__truncated_{cut}", raw[:cut], Path(goods[good].path).suffix)
            w.add(group, f"{good}__truncated_{cut}", loader, path, "error", ref=good, after=after)
    # sb2 files opened as another algorithm
    w.add(group, "sb2_dqn_as_ppo2", "model:PPO2", Path(goods["sb2_dqn_pkl"].path), "error", after=after)
    w.add(group, "sb2_sac_as_dqn", "model:DQN", Path(goods["sb2_sac_pkl"].path), "error", after=after)


def _sb2_zip_with(good: Path, edit: Callable[[dict], None]) -> bytes:
    members = zip_members(good)
    data = json.loads(members["data"])
    edit(data)
    members["data"] = json.dumps(data).encode()
    return zip_bytes(members)


def _legacy_stats_cases(w: _Writer, goods: Dict[str, Good], payloads: Dict[str, Tuple[str, bytes]]) -> None:
    """VecNormalize files and obs_rms/ret_rms pairs: sbtf's own format, stable-baselines' pickled objects."""
    group = "legacy_stats"
    after = ["sbtf_vecnorm"]
    env = "CartPole-v1"
    good_stats = Path(goods["sbtf_stats"].path)
    mean, var = np.zeros(4), np.ones(4)
    settings = {"clip_obs": 10.0, "clip_reward": 10.0, "gamma": 0.99, "epsilon": 1e-8, "training": True,
                "norm_obs": True, "norm_reward": True}

    def sbtf_style(obs_rms: Raw) -> bytes:
        return pkl({"format": "sbtf.VecNormalize", "format_version": 1, "obs_rms": obs_rms,
                    "ret_rms": {"mean": np.zeros(()), "var": np.ones(()), "count": 1.0}, **settings}, 4)

    def sb2_object(ret_rms: Raw) -> bytes:
        return pkl(build(newobj(g("stable_baselines.common.vec_env.vec_normalize", "VecNormalize")), {
            "obs_rms": Raw(rms_object(mean, var)), "ret_rms": ret_rms, **settings}), 3)

    def stats_folder(name: str, obs_rms: bytes, ret_rms: Optional[bytes] = None) -> Path:
        folder = w.folder / f"{group}__{name}"
        folder.mkdir(exist_ok=True)
        (folder / "obs_rms.pkl").write_bytes(obs_rms)
        (folder / "ret_rms.pkl").write_bytes(ret_rms if ret_rms is not None else (good_stats / "ret_rms.pkl")
                                             .read_bytes())
        return folder

    for name, (kind, ops) in payloads.items():
        raw = b"\x80\x04" + ops + b"."
        w.add(group, f"{name}__vecnormalize", f"vecnorm:{env}", w.file(f"{group}/{name}__vecnormalize", raw, ".pkl"),
              "error", ref="sbtf_vecnorm", after=after, kind=kind)
        w.add(group, f"{name}__obs_rms", f"running_average:{env}", stats_folder(name, raw), "error",
              ref="sbtf_stats", after=after, kind=kind)
        if kind in ("exec", "forge", "build", "memory") or name in ("dict_colliding_keys", "self_dict"):
            w.add(group, f"{name}__in_sbtf_vecnormalize", f"vecnorm:{env}", w.file(
                f"{group}/{name}__in_sbtf_vecnormalize", sbtf_style(Raw(ops)), ".pkl"), "error", ref="sbtf_vecnorm",
                after=after, kind=kind)
            w.add(group, f"{name}__in_sb2_vecnormalize", f"vecnorm:{env}", w.file(
                f"{group}/{name}__in_sb2_vecnormalize", sb2_object(Raw(ops)), ".pkl"), "error", ref="sbtf_vecnorm",
                after=after, kind=kind)
            w.add(group, f"{name}__in_rms_mean", f"running_average:{env}", stats_folder(
                f"{name}_mean", pkl(rms_object(Raw(ops), var), 3)), "error", ref="sbtf_stats", after=after,
                kind=kind)
    # sbtf's own file with one byte changed: f8 -> O8 (an object array built from raw bytes)
    vec_raw = Path(goods["sbtf_vecnorm"].path).read_bytes()
    for label, old, new in (("f8_to_O8", b"f8", b"O8"), ("lt_f8_to_bar_O8", b"<f8", b"|O8"), ("f8_to_V8", b"f8", b"V8"),
                            ("f8_to_M8", b"f8", b"M8"), ("f8_to_U2", b"f8", b"U2"), ("f8_to_c8", b"f8", b"c8"),
                            ("f8_to_b1", b"f8", b"b1")):
        if old in vec_raw:
            label = f"sbtf_vecnormalize_{label}"
            w.add(group, label, f"vecnorm:{env}", w.file(f"{group}/{label}", vec_raw.replace(old, new, 1), ".pkl"),
                  "error", ref="sbtf_vecnorm", after=after)
            w.add(group, label + "_all", f"vecnorm:{env}", w.file(f"{group}/{label}_all", vec_raw.replace(old, new),
                                                                  ".pkl"), "error", ref="sbtf_vecnorm", after=after)
    stats_raw = (good_stats / "obs_rms.pkl").read_bytes()
    if b"f8" in stats_raw:
        w.add(group, "sbtf_obs_rms_f8_to_O8", f"running_average:{env}", stats_folder(
            "f8_to_O8", stats_raw.replace(b"f8", b"O8")), "error", ref="sbtf_stats", after=after)
    # malformed statistics
    malformed = {
        "count_missing": pkl({"mean": mean, "var": var}, 4),
        "count_negative": pkl({"mean": mean, "var": var, "count": -5.0}, 4),
        "count_nan": pkl({"mean": mean, "var": var, "count": float("nan")}, 4),
        "count_string": pkl({"mean": mean, "var": var, "count": "many"}, 4),
        "mean_var_shapes_differ": pkl({"mean": np.zeros(4), "var": np.ones(3), "count": 1.0}, 4),
        "mean_wrong_shape_for_env": pkl({"mean": np.zeros(7), "var": np.ones(7), "count": 1.0}, 4),
        "mean_strings": pkl({"mean": ["a"] * 4, "var": var, "count": 1.0}, 4),
        "mean_2d_huge_declared": pkl({"mean": Raw(np_array(np.zeros(4), shape=(100000, 100000))), "var": var,
                                      "count": 1.0}, 4),
        "mean_int_keys": pkl({1: mean, 2: var, 3: 1.0}, 4),
        "list_not_dict": pkl([mean, var, 1.0], 4),
        "none": pkl(None, 4),
        "sb2_rms_no_count": pkl(build(newobj(g("stable_baselines.common.running_mean_std", "RunningMeanStd")),
                                      {"mean": mean, "var": var}), 3),
        "sb2_rms_unknown_class": pkl(build(newobj(g("stable_baselines.common.running_mean_std", "Evil")),
                                           {"mean": mean, "var": var, "count": 1.0}), 3),
    }
    for name, raw in malformed.items():
        w.add(group, f"malformed_{name}__obs_rms", f"running_average:{env}", stats_folder(f"malformed_{name}", raw),
              "error", ref="sbtf_stats", after=after)
    vec_malformed = {
        "no_obs_rms": pkl({"ret_rms": {"mean": np.zeros(()), "var": np.ones(()), "count": 1.0}}, 4),
        "obs_rms_missing_count": sbtf_style({"mean": mean, "var": var}),  # type: ignore[arg-type]
        "clip_obs_string": pkl({"obs_rms": {"mean": mean, "var": var, "count": 1.0},
                                "ret_rms": {"mean": np.zeros(()), "var": np.ones(()), "count": 1.0},
                                "clip_obs": "x"}, 4),
        "gamma_list": pkl({"obs_rms": {"mean": mean, "var": var, "count": 1.0},
                           "ret_rms": {"mean": np.zeros(()), "var": np.ones(()), "count": 1.0}, "gamma": [1]}, 4),
        "training_huge_int": pkl({"obs_rms": {"mean": mean, "var": var, "count": 1.0},
                                  "ret_rms": {"mean": np.zeros(()), "var": np.ones(()), "count": 1.0},
                                  "training": 10 ** 100}, 4),
        "obs_rms_for_other_env": pkl({"obs_rms": {"mean": np.zeros(9), "var": np.ones(9), "count": 1.0},
                                      "ret_rms": {"mean": np.zeros(()), "var": np.ones(()), "count": 1.0}}, 4),
    }
    for name, raw in vec_malformed.items():
        w.add(group, f"malformed_{name}__vecnormalize", f"vecnorm:{env}", w.file(f"{group}/malformed_{name}", raw,
                                                                                   ".pkl"), "error", after=after)
    for cut in (0, 1, 2, 20, len(vec_raw) // 3, len(vec_raw) // 2, len(vec_raw) - 2, len(vec_raw) - 1):
        w.add(group, f"sbtf_vecnormalize_truncated_{cut}", f"vecnorm:{env}", w.file(
            f"{group}/sbtf_vecnormalize_truncated_{cut}", vec_raw[:cut], ".pkl"), "error", ref="sbtf_vecnorm",
            after=after)
        w.add(group, f"sbtf_obs_rms_truncated_{cut}", f"running_average:{env}", stats_folder(
            f"truncated_{cut}", stats_raw[:cut]), "error", ref="sbtf_stats", after=after)
    missing = w.folder / f"{group}__missing_ret_rms"
    missing.mkdir(exist_ok=True)
    (missing / "obs_rms.pkl").write_bytes(stats_raw)
    w.add(group, "missing_ret_rms", f"running_average:{env}", missing, "any", ref="sbtf_stats", after=after)
    folder_as_file = w.folder / f"{group}__folder_as_vecnormalize"
    folder_as_file.mkdir(exist_ok=True)
    w.add(group, "folder_as_vecnormalize", f"vecnorm:{env}", folder_as_file, "error", after=after)
    if "sb2_stats" in goods:
        sb2_obs = (Path(goods["sb2_stats"].path) / "obs_rms.pkl").read_bytes()
        for old, new in ((b"f8", b"O8"), (b"numpy.core.multiarray\n_reconstruct", b"numpy.core.multiarray\nscalar\n\n")):
            label = "sb2_obs_rms_" + ("O8" if new == b"O8" else "reconstruct_to_scalar")
            sb2_folder = w.folder / f"{group}__{label}"
            sb2_folder.mkdir(exist_ok=True)
            (sb2_folder / "obs_rms.pkl").write_bytes(sb2_obs.replace(old, new))
            (sb2_folder / "ret_rms.pkl").write_bytes((Path(goods["sb2_stats"].path) / "ret_rms.pkl").read_bytes())
            w.add(group, label, "running_average:MountainCar-v0", sb2_folder, "error", ref="sb2_stats", after=after)


def _dataset_cases(w: _Writer, goods: Dict[str, Good]) -> None:
    """Expert datasets (``ExpertDataset``) and replay buffers (``load_buffer``, ``model.load_replay_buffer``)."""
    group = "datasets"
    after = ["sbtf_expert"]
    expert = Path(goods["sbtf_expert"].path)
    members = zip_members(expert)
    n = len(np.load(io.BytesIO(members["obs.npy"])))

    def add_expert(name: str, payload: bytes, expect: str = "error", ref: Optional[str] = "sbtf_expert") -> None:
        w.add(group, f"expert_{name}", "expert", w.file(f"{group}/expert_{name}", payload, ".npz"), expect, ref=ref,
              after=after)

    def replaced(name: str, payload: bytes) -> bytes:
        return zip_bytes({**members, name: payload})

    add_expert("obs_declares_2GB", replaced("obs.npy", npy_header("<f4", (500_000_000,)) + b"\0" * 64))
    add_expert("obs_declares_2GB_stored", zip_bytes({**members, "obs.npy": npy_header("<f4", (500_000_000,))
                                                     + b"\0" * 64}, zipfile.ZIP_STORED))
    add_expert("obs_subarray_dtype", replaced("obs.npy", npy_header("(20000,20000)<f4", (1,)) + b"\0" * 64))
    add_expert("obs_object", replaced("obs.npy", npy_header("|O", (n, 4)) + b"\0" * 64))
    add_expert("obs_object_pickled", replaced("obs.npy", _object_npy()))
    add_expert("obs_datetimes", replaced("obs.npy", npy_bytes(np.zeros((n, 4), "M8[s]"))))
    add_expert("obs_complex", replaced("obs.npy", npy_bytes(np.zeros((n, 4), np.complex64))))
    add_expert("obs_wrong_length", replaced("obs.npy", npy_bytes(np.zeros((n + 7, 4), np.float32))))
    add_expert("actions_missing", zip_bytes({k: v for k, v in members.items() if k != "actions.npy"}))
    add_expert("episode_starts_missing", zip_bytes({k: v for k, v in members.items() if k != "episode_starts.npy"}))
    add_expert("episode_returns_strings", replaced("episode_returns.npy", npy_bytes(np.array(["a", "b", "c"]))))
    add_expert("episode_starts_none", replaced("episode_starts.npy", npy_bytes(np.zeros(n, bool))), "any", None)
    add_expert("empty_arrays", zip_bytes({k: npy_bytes(np.zeros((0, 4) if k == "obs.npy" else (0,)))
                                          for k in members}))
    add_expert("obs_scalar", replaced("obs.npy", npy_bytes(np.float32(1.0).reshape(()))))
    inner_bomb, crc, size = deflate_bomb(2 * GiB, prefix=npy_header("<f4", (n, 4)))
    add_expert("member_bomb_behind_small_header", raw_zip(
        [RawMember.deflated(k, v) for k, v in members.items() if k != "obs.npy"]
        + [RawMember("obs.npy", inner_bomb, 8, crc, size)]))
    bz, bz_size = bzip2_bomb()
    add_expert("bzip2_member_1GiB", raw_zip([RawMember.deflated(k, v) for k, v in members.items() if k != "obs.npy"]
                                            + [RawMember("obs.npy", bz, 12, 0, bz_size)]))
    # many 16 MiB members that share one small deflate stream each (expert files may hold any keys)
    chunk = npy_header("<f4", (4 * MiB - 32,)) + bytes(16 * MiB - 128)
    shared = RawMember.deflated("x0.npy", chunk)
    add_expert("extra_members_16MiB_x120", raw_zip([RawMember.deflated(k, v) for k, v in members.items()] + [
        dataclasses.replace(shared, name=f"x{i}.npy") for i in range(120)]))
    add_expert("duplicate_entries_16MiB_x120", raw_zip([RawMember.deflated(k, v) for k, v in members.items()]
                                                       + [shared], [(len(members), "x0.npy")] * 120))
    add_expert("many_members_20k", zip_bytes({**members, **{f"k{i}.npy": npy_bytes(np.zeros(1)) for i in
                                                            range(20_000)}}), "any")
    # image paths: missing, devices, a decompression bomb next to the dataset
    paths = np.array(["/dev/zero"] * n)
    add_expert("image_paths_dev_zero", replaced("obs.npy", npy_bytes(paths)))
    add_expert("image_paths_etc_passwd", replaced("obs.npy", npy_bytes(np.array(["/etc/passwd"] * n))))
    bomb_dir = w.folder / f"{group}__images"
    bomb_dir.mkdir(exist_ok=True)
    (bomb_dir / "0.png").write_bytes(png_bomb(16_000, 16_000))
    add_expert("image_png_bomb_768MB", replaced("obs.npy", npy_bytes(np.array([str(bomb_dir / "0.png")] * n))))
    raw = expert.read_bytes()
    for cut in (0, 1, 30, len(raw) // 2, len(raw) - 1):
        add_expert(f"truncated_{cut}", raw[:cut])
    if "sb2_expert" in goods:
        sb2 = zip_members(Path(goods["sb2_expert"].path))
        add_expert("sb2_expert_obs_to_object", zip_bytes({**sb2, "obs.npy": sb2["obs.npy"].replace(b"<f4", b"|O", 1)}),
                   ref="sb2_expert")
    # replay buffers
    buffer = Path(goods["sbtf_buffer"].path)
    bmembers = zip_members(buffer)
    after_buffer = ["sbtf_buffer"]

    def add_buffer(name: str, payload: bytes, expect: str = "error", loader: str = "buffer") -> None:
        w.add(group, f"buffer_{name}", loader, w.file(f"{group}/buffer_{name}", payload, ".npz"), expect,
              ref="sbtf_buffer", after=after_buffer)

    obs_member = next(k for k in bmembers if "obs" in k)
    add_buffer("obs_declares_3GB", zip_bytes({**bmembers, obs_member: npy_header("<f8", (400_000_000,)) + b"\0" * 8}))
    add_buffer("obs_object", zip_bytes({**bmembers, obs_member: npy_header("|O", (10, 4)) + b"\0" * 8}))
    add_buffer("obs_object_pickled", zip_bytes({**bmembers, obs_member: _object_npy()}))
    add_buffer("maxsize_huge", zip_bytes({**bmembers, "maxsize.npy": npy_bytes(np.array(10 ** 15))}))
    add_buffer("maxsize_negative", zip_bytes({**bmembers, "maxsize.npy": npy_bytes(np.array(-1))}))
    add_buffer("class_name_other", zip_bytes({**bmembers, "class_name.npy": npy_bytes(np.array("os.system"))}))
    add_buffer("format_missing", zip_bytes({k: v for k, v in bmembers.items() if k != "format.npy"}))
    add_buffer("format_object", zip_bytes({**bmembers, "format.npy": _object_npy()}))
    inner_bomb, crc, size = deflate_bomb(2 * GiB, prefix=npy_header("<f4", (10, 4)))
    add_buffer("member_bomb", raw_zip([RawMember.deflated(k, v) for k, v in bmembers.items() if k != obs_member]
                                      + [RawMember(obs_member, inner_bomb, 8, crc, size)]))
    raw = buffer.read_bytes()
    for cut in (0, 1, len(raw) // 2, len(raw) - 1):
        add_buffer(f"truncated_{cut}", raw[:cut])
    add_buffer("obs_declares_3GB__load_replay_buffer", zip_bytes(
        {**bmembers, obs_member: npy_header("<f8", (400_000_000,)) + b"\0" * 8}), loader="replay_buffer:sbtf_dqn")
    add_buffer("pickle_instead__load_replay_buffer", b"\x80\x04" + call(g("os", "system"), f"touch {w.canary}") + b".",
               loader="replay_buffer:sbtf_dqn")


def png_bomb(width: int, height: int) -> bytes:
    """A black RGB PNG of ``width x height`` (``3 * width * height`` bytes decoded) in ~1/1000 of that: raw deflate
    blocks of whole rows, each ending with a full flush, so one compressed block is repeated."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    row = b"\0" * (1 + 3 * width)
    rows_per_block = max(1, (8 * MiB) // len(row))
    full, rest = divmod(height, rows_per_block)
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = comp.compress(row * rows_per_block) + comp.flush(zlib.Z_FULL_FLUSH)
    last = comp.compress(row * rest) + comp.flush(zlib.Z_FULL_FLUSH) if rest else b""
    tail = comp.flush(zlib.Z_FINISH)
    adler = _repeat_checksum(zlib.adler32, 1, row, rows_per_block, full)
    if rest:
        adler = zlib.adler32(row * rest, adler)
    stream = b"\x78\xda" + block * full + last + tail + struct.pack(">I", adler)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", stream) + chunk(b"IEND", b"")


def _trusted_cases(w: _Writer, goods: Dict[str, Good], trusted_canary: str) -> None:
    """Positive controls: with ``allow_pickle=True`` the blobs of the sbtf_code cases do run (so the default-load
    cases above really test that they are not run)."""
    group = "trusted"
    ppo = Path(goods["sbtf_ppo2"].path)
    touch = f"touch {trusted_canary}"
    for name, (key, value) in {
        "pickle_blob": ("cliprange", {"__pickle__": cloudpickle_blob(touch), "repr": "x", "type": "builtins:float"}),
        "callable_pickle_blob": ("learning_rate", {"__callable__": {"repr": "f", "sampled": None,
                                                                    "pickle": cloudpickle_blob(touch)}}),
    }.items():
        path = w.file(f"{group}/{name}", with_data(ppo, lambda d, k=key, v=value: d.__setitem__(k, v)), ".zip")
        w.add(group, name, "model_trusted:PPO2", path, "any", canary_expected=True)


def make_cases(goods: Dict[str, Good], folder: Path, canary: str, trusted_canary: str) -> List[Case]:
    """Write every crafted file into ``folder``; return the cases (grouped by ``Case.group``)."""
    w = _Writer(folder, canary)
    payloads = hostile_pickle_payloads(canary)
    _sbtf_code_cases(w, goods)
    _sbtf_resource_cases(w, goods)
    _sbtf_malformed_cases(w, goods)
    _legacy_naked_cases(w, goods, payloads)
    if "sb2_ppo2_pkl" in goods:
        _legacy_model_cases(w, goods, payloads)
    _legacy_stats_cases(w, goods, payloads)
    _dataset_cases(w, goods)
    _trusted_cases(w, goods, trusted_canary)
    return w.cases


def make_cli_cases(goods: Dict[str, Good], cases: List[Case], folder: Path, canary: str) -> List[CliCase]:
    """``sbtf export`` / ``sbtf enjoy --model`` / ``sbtf convert`` on crafted files, each in its own folder."""
    by_name = {case.name: case for case in cases}
    cli: List[CliCase] = []

    def place(name: str, source: str, filename: str, extra: Optional[Dict[str, bytes]] = None) -> Path:
        run = folder / name
        run.mkdir(parents=True, exist_ok=True)
        target = run / filename
        target.write_bytes(Path(source).read_bytes())
        for extra_name, payload in (extra or {}).items():
            (run / extra_name).write_bytes(payload)
        return target

    def case_path(name: str) -> str:
        return by_name[name].path

    for label, case_name in (("enum_exec", "sbtf_code/enum_builtins_exec"),
                             ("data_object_system", "sbtf_code/data_object_os_system"),
                             ("class_popen", "sbtf_code/class_subprocess_popen")):
        model = place(f"export_{label}", case_path(case_name), "model.zip")
        cli.append(CliCase(f"export/{label}", ["export", str(model), "-o", str(model.parent / "out")],
                           str(model.parent)))
        model = place(f"enjoy_{label}", case_path(case_name), "model.zip")
        cli.append(CliCase(f"enjoy/{label}", ["enjoy", "--algo", "ppo2", "--env", "CartPole-v1", "--model",
                                              str(model), "-n", "5"], str(model.parent)))
    model = place("export_pickle_blob", case_path("sbtf_code/pickle_blob_default"), "model.zip")
    cli.append(CliCase("export/pickle_blob", ["export", str(model), "-o", str(model.parent / "out")],
                       str(model.parent), must_fail=False))
    model = place("enjoy_colliding_keys", case_path("sbtf_resources/json_dict_items_colliding_80k"), "model.zip")
    cli.append(CliCase("enjoy/colliding_keys", ["enjoy", "--algo", "ppo2", "--env", "CartPole-v1", "--model",
                                                str(model), "-n", "5"], str(model.parent)))
    model = place("enjoy_zip_bomb", case_path("sbtf_resources/zip_bomb_parameters_2GiB"), "model.zip")
    cli.append(CliCase("enjoy/zip_bomb", ["enjoy", "--algo", "ppo2", "--env", "CartPole-v1", "--model",
                                          str(model), "-n", "5"], str(model.parent)))
    # a good model next to a hostile vecnormalize.pkl (enjoy and export read it)
    vec_o8 = Path(case_path("legacy_stats/sbtf_vecnormalize_f8_to_O8")).read_bytes()
    model = place("enjoy_vecnormalize_O8", goods["sbtf_ppo2"].path, "model.zip", {"vecnormalize.pkl": vec_o8})
    cli.append(CliCase("enjoy/vecnormalize_O8", ["enjoy", "--algo", "ppo2", "--env", "CartPole-v1", "--model",
                                                 str(model), "-n", "5"], str(model.parent)))
    model = place("export_vecnormalize_O8", goods["sbtf_ppo2"].path, "model.zip", {"vecnormalize.pkl": vec_o8})
    cli.append(CliCase("export/vecnormalize_O8", ["export", str(model), "--vecnormalize",
                                                  str(model.parent / "vecnormalize.pkl"), "-o",
                                                  str(model.parent / "out")], str(model.parent)))
    # a run folder whose config.yml asks for a command
    model = place("enjoy_config_pipepager", goods["sbtf_ppo2"].path, "model.zip", {"config.yml": (
        "env_wrapper:\n  pydoc.pipepager:\n    text: x\n    cmd: touch %s\n" % canary).encode()})
    cli.append(CliCase("enjoy/config_pipepager", ["enjoy", "--algo", "ppo2", "--env", "CartPole-v1", "--model",
                                                  str(model), "-n", "5"], str(model.parent)))
    model = place("enjoy_config_yaml_tag", goods["sbtf_ppo2"].path, "model.zip", {"config.yml": (
        "normalize: !!python/object/apply:os.system ['touch %s']\n" % canary).encode()})
    cli.append(CliCase("enjoy/config_yaml_tag", ["enjoy", "--algo", "ppo2", "--env", "CartPole-v1", "--model",
                                                 str(model), "-n", "5"], str(model.parent)))
    # legacy pickles through convert and export
    for label, case_name in (("reduce_system", "legacy_naked/reduce_os_system__model"),
                             ("dtype_O8", "legacy_naked/dtype_O8_raw_bytes__model"),
                             ("bytes_bomb", "legacy_naked/bytes_3_4G__model"),
                             ("colliding_keys", "legacy_naked/dict_colliding_keys__model")):
        old = place(f"convert_{label}", case_path(case_name), "old.pkl")
        cli.append(CliCase(f"convert/{label}", ["convert", str(old), str(old.parent / "new.zip")], str(old.parent)))
    old = place("export_legacy_reduce_system", case_path("legacy_naked/reduce_os_system__model"), "old.pkl")
    cli.append(CliCase("export/legacy_reduce_system", ["export", str(old), "-o", str(old.parent / "out")],
                       str(old.parent)))
    if "sb2_ppo2_pkl" in goods:
        stats = Path(case_path("legacy_stats/dtype_O8_raw_bytes__obs_rms"))
        old = place("convert_vecnormalize_folder_O8", goods["sb2_ppo2_pkl"].path, "old.pkl")
        cli.append(CliCase("convert/vecnormalize_folder_O8", ["convert", str(old), str(old.parent / "new.zip"),
                                                              "--vecnormalize-folder", str(stats)], str(old.parent)))
        old = place("convert_pkl_exec_in_data", case_path("legacy_model/reduce_os_system__in_pkl_data"), "old.pkl")
        cli.append(CliCase("convert/pkl_exec_in_data", ["convert", str(old), str(old.parent / "new.zip")],
                           str(old.parent)))
    return cli


# ================================================================================================
# once per session (shared by pytest-xdist workers)
# ================================================================================================
@dataclasses.dataclass
class Files:
    root: Path
    goods: Dict[str, Good]
    cases: List[Case]
    cli: List[CliCase]
    canary: str
    trusted_canary: str


def _child_env() -> Dict[str, str]:
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    env["OPENBLAS_NUM_THREADS"] = "1"
    env["MALLOC_ARENA_MAX"] = "2"
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "converters"), env.get("PYTHONPATH", "")])
    return env


def ensure_good_files(root: Path) -> Path:
    """The good files under ``root/good`` (made once, in a child process: training needs TensorFlow)."""
    folder = root / "good"
    if not (folder / "DONE").exists():
        proc = subprocess.run([sys.executable, __file__, "good", str(folder)], capture_output=True, text=True,
                              env=_child_env(), timeout=600, cwd=str(REPO))
        if proc.returncode != 0 or not (folder / "DONE").exists():
            raise RuntimeError(f"making the good files failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return folder


def ensure_files(root: Path) -> Files:
    """Good files, crafted cases and CLI cases under ``root`` (built once; a lock serialises xdist workers)."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        good_folder = ensure_good_files(root)
        goods = good_files(good_folder)
        canary = str(root / "canary" / "CANARY")
        trusted_canary = str(root / "canary" / "TRUSTED_CANARY")
        Path(canary).parent.mkdir(exist_ok=True)
        manifest = root / f"manifest_v{GENERATOR_VERSION}.json"
        if manifest.exists():
            data = json.loads(manifest.read_text())
            cases = [Case(**c) for c in data["cases"]]
            cli = [CliCase(**c) for c in data["cli"]]
        else:
            cases = make_cases(goods, root / "crafted", canary, trusted_canary)
            cli = make_cli_cases(goods, cases, root / "cli", canary)
            manifest.write_text(json.dumps({"cases": [dataclasses.asdict(c) for c in cases],
                                            "cli": [dataclasses.asdict(c) for c in cli]}))
    return Files(root, goods, cases, cli, canary, trusted_canary)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "good":
        make_good_files(Path(sys.argv[2]))
    elif len(sys.argv) == 3 and sys.argv[1] == "all":
        files = ensure_files(Path(sys.argv[2]))
        sizes = sorted(((Path(c.path).stat().st_size if Path(c.path).is_file() else 0), c.name) for c in files.cases)
        print(f"{len(files.cases)} crafted files, {len(files.cli)} CLI cases; largest: {sizes[-3:]}")
    else:
        print("usage: python tests/hostile_files.py good DIR | all DIR", file=sys.stderr)
        sys.exit(2)
