"""One module per task family: the env class and its Gymnasium docstring. The ids are
registered in ``gym_sysmath.registration``."""
