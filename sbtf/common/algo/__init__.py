"""The algorithm layer: the on-policy and off-policy family bases, their train-step caches and logs, the
stable-baselines3 model API mixin, and the parts of BaseRLModel that read and write model files and pretrain."""
