"""stable-baselines3's ``common`` pieces on sbtf's core: the actor-critic policies (``policies``) and the on-policy
algorithm base of PPO and A2C (``on_policy_algorithm``)."""
