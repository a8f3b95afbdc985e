"""sbtf.common.fileio.safe_pickle: the pure-Python pickle interpreter, and the loaders built on it.

Round trips of real pickles (protocols 0-5) must equal ``pickle.loads``; crafted hostile pickles (written here, at
opcode level or with ``__reduce__``) must raise the right :mod:`sbtf.common.file_errors` type fast, never run code
(no canary file appears) and never change how the next file loads (a good stable-baselines file is read after
each bad one, in the same process).
"""
from __future__ import annotations

import collections
import io
import os
import pickle
import re
import struct
import subprocess
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest

import legacy_fixtures as fx
from crafted_files import peak_memory_growth
from legacy_fixtures import G, Call, NewObj, ZOO

from sbtf.common.fileio import safe_pickle as sp
from sbtf.common.file_errors import (CorruptedFileError, FileLimitError, ModelDataError, ModelFileError,
                                     UnsafeFileError, load_limits)

# the work of one load is bounded by the memory it takes: at most this many times the pickle's size, plus a slack
MEMORY_FACTOR = 64
MEMORY_SLACK = 16 << 20


def _bounded(payload: bytes, action):
    """Run ``action()`` (a load of ``payload``); the process's memory peak may grow by MEMORY_FACTOR x its size."""
    outcome = {}

    def run() -> None:
        try:
            outcome["value"] = action()
        except BaseException as exc:  # noqa: BLE001 - re-raised below, after the bound is checked
            outcome["error"] = exc

    growth = peak_memory_growth(run)
    assert growth <= MEMORY_FACTOR * len(payload) + MEMORY_SLACK, f"{growth:,} bytes for a {len(payload):,}-byte pickle"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


# ================================================================================================
# helpers: opcode-level writers
# ================================================================================================
def _u(text: str) -> bytes:
    data = text.encode()
    return b"X" + struct.pack("<I", len(data)) + data


def _long(value: int) -> bytes:
    data = value.to_bytes((value.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(data)]) + data


def _global(module: str, name: str) -> bytes:
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


class _Reduce:
    """Pickles as ``func(*args)`` (a booby trap when ``func`` runs code)."""

    def __init__(self, func, args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


def _load(payload: bytes, **kwargs):
    """``sp.loads`` whose memory stays bounded by the pickle's size."""
    return _bounded(payload, lambda: sp.loads(payload, **kwargs))


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape
                and a.dtype.newbyteorder("=") == b.dtype.newbyteorder("=") and np.array_equal(a, b))
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple, collections.deque)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and np.isnan(a):
        return np.isnan(b)
    return a == b


# ================================================================================================
# round trips
# ================================================================================================
_SHARED = [1, 2]
VALUES = [
    None, True, False, 0, -1, 255, 65535, 2 ** 31, -2 ** 63, 2 ** 100, 1.5, float("inf"), float("nan"), "",
    "héllo \u20ac \U0001f600", b"", b"\x00\xff" * 10, bytearray(b"abc"), [], [1, [2, [3]]], (), (1,), (1, 2),
    (1, 2, 3), (1, (2, (3, 4))), {}, {"a": 1, 2: [3], (4, 5): None}, {1, 2, 3}, frozenset({1, (2, 3)}),
    collections.OrderedDict([("b", 1), ("a", 2)]), collections.deque([1, 2], maxlen=4), complex(1, -2),
    slice(1, None, 2), [_SHARED, _SHARED, (_SHARED,)],
    np.arange(12, dtype=np.float32).reshape(3, 4), np.asfortranarray(np.arange(6).reshape(2, 3)),
    np.array(3.5), np.array([True, False]), np.zeros((0, 3), np.int16), np.arange(4, dtype=">i4"),
    np.arange(5, dtype=np.uint8), np.linspace(0, 1, 7, dtype=np.float16), np.float32(2.5), np.int64(-3),
    np.bool_(True), np.uint8(7), np.dtype("f8"), np.dtype("<i2"),
    {"obs_rms": {"mean": np.zeros(3), "var": np.ones(3), "count": 1e-4}, "gamma": 0.99, "training": True},
]


@pytest.mark.parametrize("protocol", range(6))
def test_round_trips_equal_pickle_loads(protocol):
    for value in VALUES:
        payload = pickle.dumps(value, protocol=protocol)
        got = _load(payload)
        assert _same(got, pickle.loads(payload)), (protocol, value, got)


