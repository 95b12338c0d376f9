"""Adapters between gym-sysmath envs and outside trainers and runners."""
