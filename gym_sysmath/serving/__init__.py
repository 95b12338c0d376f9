"""Serving envs to trainers elsewhere: an OpenEnv server (`gym-sysmath serve`) and its client, and a
per-node Ray service for Ray-native trainers. ``docs/serving.md`` says which trainer uses which path."""