def test_arrays_are_writable_native_and_shared_references_kept():
    payload = pickle.dumps({"a": np.arange(3, dtype=">f8"), "b": [_SHARED, _SHARED]}, protocol=2)
    got = _load(payload)
    assert got["a"].flags.writeable and got["a"].dtype.isnative and got["a"].tolist() == [0.0, 1.0, 2.0]
    got["a"][0] = 5.0
    assert got["b"][0] is got["b"][1]


def test_python2_strings_and_text_opcodes():
    assert _load(b"S'caf\\xe9'\np0\n.") == "caf\xe9"  # STRING decoded as latin-1
    assert _load(b"(I1\nI01\nL12L\nF2.5\nVx\\u20ac\ntp1\n.") == (1, True, 12, 2.5, "x\u20ac")
    assert _load(b"\x80\x02U\x03abcq\x00h\x00\x86.") == ("abc", "abc")
    assert _load(b"\x80\x02c__builtin__\nset\n]\x85R.") == set()  # Python 2 names are mapped


def test_inst_obj_newobj_ex_build_fresh_records():
    from sbtf_converters.sb2_pickle import LegacyObject, RefusedGlobalError, restricted_loads

    box = restricted_loads(b"(igym.spaces.box\nBox\n(dS'low'\nF0.5\nsb.")
    discrete = restricted_loads(b"\x80\x02(cgym.spaces.discrete\nDiscrete\nK\x03o}X\x01\x00\x00\x00nK\x03sb.")
    other = restricted_loads(b"\x80\x04cgym.spaces.discrete\nDiscrete\n)}\x92.")
    assert isinstance(box, LegacyObject) and box.state == {"low": 0.5}
    assert discrete.args == (3,) and discrete.state == {"n": 3} and other.state == {}
    assert type(discrete) is type(other) and discrete is not other
    with pytest.raises(RefusedGlobalError, match=r"os\.system"):
        restricted_loads(b"(ios\nsystem\nS'ls'\n.")


def test_unknown_global_is_an_inert_reference():
    value = _load(pickle.dumps({"fn": os.system}))
    assert isinstance(value["fn"], sp.Ref) and value["fn"].path == "posix.system"
    with pytest.raises(AttributeError):
        value["fn"].module = "x"


def test_trusted_mode_imports_and_runs_real_classes():
    value = collections.Counter("aab")
    assert _load(pickle.dumps(value), trusted=True) == value
    with pytest.raises(UnsafeFileError, match="collections.Counter"):
        _load(pickle.dumps(value))


# ================================================================================================
# hostile pickles
# ================================================================================================
def _colliding_dict(n: int) -> bytes:
    body = b"".join(_long(k * (2 ** 61 - 1)) + b"N" for k in range(1, n + 1))  # every key hashes to 0
    return b"\x80\x04}(" + body + b"u."


def _colliding_set(n: int) -> bytes:
    return b"\x80\x04\x8f(" + b"".join(_long(k * (2 ** 61 - 1)) for k in range(1, n + 1)) + b"\x90."


def _distinct_int_keys(n: int) -> bytes:
    return b"\x80\x04}(" + b"".join(b"J" + struct.pack("<i", k) + b"N" for k in range(n)) + b"u."


def _deep_tuples(n: int) -> bytes:
    return b"\x80\x04N" + b"\x85" * n + b"."


def _deep_lists_top_down(n: int) -> bytes:
    out = io.BytesIO()
    out.write(b"\x80\x04]\x94")
    for i in range(1, n):
        out.write(b"j" + struct.pack("<I", i - 1) + b"]\x94a0")  # get parent, new list, append, pop
    out.write(b"j" + struct.pack("<I", 0) + b".")
    return out.getvalue()


def _doubling_lists(n: int) -> bytes:
    out = io.BytesIO()
    out.write(b"\x80\x04]\x94")
    for i in range(n):
        out.write(b"]\x94(h" + bytes([i]) + b"h" + bytes([i]) + b"e")  # L[i+1] = [L[i], L[i]]
    out.write(b".")
    return out.getvalue()


def _repeated_codecs(size: int, times: int) -> bytes:
    text = b"\x8d" + struct.pack("<Q", size) + b"x" * size
    call = b"\x8c\x07_codecs\x8c\x06encode\x93h\x00\x8c\x06latin1\x86R0"
    return b"\x80\x04" + text + b"\x94" + call * times + b"N."


