"""Load budgets of the shared readers (issue #34): every crafted file below is built here, in a few bytes, and must
raise a :class:`ModelFileError` subclass with a message saying what is wrong, while the work done is bounded by
what is counted — bytes produced by a decompressor, Python memory allocated (``tracemalloc`` peak), objects and
opcodes charged by the pickle interpreter, items charged by the JSON decoder — never by seconds.

* zip members: sbtf's decompressors stop at a member's declared size for stored, deflate, bzip2 and lzma
  members; corrupt compressed data is a :class:`CorruptedFileError`; an archive's members share one output budget;
* ``.npy`` headers numpy itself cannot read (``'descr': ()``, ``'shape': (True,)``, too many dimensions);
* the pickle interpreter charges every object it pushes (``EMPTY_SET`` x millions) and refuses memo indices that a
  file of its size cannot use (so ``k * (2**61 - 1)`` indices cost nothing);
* JSON ``data``: values and containers counted before ``json.loads``; ``__dict_items__`` keys sharing one hash;
  one item budget for the whole document;
* messages format hostile values through ``describe_value`` only.
"""
from __future__ import annotations

import base64
import bz2
import io
import json
import pickle
import struct
import tracemalloc
import zipfile
from pathlib import Path
from typing import Callable, List

import numpy as np
import pytest

from sbtf.common.fileio import safe_pickle as sp
from sbtf.common import save_util
from sbtf.common.file_errors import (CorruptedFileError, FileLimitError, ModelFileError,
                                     describe_value, load_limits)
from sbtf.common.fileio.safe_zip import open_zip, output_budget, read_member, read_npz

from crafted_files import BZIP2_1200MB, Member, bomb, build_zip, corrupt, peak_memory_growth, zip_member

SB2_ACKTR = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "sb2_zoo" / "acktr" / "Pendulum-v0.zip"

# ------------------------------------------------------------------------------------------------ helpers
def peak_bytes(action: Callable[[], object]) -> int:
    """The peak of Python memory allocated (tracemalloc) while ``action`` runs."""
    tracemalloc.start()
    try:
        action()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


def raises_within(error: type, action: Callable[[], object], max_peak: int, match: str = "",
                  measure: Callable[[Callable[[], object]], int] = peak_bytes) -> ModelFileError:
    """``action`` raises ``error`` (a ModelFileError) whose message matches ``match``, allocating at most ``max_peak``
    bytes on the way (``measure``: Python memory by default; ``peak_memory_growth`` for the process's peak)."""
    caught: List[BaseException] = []

    def run() -> None:
        try:
            action()
        except BaseException as exc:  # noqa: BLE001 - checked below
            caught.append(exc)

    peak = measure(run)
    assert caught, f"no error raised (expected {error.__name__})"
    exc = caught[0]
    assert isinstance(exc, error), f"{type(exc).__name__}: {exc}"
    assert isinstance(exc, ModelFileError)
    assert match.lower() in str(exc).lower(), str(exc)
    assert len(str(exc)) < 1500, "the message formats an untrusted value without bound"
    assert peak <= max_peak, f"allocated {peak:,} bytes (bound {max_peak:,})"
    return exc


