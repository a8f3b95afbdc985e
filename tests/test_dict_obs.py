"""DictObsLayout: Dict observations packed into one flat float32 row and unpacked again (NumPy and TF)."""
from collections import OrderedDict

import gymnasium as gym
import numpy as np
import pytest

from sbtf.common.envs.dict_obs import DictObsLayout, layout_of, pack_if_dict


def _space():
    return gym.spaces.Dict({
        "vec": gym.spaces.Box(-1.0, 1.0, (3,), np.float64),
        "img": gym.spaces.Box(0, 255, (6, 5, 2), np.uint8),
        "disc": gym.spaces.Discrete(7, start=2),
        "md": gym.spaces.MultiDiscrete([3, 5]),
        "mb": gym.spaces.MultiBinary([2, 2]),
        "mat": gym.spaces.Box(-5.0, 5.0, (2, 3), np.float32),
    })


def _assert_same(restored, original, layout):
    for entry in layout.entries:
        value = np.asarray(original[entry.key])
        got = np.asarray(restored[entry.key])
        assert got.shape == value.shape, entry.key
        if entry.is_integer:
            assert got.dtype == np.int32
            np.testing.assert_array_equal(got, value)
        else:
            assert got.dtype == np.float32
            np.testing.assert_array_equal(got, value.astype(np.float32))


def test_layout_order_offsets_and_flat_space():
    space = _space()
    layout = DictObsLayout(space)
    assert layout.keys == sorted(space.spaces)  # gymnasium's (sorted) key order
    sizes = {"disc": 1, "img": 60, "mat": 6, "mb": 4, "md": 2, "vec": 3}
    offset = 0
    for entry in layout.entries:
        assert entry.offset == offset and entry.size == sizes[entry.key]
        offset += entry.size
    assert layout.size == offset == 76
    flat = layout.flat_space
    assert flat.shape == (76,) and flat.dtype == np.float32
    img = layout["img"]
    assert np.all(flat.low[img.offset:img.offset + img.size] == 0)
    assert np.all(flat.high[img.offset:img.offset + img.size] == 255)
    disc = layout["disc"]
    assert flat.low[disc.offset] == 2 and flat.high[disc.offset] == 8
    md = layout["md"]
    np.testing.assert_array_equal(flat.high[md.offset:md.offset + 2], [2, 4])


def test_pack_unpack_round_trip_numpy_single_and_batch():
    space = _space()
    space.seed(0)
    layout = DictObsLayout(space)
    single = space.sample()
    packed = layout.pack(single)
    assert packed.shape == (1, layout.size) and packed.dtype == np.float32
    restored = layout.unpack_np(packed)
    _assert_same({k: v[0] for k, v in restored.items()}, single, layout)

    batch = [space.sample() for _ in range(5)]
    batched = {key: np.stack([b[key] for b in batch]) for key in space.spaces}
    packed = layout.pack(batched)
    assert packed.shape == (5, layout.size)
    _assert_same(layout.unpack_np(packed), batched, layout)
    # the flat rows lie in the flat space
    assert all(layout.flat_space.contains(row) for row in packed)


def test_unpack_tf_equals_numpy():
    import tensorflow as tf

    space = _space()
    space.seed(1)
    layout = DictObsLayout(space)
    batch = [space.sample() for _ in range(4)]
    packed = layout.pack({key: np.stack([b[key] for b in batch]) for key in space.spaces})
    from_np = layout.unpack_np(packed)
    from_tf = tf.function(layout.unpack_tf)(tf.constant(packed))
    assert list(from_tf) == layout.keys
    for key in layout.keys:
        assert from_tf[key].dtype == (tf.int32 if layout[key].is_integer else tf.float32)
        np.testing.assert_array_equal(from_tf[key].numpy(), from_np[key])


def test_ordered_dict_keeps_its_order():
    space = gym.spaces.Dict(OrderedDict([("z", gym.spaces.Discrete(3)), ("a", gym.spaces.Box(0, 1, (2,)))]))
    assert DictObsLayout(space).keys == ["z", "a"]


def test_nested_and_unsupported_subspaces_are_refused_by_name():
    nested = gym.spaces.Dict({"inner": gym.spaces.Dict({"x": gym.spaces.Discrete(2)}), "v": gym.spaces.Discrete(2)})
    with pytest.raises(NotImplementedError, match="'inner'.*nested Dict"):
        DictObsLayout(nested)
    with pytest.raises(NotImplementedError, match="'t'.*nested Tuple"):
        DictObsLayout(gym.spaces.Dict({"t": gym.spaces.Tuple([gym.spaces.Discrete(2)])}))
    with pytest.raises(NotImplementedError, match="'txt'"):
        DictObsLayout(gym.spaces.Dict({"txt": gym.spaces.Text(5)}))
    with pytest.raises(TypeError, match="gymnasium.spaces.Dict"):
        DictObsLayout(gym.spaces.Box(0, 1, (2,)))


def test_pack_errors_name_the_key():
    layout = DictObsLayout(_space())
    sample = _space().sample()
    del sample["md"]
    with pytest.raises(KeyError, match="md"):
        layout.pack(sample)
    bad = _space().sample()
    bad["vec"] = np.zeros(4)
    with pytest.raises(ValueError, match="'vec'"):
        layout.pack(bad)
    with pytest.raises(TypeError, match="dict observations"):
        layout.pack(np.zeros(layout.size))


def test_layout_cache_and_pack_if_dict():
    space = _space()
    assert layout_of(space) is layout_of(space)
    flat = np.zeros((2, 3), np.float32)
    assert pack_if_dict(flat, space) is flat  # already packed: passed through
    box = gym.spaces.Box(0, 1, (3,))
    assert pack_if_dict(flat, box) is flat
    assert pack_if_dict(space.sample(), space).shape == (1, layout_of(space).size)
