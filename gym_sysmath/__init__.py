"""gym-sysmath: Gymnasium text environments for machine-level reasoning with exact rewards.

Importing the package registers every environment id with Gymnasium.
"""

from importlib.metadata import PackageNotFoundError, version

from gym_sysmath.registration import env_ids, register_all

try:
    __version__ = version("gym-sysmath")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0.0.0+unknown"

register_all()

__all__ = ["__version__", "env_ids", "register_all"]