def _array_call(dtype_code: str, shape: tuple, raw: bytes, fields=None) -> bytes:
    dtype_state = (b"(K\x03" + _u("<") + b"N" + (b"(" + _u(fields) + b"t" if fields else b"N")
                   + b"NJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb")
    dtype = _global("numpy", "dtype") + _u(dtype_code) + b"\x89\x88\x87R" + dtype_state
    shape_bytes = b"(" + b"".join(b"J" + struct.pack("<i", s) for s in shape) + b"t"
    return (b"\x80\x02" + _global("numpy.core.multiarray", "_reconstruct") + _global("numpy", "ndarray")
            + b"K\x00\x85C\x01b\x87R(K\x01" + shape_bytes + dtype + b"\x89B" + struct.pack("<I", len(raw)) + raw
            + b"tb.")


HOSTILE = {
    "object-dtype array": (lambda tmp: _array_call("O8", (2,), b"\x00" * 16), ModelDataError),
    "forged dtype fields": (lambda tmp: _array_call("f8", (1,), b"\x00" * 8, fields="a"), ModelDataError),
    "array data of the wrong size": (lambda tmp: _array_call("f8", (1000,), b"\x00" * 8), CorruptedFileError),
    "bytes(10**10)": (lambda tmp: pickle.dumps(_Reduce(bytes, (10 ** 10,))), UnsafeFileError),
    "bytearray(3.4e9)": (lambda tmp: pickle.dumps(_Reduce(bytearray, (3_400_000_000,))), UnsafeFileError),
    "codecs encode other than latin-1": (lambda tmp: pickle.dumps(_Reduce(__import__("_codecs").encode,
                                                                           ("x", "zlib_codec"))), UnsafeFileError),
    "repeated codecs.encode": (lambda tmp: _repeated_codecs(100_000, 400), FileLimitError),
    "100k colliding int keys": (lambda tmp: _colliding_dict(100_000), FileLimitError),
    "colliding set elements": (lambda tmp: _colliding_set(20_000), FileLimitError),
    "100k distinct int keys": (lambda tmp: _distinct_int_keys(100_000), FileLimitError),
    "deeply nested tuples": (lambda tmp: _deep_tuples(200_000), FileLimitError),
    "deeply nested lists": (lambda tmp: _deep_lists_top_down(100_000), FileLimitError),
    "self-referencing list": (lambda tmp: b"\x80\x04]\x94h\x00a.", FileLimitError),
    "doubling list DAG": (lambda tmp: _doubling_lists(60), FileLimitError),
    "huge integer": (lambda tmp: b"\x80\x04\x8b" + struct.pack("<i", 1 << 20) + b"\x01" * (1 << 20) + b".",
                     FileLimitError),
    "string longer than the file": (lambda tmp: b"\x80\x04\x8d" + struct.pack("<Q", 1 << 40) + b".",
                                    FileLimitError),
    "os.system": (lambda tmp: pickle.dumps(_Reduce(os.system, (f"touch {tmp / 'canary'}",))), UnsafeFileError),
    "builtins.exec": (lambda tmp: pickle.dumps(_Reduce(exec, (f"open({str(tmp / 'canary')!r}, 'w')",))),
                      UnsafeFileError),
    "builtins.eval": (lambda tmp: pickle.dumps(_Reduce(eval, (f"open({str(tmp / 'canary')!r}, 'w')",))),
                      UnsafeFileError),
    "subprocess.Popen": (lambda tmp: pickle.dumps(_Reduce(subprocess.Popen, (["touch", str(tmp / "canary")],))),
                         UnsafeFileError),
    "NEWOBJ of Popen": (lambda tmp: fx.dumps(NewObj(G("subprocess", "Popen"), (["touch", str(tmp / "canary")],))),
                        UnsafeFileError),
    "copyreg._reconstructor of Popen": (lambda tmp: fx.dumps(Call(G("copyreg", "_reconstructor"), (
        G("subprocess", "Popen"), G("builtins", "object"), None))), UnsafeFileError),
    "persistent id": (lambda tmp: b"\x80\x04Pfile\n.", UnsafeFileError),
    "extension registry": (lambda tmp: b"\x80\x04\x82\x01.", UnsafeFileError),
    "out-of-band buffer": (lambda tmp: b"\x80\x05\x97.", CorruptedFileError),
    "truncated": (lambda tmp: pickle.dumps({"a": np.zeros(3)})[:-7], CorruptedFileError),
    "not a pickle": (lambda tmp: b"hello world", CorruptedFileError),
    "unknown opcode": (lambda tmp: b"\x80\x04\xff.", CorruptedFileError),
}


def _good_sb2_file(tmp_path: Path) -> Path:
    params = fx.mlp_params(4, 2, [], [64, 64], [64, 64], box_logstd=False, seed=3)
    data = fx.ppo2_data(fx.box(-1.0, 1.0, (4,)), fx.discrete(2), fx.policy("MlpPolicy"))
    return fx.write_pkl(tmp_path / "good.pkl", data, params, as_dict=True)


