"""Compiled and fast acting: tf.function wrappers with the one XLA decision, weight versions and the derived NumPy
acting path."""
