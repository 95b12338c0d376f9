"""gym-sysmath: Gymnasium text environments for machine-level reasoning with exact rewards.

Importing the package registers every environment id with Gymnasium.
"""

import logging as _logging
from importlib.metadata import PackageNotFoundError, version
from importlib.util import find_spec as _find_spec

from gym_sysmath.registration import env_ids, register_all

try:
    __version__ = version("gym-sysmath")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0.0.0+unknown"

register_all()
# Pool and eval events log under "gym_sysmath..."; the application decides where they go (the CLI:
# --log-level). The library configures no handler of its own beyond this one, which drops them.
_logging.getLogger(__name__).addHandler(_logging.NullHandler())

__all__ = ["__version__", "env_ids", "register_all"]

#: verifiers resolves a taskset id (``vf-eval gym-sysmath``) to this package's exported Taskset
#: and Env subclasses; they load lazily, and only where verifiers is installed.
_VERIFIERS_PLUGIN = ("SysmathTaskset", "SysmathVfEnv")
if _find_spec("verifiers") is not None:
    __all__ += list(_VERIFIERS_PLUGIN)


def __getattr__(name: str):
    if name in _VERIFIERS_PLUGIN:
        from gym_sysmath.integrations import verifiers

        return getattr(verifiers, name)
    raise AttributeError(f"module 'gym_sysmath' has no attribute {name!r}")