def _check_good_files_load(good: Path, reference: dict) -> None:
    from sbtf_converters.legacy import parse_sb2

    parsed = parse_sb2(good)
    assert parsed.algorithm == "PPO2" and parsed.policy_name == "MlpPolicy"
    assert all(np.array_equal(parsed.params[k], v) for k, v in reference.items())
    zoo = ZOO / "ppo2" / "CartPole-v1.pkl"
    if zoo.exists():
        assert parse_sb2(zoo).algorithm == "PPO2"


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_pickles_raise_typed_errors_fast(tmp_path, name):
    from sbtf_converters.legacy import parse_sb2
    from sbtf_converters.sb2_pickle import restricted_loads

    good = _good_sb2_file(tmp_path)
    reference = dict(parse_sb2(good).params)
    make, expected = HOSTILE[name]
    payload = make(tmp_path)
    with pytest.raises(expected):
        _load(payload)
    with pytest.raises(expected):  # the stable-baselines reader: same error family
        _bounded(payload, lambda: restricted_loads(payload))
    assert not (tmp_path / "canary").exists()
    _check_good_files_load(good, reference)


def test_refused_globals_are_refused_by_the_stable_baselines_reader_with_its_error(tmp_path):
    from sbtf_converters.sb2_pickle import RefusedGlobalError, restricted_loads

    with pytest.raises(RefusedGlobalError, match=r"posix\.system") as info:
        restricted_loads(pickle.dumps(_Reduce(os.system, (f"touch {tmp_path / 'canary'}",))))
    assert isinstance(info.value, UnsafeFileError) and isinstance(info.value, pickle.UnpicklingError)
    assert not (tmp_path / "canary").exists()


def test_build_on_shared_markers_cannot_change_later_loads(tmp_path):
    """Issue item 4: BUILD with slot state aimed at sbtf's SB2 stand-ins; a real file must load afterwards."""
    from sbtf_converters.legacy import parse_sb2
    from sbtf_converters.sb2_pickle import RefusedGlobalError, restricted_loads

    good = _good_sb2_file(tmp_path)
    reference = dict(parse_sb2(good).params)
    on_marker = (b"\x80\x04" + _global("stable_baselines.common.policies", "MlpPolicy") + b"N}(" + _u("sb2_kind")
                 + _u("unknown") + _u("sb2_name") + _u("x") + b"u\x86b.")
    with pytest.raises(RefusedGlobalError, match=r"stable_baselines\.common\.policies\.MlpPolicy"):
        restricted_loads(on_marker)
    on_record = (b"\x80\x04" + _global("gym.spaces.box", "Box") + b")\x81N}(" + _u("sb2_kind") + _u("policy")
                 + _u("__class__") + b"N" + b"u\x86b.")
    record = restricted_loads(on_record)
    assert record.sb2_kind == "space" and set(record.state) == {"sb2_kind", "__class__"}
    on_dtype_builder = b"\x80\x04" + _global("numpy", "dtype") + b"N}" + _u("__call__") + b"Ns\x86b."
    with pytest.raises(UnsafeFileError):
        restricted_loads(on_dtype_builder)
    _check_good_files_load(good, reference)


def test_limits_are_configurable():
    payload = _distinct_int_keys(5000)
    with pytest.raises(FileLimitError):
        _load(payload)
    with load_limits(max_nonstring_keys=10_000):
        assert len(_load(payload)) == 5000
    nested = pickle.dumps([[[[1]]]])
    with load_limits(max_depth=2), pytest.raises(FileLimitError):
        _load(nested)


def test_mutated_real_pickles_raise_only_typed_errors(tmp_path):
    """A small fuzz: byte flips of an SB2 model pickle and of an sbtf VecNormalize file."""
    seeds = [_good_sb2_file(tmp_path).read_bytes(),
             pickle.dumps({"obs_rms": {"mean": np.zeros(3), "var": np.ones(3), "count": 5.0}, "gamma": 0.99},
                          protocol=pickle.HIGHEST_PROTOCOL)]
    zoo = ZOO / "ppo2" / "MountainCar-v0" / "obs_rms.pkl"
    if zoo.exists():
        seeds.append(zoo.read_bytes())
    rng = np.random.default_rng(0)
    from sbtf_converters.sb2_pickle import materialize, restricted_loads
    for seed in seeds:
        for _ in range(60):
            data = bytearray(seed)
            for _ in range(int(rng.integers(1, 4))):
                data[int(rng.integers(len(data)))] = int(rng.integers(256))
            if rng.random() < 0.2:
                data = data[: int(rng.integers(len(data)))]
            try:
                _bounded(bytes(data), lambda data=data: materialize(restricted_loads(bytes(data))))
            except ModelFileError:
                pass


