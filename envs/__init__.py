"""One module per task family: the env class and its Gymnasium docstring. The ids are
declared in the family registry, ``gym_sysmath.families``, and registered on ``import gym_sysmath``."""
