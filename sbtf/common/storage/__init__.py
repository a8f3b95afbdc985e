"""Rollout and replay storage internals: rollout buffers, packed observation arrays and the normalisation of packed
rows."""