# ================================================================================================
# loaders built on the interpreter
# ================================================================================================
def _reward_venv():
    import gymnasium as gym
    from sbtf.common.vec_env import DummyVecEnv

    return DummyVecEnv([lambda: gym.make("MountainCar-v0")])


def test_vec_normalize_files(tmp_path):
    from sbtf.common.vec_env.vec_normalize import VecNormalize

    venv = VecNormalize(_reward_venv())
    path = tmp_path / "vecnormalize.pkl"
    venv.save(str(path))
    assert path.stat().st_mode & 0o777 == 0o666 & ~_umask()
    payload = path.read_bytes()
    hostile = tmp_path / "hostile.pkl"
    for old, new, error in ((b"f8", b"O8", ModelDataError), (b"gamma", b"gammX", None),
                            (b"\x8c\x05gamma", b"\x8c\x05\x00amma", None)):
        hostile.write_bytes(payload.replace(old, new))
        if error is None:
            VecNormalize.load(str(hostile), _reward_venv())  # still valid statistics
            continue
        with pytest.raises(error, match=re.escape(str(hostile))):
            VecNormalize.load(str(hostile), _reward_venv())
    state = pickle.loads(payload)
    state["obs_rms"]["count"] = float("nan")
    hostile.write_bytes(pickle.dumps(state))
    with pytest.raises(ModelDataError, match="count"):
        VecNormalize.load(str(hostile), _reward_venv())
    state["obs_rms"]["count"], state["clip_obs"] = 3.0, "10"
    hostile.write_bytes(pickle.dumps(state))
    with pytest.raises(ModelDataError, match="clip_obs"):
        VecNormalize.load(str(hostile), _reward_venv())
    hostile.write_bytes(_repeated_codecs(100_000, 400))
    with pytest.raises(FileLimitError, match="hostile"):
        VecNormalize.load(str(hostile), _reward_venv())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        venv.save_running_average(str(tmp_path / "pair"))
    assert sorted(os.listdir(tmp_path / "pair")) == ["obs_rms.pkl", "ret_rms.pkl"]
    assert (tmp_path / "pair" / "obs_rms.pkl").stat().st_mode & 0o777 == 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _npy_header_only(descr: str, shape: tuple) -> bytes:
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}".encode()
    header += b" " * (118 - len(header)) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header


def test_expert_dataset_npz_is_size_checked(tmp_path):
    from sbtf.gail.dataset.dataset import ExpertDataset

    path = tmp_path / "bomb.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("obs.npy", _npy_header_only("<f8", (270_000_000,)))  # announces 2.2 GB
        for key in ("actions", "episode_returns", "episode_starts"):
            buffer = io.BytesIO()
            np.save(buffer, np.zeros(3))
            archive.writestr(f"{key}.npy", buffer.getvalue())
    with pytest.raises((FileLimitError, CorruptedFileError)):
        _bounded(path.read_bytes(), lambda: ExpertDataset(expert_path=str(path), verbose=0))
    np.savez(tmp_path / "bytes.npz", obs=np.array([b"a", b"b"]), actions=np.zeros(2))
    with pytest.raises(ModelDataError, match="np.savez"):
        ExpertDataset(expert_path=str(tmp_path / "bytes.npz"), verbose=0)


def test_replay_buffer_file_is_checked_before_allocation(tmp_path):
    from sbtf.common.buffers import ReplayBuffer, load_buffer

    buffer = ReplayBuffer(4)
    buffer.add(np.zeros(3), 1, 1.0, np.ones(3), False)
    path = tmp_path / "buffer.npz"
    buffer.save(path)
    with np.load(path) as archive:
        arrays = {k: archive[k] for k in archive.files}
    arrays["maxsize"] = np.array(10 ** 12)
    np.savez(tmp_path / "huge.npz", **arrays)
    with pytest.raises((FileLimitError, ModelDataError), match="maxsize"):
        load_buffer(tmp_path / "huge.npz")
    arrays["maxsize"] = np.array(4)
    arrays["obs_t"] = np.zeros((1, 5))
    np.savez(tmp_path / "shapes.npz", **arrays)
    with pytest.raises(ModelDataError, match="obs_t"):
        load_buffer(tmp_path / "shapes.npz")
    assert len(load_buffer(path)) == 1
