"""Network machinery below the public policies: the NumPy/TF ops backends, convolutions, gSDE, the SB2 box
actor-critic base, the off-policy actor/critic networks and the Fisher-vector product."""
