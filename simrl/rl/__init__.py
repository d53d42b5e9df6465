"""Learners: PPO through rsl-rl-lib's OnPolicyRunner."""
