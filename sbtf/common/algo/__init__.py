"""The algorithm layer: the on-policy and off-policy family bases, their train-step caches and logs, and the stable-baselines3 model API mixin."""
