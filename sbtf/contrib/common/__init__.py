"""What sbtf's contrib algorithms share beyond ``sbtf.sb3.common`` (the SB3 on-/off-policy bases and network pieces
they build on): PyTorch's Adam (``optim``), the quantile maths of QR-DQN and TQC (``quantiles``) and invalid action
masking (``maskable``)."""
