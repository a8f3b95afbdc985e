"""What sbtf's contrib algorithms share: sb3's off-policy schedule on sbtf's loop (``off_policy``), sb3's on-policy
conventions (``sb3_on_policy``), sb3's network pieces (``networks``), PyTorch's Adam (``optim``), the quantile maths of
QR-DQN and TQC (``quantiles``) and invalid action masking (``maskable``)."""