def npy(descr: str, shape: str, data: bytes = b"", fortran: str = "False") -> bytes:
    header = f"{{'descr': {descr}, 'fortran_order': {fortran}, 'shape': {shape}, }}".encode()
    header += b" " * (63 - (len(header) + 10) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + data


def npy_of(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


METHODS = {"deflate": zipfile.ZIP_DEFLATED, "bzip2": zipfile.ZIP_BZIP2, "lzma": zipfile.ZIP_LZMA}


# ------------------------------------------------------------------------------------------------ good files
@pytest.fixture(scope="module")
def good_model(tmp_path_factory) -> Path:
    from sbtf import PPO2

    path = tmp_path_factory.mktemp("budgets") / "good.zip"
    PPO2("MlpPolicy", "CartPole-v1", n_steps=16, nminibatches=1, seed=0).save(path)
    return path


def model_members(path: Path) -> dict:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def model_with(good: Path, target: Path, replace: dict) -> Path:
    """The good model file with some members replaced by raw members (``name -> Member``) or bytes."""
    members = []
    for name, payload in model_members(good).items():
        value = replace.get(name, payload)
        members.append(value if isinstance(value, tuple) else zip_member(name, value))
    target.write_bytes(build_zip(members))
    return target


def first_parameter(good: Path) -> np.ndarray:
    members = model_members(good)
    with np.load(io.BytesIO(members["parameters"])) as arrays:
        return arrays[json.loads(members["parameter_list"])[0]]


def params_with(good: Path, first: Member) -> bytes:
    """The good model's parameters npz with its first array replaced by ``first`` (renamed to that array)."""
    members = model_members(good)
    names = json.loads(members["parameter_list"])
    with zipfile.ZipFile(io.BytesIO(members["parameters"])) as archive:
        arrays = [(info.filename, archive.read(info)) for info in archive.infolist()]
    out = []
    for name, payload in arrays:
        if name == names[0] + ".npy":
            out.append((name,) + first[1:])
        else:
            out.append(zip_member(name, payload, zipfile.ZIP_STORED))
    return build_zip(out)


# ================================================================================================ decompressors
@pytest.mark.parametrize("method", sorted(METHODS))
def test_a_member_stops_at_its_declared_size(method):
    archive_bytes = build_zip([bomb("data", METHODS[method], declared=1000, inflated=4 << 20)])
    archive = open_zip(archive_bytes, "model file")
    with archive:
        raises_within(CorruptedFileError, lambda: read_member(archive, "data", 1 << 20, "model file"),
                      max_peak=400_000, match="inflates to more than its declared size of 1,000 bytes")
        assert archive.bytes_out == 1000  # the 4 MiB behind it were never produced
    # the same member with its true size loads, and reading it twice costs the same
    good = build_zip([zip_member("data", b"abc" * 1000, METHODS[method])])
    with open_zip(good, "model file") as archive:
        assert read_member(archive, "data", 1 << 20) == b"abc" * 1000
        assert read_member(archive, "data", 1 << 20) == b"abc" * 1000
        assert archive.bytes_out == 6000


def test_a_bzip2_member_of_1000_bytes_inflating_to_1_2_gb_stops_after_1000_bytes(good_model, tmp_path):
    from sbtf import PPO2

    assert len(BZIP2_1200MB) < 1000 and bz2.BZ2Decompressor().decompress(BZIP2_1200MB, 10) == bytes(10)
    for name in ("parameters", "data"):
        path = model_with(good_model, tmp_path / f"bomb_{name}.zip",
                          {name: bomb(name, zipfile.ZIP_BZIP2, 1000, 1_200_000_000)})
        raises_within(CorruptedFileError, lambda path=path: PPO2.load(path), max_peak=2 << 20,
                      match="declared size")
    # sbtf export's detection of the algorithm reads sbtf_format the same way
    from sbtf_converters.export import detect_algorithm

    assert detect_algorithm(str(good_model)) == "PPO2"
    path = model_with(good_model, tmp_path / "bomb_format.zip",
                      {"sbtf_format": bomb("sbtf_format", zipfile.ZIP_BZIP2, 1000, 1_200_000_000)})
    raises_within(CorruptedFileError, lambda: detect_algorithm(str(path)), max_peak=2 << 20, match="declared size")
    # load_parameters reads the same member
    path = model_with(good_model, tmp_path / "bomb_params2.zip",
                      {"parameters": bomb("parameters", zipfile.ZIP_BZIP2, 1000, 1_200_000_000)})
    model = PPO2.load(good_model)
    raises_within(CorruptedFileError, lambda: model.load_parameters(str(path)), max_peak=2 << 20,
                  match="declared size")


@pytest.mark.parametrize("method", sorted(METHODS))
def test_an_array_member_inflating_past_its_size_is_refused_by_every_npz_reader(good_model, tmp_path, method):
    from sbtf import PPO2
    from sbtf.gail.dataset.dataset import ExpertDataset

    header = npy("'<f4'", "(218,)")                      # 128 + 872 bytes = the declared 1,000
    assert len(header) + 872 == 1000
    stream = bomb("obs.npy", METHODS[method], declared=1000, inflated=4 << 20, prefix=header)
    # the parameters of an sbtf model file: the first array's own header, then more data than it declares
    first = first_parameter(good_model)
    header = npy(repr(first.dtype.str), repr(first.shape))
    declared = len(header) + first.nbytes
    params = params_with(good_model, bomb("p.npy", METHODS[method], declared, 4 << 20, prefix=header))
    path = model_with(good_model, tmp_path / f"npy_{method}.zip", {"parameters": zip_member("parameters", params)})
    raises_within(CorruptedFileError, lambda: PPO2.load(path), max_peak=2 << 20, match="declared size")
    # read_npz directly
    raises_within(CorruptedFileError, lambda: read_npz(build_zip([stream])), max_peak=400_000, match="declared size")
    # an expert dataset
    expert = tmp_path / f"expert_{method}.npz"
    expert.write_bytes(build_zip([stream] + [zip_member(f"{k}.npy", npy_of(np.zeros(3)))
                                             for k in ("actions", "episode_returns", "rewards", "episode_starts")]))
    raises_within(ModelFileError, lambda: ExpertDataset(expert_path=str(expert), verbose=0), max_peak=2 << 20,
                  match="declared size")


@pytest.mark.parametrize("method", sorted(METHODS))
def test_corrupt_compressed_data_is_a_corrupted_file_error(good_model, tmp_path, method):
    from sbtf import PPO2
    from sbtf.gail.dataset.dataset import ExpertDataset

    with open_zip(build_zip([corrupt("data", METHODS[method])]), "model file") as archive:
        raises_within(CorruptedFileError, lambda: read_member(archive, "data", 1 << 20, "model file"),
                      max_peak=1 << 20, match="corrupt")
    path = model_with(good_model, tmp_path / f"corrupt_{method}.zip",
                      {"parameters": corrupt("parameters", METHODS[method])})
    raises_within(CorruptedFileError, lambda: PPO2.load(path), max_peak=4 << 20, match="parameters")
    expert = tmp_path / f"corrupt_{method}.npz"
    expert.write_bytes(build_zip([corrupt("obs.npy", METHODS[method])]))
    raises_within(ModelFileError, lambda: ExpertDataset(expert_path=str(expert), verbose=0), max_peak=4 << 20)


def test_lzma_properties_and_truncated_streams_are_corrupted_file_errors():
    good = zip_member("data", b"x" * 5000, zipfile.ZIP_LZMA)
    name, method, comp, size, crc = good
    cases = {
        "bad properties": comp[:4] + b"\xff" + comp[5:],
        "truncated header": comp[:3],
        "truncated stream": comp[: len(comp) // 2],
    }
    for _label, stream in cases.items():
        with open_zip(build_zip([(name, method, stream, size, crc)])) as archive:
            raises_within(CorruptedFileError, lambda: read_member(archive, "data", 1 << 20), max_peak=1 << 20)
    with open_zip(build_zip([(name, method, comp, size, crc ^ 1)])) as archive:
        raises_within(CorruptedFileError, lambda: read_member(archive, "data", 1 << 20), max_peak=1 << 20, match="CRC")
    with open_zip(build_zip([(name, 99, comp, size, crc)])) as archive:
        raises_within(CorruptedFileError, lambda: read_member(archive, "data", 1 << 20), max_peak=1 << 20,
                      match="method")
    # a stream shorter than it declares
    with open_zip(build_zip([(name, method, comp, size + 10, crc)])) as archive:
        raises_within(CorruptedFileError, lambda: read_member(archive, "data", 1 << 20), max_peak=1 << 20,
                      match="before its declared size")


def test_the_members_of_one_archive_share_one_output_budget():
    # 12 members of 4 MiB of zeros each: every one is small and honest, together they inflate 48 MiB from 50 kB
    members = [zip_member(f"m{i}", bytes(4 << 20)) for i in range(12)]
    payload = build_zip(members)
    limit = output_budget(len(payload))
    assert limit < 24 << 20
    with open_zip(payload, "model file") as archive:
        def read_all() -> None:
            for i in range(12):
                read_member(archive, f"m{i}", 8 << 20, "model file")

        raises_within(FileLimitError, read_all, max_peak=12 << 20, match="inflate to more than")
        assert archive.bytes_out <= limit + (1 << 16)
    with load_limits(max_compression_ratio=2000):
        with open_zip(payload, "model file") as archive:
            assert [len(read_member(archive, f"m{i}", 8 << 20)) for i in range(12)] == [4 << 20] * 12


# ================================================================================================ .npy headers
NPY_HEADERS = {
    "descr is an empty tuple": ("()", "(3,)", "header"),
    "shape holds True": ("'<f4'", "(True,)", "shape"),
    "shape holds a float": ("'<f4'", "(3.0,)", "header"),
    "40 dimensions": ("'<f4'", "(" + "1, " * 40 + ")", "shape"),
    "70 dimensions": ("'<f4'", "(" + "1, " * 70 + ")", "shape"),
    "negative dimension": ("'<f4'", "(-1,)", "shape"),
    "descr is a list of garbage": ("[('a',)]", "(3,)", "header"),
}


@pytest.mark.parametrize("case", sorted(NPY_HEADERS))
def test_npy_headers_numpy_cannot_read_are_corrupted_file_errors(good_model, tmp_path, case):
    from sbtf import PPO2
    from sbtf.gail.dataset.dataset import ExpertDataset

    descr, shape, words = NPY_HEADERS[case]
    payload = npy(descr, shape, bytes(12))
    raises_within(CorruptedFileError, lambda: read_npz(build_zip([zip_member("x.npy", payload)])), max_peak=1 << 20,
                  match=words)
    path = model_with(good_model, tmp_path / "npy.zip",
                      {"parameters": zip_member("parameters", params_with(good_model, zip_member("x.npy", payload)))})
    raises_within(CorruptedFileError, lambda: PPO2.load(path), max_peak=4 << 20, match=words)
    expert = tmp_path / "expert.npz"
    expert.write_bytes(build_zip([zip_member("obs.npy", payload)]))
    raises_within(CorruptedFileError, lambda: ExpertDataset(expert_path=str(expert), verbose=0), max_peak=4 << 20,
                  match=words)


# ================================================================================================ pickles
def run_pickle(payload: bytes, **limits: int) -> sp.SafeUnpickler:
    """Load ``payload`` (which must fail with a FileLimitError); the reader, for its counters."""
    with load_limits(**limits):
        reader = sp.SafeUnpickler(payload, sp.table_resolver(sp.NUMPY_HANDLERS, sp.DATA_HANDLERS))
        raises_within(FileLimitError, reader.load, max_peak=64 * len(payload) + (1 << 20), match="builds more than")
    return reader


@pytest.mark.parametrize("opcode", [b"\x8f", b"}", b"]", b"N", b"(", b")"])
def test_every_pushed_object_is_charged(opcode):
    """600,000 EMPTY_SET (or EMPTY_DICT, EMPTY_LIST, NONE, MARK, EMPTY_TUPLE) opcodes stop after the item budget."""
    payload = b"\x80\x04" + opcode * 600_000 + b"."
    reader = run_pickle(payload, max_items=20_000)
    assert reader.pos <= 20_002 + 2   # stopped after at most max_items opcodes of 600,000
    assert reader.items <= 20_000 + 4


def test_six_million_empty_sets_stop_early_at_the_default_limits():
    payload = b"\x80\x04" + b"\x8f" * 6_000_000 + b"."
    reader = sp.SafeUnpickler(payload, None)
    raises_within(FileLimitError, reader.load, max_peak=200 << 20, match="builds more than 2,000,000 items",
                  measure=peak_memory_growth)  # was 1.37 GiB: every set built, none counted
    assert reader.pos < 600_000             # an empty set is charged 4 items: 500,000 of them at most


def test_a_real_pickle_with_many_objects_still_loads():
    value = {"a": [set(), {}, [], None, ()] * 2000, "b": [str(i) for i in range(20_000)], "c": np.arange(10.0)}
    for protocol in (0, 2, 4, 5):
        loaded = sp.loads(pickle.dumps(value, protocol=protocol))
        assert loaded["b"] == value["b"] and loaded["a"][:5] == [set(), {}, [], None, ()]
        np.testing.assert_array_equal(loaded["c"], value["c"])


def test_memo_indices_that_hash_alike_cost_nothing():
    """30,000 PUTs with indices k * (2**61 - 1) (all hashing to 0) were quadratic (58 s): now the first is refused."""
    payload = b"\x80\x02N" + b"".join(b"p%d\n" % (k * (2 ** 61 - 1)) for k in range(1, 30_001)) + b"."
    reader = sp.SafeUnpickler(payload, None)
    raises_within(CorruptedFileError, reader.load, max_peak=1 << 20, match="memo index")
    assert reader.pos < 40                  # refused at the first PUT
    for op in (b"r" + struct.pack("<I", 2 ** 32 - 1), b"g999999999\n", b"j" + struct.pack("<I", 2 ** 31)):
        with pytest.raises(CorruptedFileError, match="memo"):
            sp.loads(b"\x80\x02N" + op + b".")
    # a stream that memoizes every value (as pickle does) is not affected
    value = [str(i) for i in range(5000)]
    assert sp.loads(pickle.dumps(value, protocol=0)) == value


def test_keys_chosen_to_collide_are_refused_in_dicts_and_sets():
    keys = b"".join(b"\x8a\x09" + (k * (2 ** 61 - 1)).to_bytes(9, "little", signed=True) + b"N" for k in range(1, 200))
    payload = b"\x80\x02}(" + keys + b"u."
    reader = sp.SafeUnpickler(payload, None)
    raises_within(FileLimitError, reader.load, max_peak=1 << 20, match="share one hash")
    assert reader.items < 1200              # refused after a few dozen of the 199 keys were inserted


def test_hostile_pickles_reach_the_sb2_reader_and_vecnormalize_bounded(tmp_path):
    from sbtf_converters.sb2_pickle import pickle_globals, restricted_loads

    sets = b"\x80\x04" + b"\x8f" * 400_000 + b"."
    with load_limits(max_items=50_000):
        raises_within(FileLimitError, lambda: restricted_loads(sets), max_peak=8 << 20, match="more than 50,000")
        with pytest.raises(ValueError, match="opcodes"):
            pickle_globals(sets)
    memo = b"\x80\x02N" + b"".join(b"p%d\n" % (k * (2 ** 61 - 1)) for k in range(1, 30_001)) + b"."
    raises_within(CorruptedFileError, lambda: restricted_loads(memo), max_peak=1 << 20, match="memo index")
    with pytest.raises(ValueError, match="memo index"):
        pickle_globals(memo)
    import gymnasium as gym

    from sbtf.common.vec_env import DummyVecEnv, VecNormalize

    venv = DummyVecEnv([lambda: gym.make("CartPole-v1")])
    for name, payload in (("sets", sets), ("memo", memo)):
        path = tmp_path / f"{name}.pkl"
        path.write_bytes(payload)
        with load_limits(max_items=50_000):
            raises_within(ModelFileError, lambda path=path: VecNormalize.load(str(path), venv), max_peak=8 << 20)


@pytest.mark.skipif(not SB2_ACKTR.exists(), reason="shared stable-baselines fixtures are not there")
def test_an_sb2_zip_serialized_field_full_of_empty_sets_stops_early(tmp_path):
    from sbtf import ACKTR

    members = model_members(SB2_ACKTR)
    data = json.loads(members["data"])
    data["observation_space"][":serialized:"] = base64.b64encode(b"\x80\x04" + b"\x8f" * 300_000 + b".").decode()
    members["data"] = json.dumps(data).encode()
    path = tmp_path / "sb2_sets.zip"
    path.write_bytes(build_zip([zip_member(name, payload) for name, payload in members.items()]))
    with load_limits(max_items=50_000):
        raises_within(FileLimitError, lambda: ACKTR.load(str(path)), max_peak=16 << 20, match="more than 50,000")
    # and a bzip2 bomb as its parameters
    members = model_members(SB2_ACKTR)
    raw = [zip_member(n, p) for n, p in members.items() if n != "parameters"]
    path.write_bytes(build_zip(raw + [bomb("parameters", zipfile.ZIP_BZIP2, 1000, 1_200_000_000)]))
    raises_within(ModelFileError, lambda: ACKTR.load(str(path)), max_peak=4 << 20, match="declared size")


# ================================================================================================ JSON
def test_json_values_are_counted_before_json_loads():
    """1,000,000 ``{}`` (3 MB of text; json.loads would build ~100 MB of dicts) are refused from the text."""
    text = b'{"gamma": [' + b"{}," * 999_999 + b"{}]}"
    raises_within(FileLimitError, lambda: save_util.json_to_data(text), max_peak=3 * len(text) + (1 << 20),
                  match="JSON values and containers")
    # commas and brackets inside strings do not count
    assert save_util.parse_json(json.dumps({"a": "[{," * 1_000_000}), "x")["a"] == "[{," * 1_000_000
    with load_limits(max_items=1000):
        with pytest.raises(FileLimitError):
            save_util.parse_json(json.dumps(list(range(2000))), "'data' member of the model file")


def test_json_depth_is_bounded():
    for text in (b'{"gamma": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
                 b'{"gamma": ' + b"[" * 200 + b"]" * 200 + b"}"):
        raises_within(FileLimitError, lambda text=text: save_util.json_to_data(text),
                      max_peak=8 * len(text) + (1 << 20), match="deep")


def test_dict_items_with_keys_sharing_a_hash_are_refused_with_bounded_work():
    """80 dicts x 4,096 int keys k * (2**61 - 1) (all hashing to 0) took 65 s: refused at the 9th key."""
    value = {"__dict_items__": [[i, {"__dict_items__": [[k * (2 ** 61 - 1), 0] for k in range(1, 4097)]}]
                                for i in range(80)]}
    decoder = save_util._Decoder("policy_kwargs", False)
    raises_within(FileLimitError, lambda: save_util.decode_value(value, "policy_kwargs", False, decoder),
                  max_peak=4 << 20, match="share one hash value")
    assert decoder.items < 10_000
    # through a whole model file's data
    text = json.dumps({"policy_kwargs": value}).encode()
    raises_within(FileLimitError, lambda: save_util.json_to_data(text), max_peak=40 * len(text),
                  match="share one hash value", measure=peak_memory_growth)


def test_the_item_budget_is_shared_by_every_key_of_the_data(monkeypatch):
    """80 keys, each a dict of 4,096 non-string keys in groups of 8 that share a hash: every dict is within the
    per-container limits, but the colliding-key work of the whole file is charged to one budget."""
    groups = [[g + j * (2 ** 61 - 1) for j in range(8)] for g in range(512)]
    one = {"__dict_items__": [[k, 0] for group in groups for k in group]}
    alone = save_util._Decoder("k0", False)
    assert len(save_util.decode_value(one, "k0", False, alone)) == 4096
    assert alone.items >= 4096 + 512 * 36          # the probes of keys sharing a hash are charged
    with load_limits(max_items=4 * alone.items + alone.items // 2):
        shared = save_util._Decoder("?", False)
        for i in range(4):
            save_util.decode_value(one, f"k{i}", False, shared)
        raises_within(FileLimitError, lambda: save_util.decode_value(one, "k4", False, shared), max_peak=8 << 20,
                      match="data holds more than")
    made = []

    class Recording(save_util._Decoder):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(save_util, "_Decoder", Recording)
    save_util.json_to_data(json.dumps({f"k{i}": one for i in range(3)}).encode())
    assert len(made) == 1 and made[0].items >= 3 * alone.items   # json_to_data: one decoder for every key


# ================================================================================================ messages
def test_messages_never_format_a_hostile_value_in_full():
    from sbtf_converters import sb2_pickle

    shared = "x" * 200_000
    hostile = [[shared] * 1000] * 1900             # 380 GB of text if formatted in full
    for action in (lambda: sb2_pickle._number(hostile, "The gamma"),
                   lambda: sb2_pickle._numeric_array({"a": hostile}, "The clip_obs"),
                   lambda: save_util.decode_value({"__class__": hostile}, "policy"),
                   lambda: save_util.decode_value({"__ndarray__": [1], "dtype": "f4", "shape": hostile}, "x"),
                   lambda: save_util.decode_value({"__enum__": hostile, "value": 1}, shared)):
        with pytest.raises(ModelFileError):
            action()  # once untraced: imports done on first use are not the message's work
        raises_within(ModelFileError, action, max_peak=1 << 20)
    assert len(describe_value(hostile)) <= 200
    assert len(describe_value(10 ** 5000)) <= 200  # beyond the int->str digit limit: no ValueError
    stand_in = save_util.decode_value({"__pickle__": None, "type": hostile, "repr": shared}, shared)
    assert len(repr(stand_in)) < 600
    with pytest.raises(RuntimeError) as info:
        stand_in()
    assert len(str(info.value)) < 1500
