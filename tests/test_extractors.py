"""Feature extractors as Keras layers (sbtf.common.extractors): shapes, image rules, NumPy forms, registry."""
import gymnasium as gym
import keras
import numpy as np
import pytest
import tensorflow as tf

from sbtf.common import registry
from sbtf.common.extractors import (BaseFeaturesExtractor, CombinedExtractor, FlattenExtractor, NatureCNN,
                                    extractor_named_variables, features_dim_of, is_image_space)

IMG = gym.spaces.Box(0, 255, (36, 36, 3), np.uint8)


def test_is_image_space_follows_sb3_rules_channels_last():
    assert is_image_space(IMG)
    assert is_image_space(IMG, check_channels=True)
    assert not is_image_space(gym.spaces.Box(0, 255, (36, 36, 5), np.uint8), check_channels=True)
    assert is_image_space(gym.spaces.Box(0, 255, (36, 36, 5), np.uint8))  # frame stacks: channels not checked
    assert not is_image_space(gym.spaces.Box(0.0, 1.0, (36, 36, 3), np.float32))  # dtype
    assert not is_image_space(gym.spaces.Box(0, 200, (36, 36, 3), np.uint8))  # bounds
    assert is_image_space(gym.spaces.Box(0.0, 1.0, (36, 36, 3), np.float32), normalized_image=True)
    assert not is_image_space(gym.spaces.Box(0, 255, (36, 36), np.uint8))


def test_nature_cnn_architecture_and_names():
    cnn = NatureCNN(IMG, features_dim=64)
    out = cnn(tf.zeros((2, 36, 36, 3)))
    assert out.shape == (2, 64) and cnn.features_dim == 64
    names = list(extractor_named_variables(cnn))
    assert names == ["c1/w", "c1/b", "c2/w", "c2/b", "c3/w", "c3/b", "fc1/w", "fc1/b"]
    shapes = [tuple(v.shape) for v in extractor_named_variables(cnn).values()]
    assert shapes[0] == (8, 8, 3, 32) and shapes[2] == (4, 4, 32, 64) and shapes[4] == (3, 3, 64, 64)
    assert np.all(out.numpy() >= 0)  # linear + ReLU
    with pytest.raises(ValueError, match="normalized_image=True"):
        NatureCNN(gym.spaces.Box(0.0, 1.0, (36, 36, 3), np.float32))
    with pytest.raises(TypeError, match="Box"):
        NatureCNN(gym.spaces.Discrete(3))
    assert NatureCNN(gym.spaces.Box(0.0, 1.0, (36, 36, 3), np.float32), 8, normalized_image=True).features_dim == 8


def test_combined_extractor_dims_and_numpy_form():
    space = gym.spaces.Dict({"img": IMG, "vec": gym.spaces.Box(-1, 1, (4,)), "d": gym.spaces.Discrete(5),
                             "md": gym.spaces.MultiDiscrete([2, 3])})
    ext = CombinedExtractor(space, cnn_output_dim=16)
    assert ext.features_dim == 16 + 4 + 5 + 5
    assert ext.image_keys == ["img"]
    inputs = {"img": tf.zeros((3, 36, 36, 3)), "vec": tf.ones((3, 4)), "d": tf.one_hot([0, 1, 2], 5),
              "md": tf.zeros((3, 5))}
    assert ext(inputs).shape == (3, ext.features_dim)
    assert list(extractor_named_variables(ext))[0] == "img/c1/w"

    vector_only = gym.spaces.Dict({"a": gym.spaces.Box(-1, 1, (2, 2)), "b": gym.spaces.MultiBinary(3)})
    ext = CombinedExtractor(vector_only)
    assert ext.features_dim == 7 and extractor_named_variables(ext) == {}
    from sbtf.common.nn.network_ops import NumpyOps
    x = {"a": np.arange(8, dtype=np.float32).reshape(2, 2, 2), "b": np.ones((2, 3), np.float32)}
    np.testing.assert_array_equal(ext.ops_call(x, NumpyOps({}, {})), ext({k: tf.constant(v) for k, v in x.items()}))


def test_flatten_extractor():
    ext = FlattenExtractor(gym.spaces.Box(-1, 1, (2, 3)))
    assert ext.features_dim == 6
    assert ext(tf.ones((4, 2, 3))).shape == (4, 6)
    assert FlattenExtractor(gym.spaces.Discrete(4)).features_dim == 4  # one-hot


def test_user_layer_names_are_positional_and_stable():
    class TwoDense(keras.layers.Layer):
        features_dim = 5

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.a = keras.layers.Dense(3)
            self.b = keras.layers.Dense(5)

        def call(self, x):
            return self.b(self.a(x))

    names = []
    for _ in range(2):  # Keras names the second instance's layers dense_2, dense_3: ours stay the same
        layer = TwoDense()
        layer(tf.zeros((1, 4)))
        names.append(list(extractor_named_variables(layer)))
    assert names[0] == names[1] == ["0_kernel", "1_bias", "2_kernel", "3_bias"]
    assert features_dim_of(layer) == 5


def test_features_dim_required():
    with pytest.raises(TypeError, match="features_dim"):
        features_dim_of(keras.layers.Dense(3))


def test_subclasses_register_for_model_files():
    class MyExtractor(BaseFeaturesExtractor):
        def __init__(self, observation_space, features_dim=8):
            super().__init__(observation_space, features_dim)
            self.dense = keras.layers.Dense(features_dim)

        def call(self, x):
            return self.dense(x)

    assert registry.lookup_class(registry.class_key(MyExtractor)) is MyExtractor
    assert registry.lookup_class("sbtf.common.extractors:CombinedExtractor") is CombinedExtractor
    assert "sbtf.common.extractors:NatureCNN" in registry.registered_names("extractor")


class ModuleLevelLayer(keras.layers.Layer):
    """A plain Keras layer of an imported module: found by name, as the module is imported."""

    features_dim = 2

    def call(self, x):
        return x[:, :2]


def test_imported_plain_layers_are_found_but_never_keras_or_unimported_ones():
    assert registry.lookup_class(f"{__name__}:ModuleLevelLayer") is ModuleLevelLayer
    assert registry.lookup_class("keras.src.layers.core.dense:Dense") is None
    assert registry.lookup_class("keras.layers:TFSMLayer") is None
    assert registry.lookup_class("os:system") is None
    assert registry.lookup_class("not_imported_module_xyz:Layer") is None
    assert registry.lookup_class(f"{__name__}:test_features_dim_required") is None  # not a layer class
