"""A user's feature extractor for the tests: a plain Keras layer (not a ``BaseFeaturesExtractor``) that a saved model
names by its import path, with a gelu activation, which has no NumPy form (the policy acts through TF)."""
from __future__ import annotations

import keras


class GeluFeatures(keras.layers.Layer):
    """A user's extractor: a plain Keras layer (found again by its import path), gelu: no NumPy form."""

    def __init__(self, observation_space, features_dim=12, **kwargs):
        super().__init__(**kwargs)
        self.features_dim = features_dim
        self.dense = keras.layers.Dense(features_dim, activation="gelu")

    def call(self, observations):
        return self.dense(observations)
