"""What sbtf's contrib algorithms share: sb3's on-policy conventions on sbtf's loop (``sb3_on_policy``) and invalid
action masking (``maskable``)."""
