"""gym-sysmath: Gymnasium text environments for machine-level reasoning with exact rewards.

Importing the package registers every environment id with Gymnasium.
"""

from gym_sysmath.registration import env_ids, register_all

register_all()

__all__ = ["env_ids", "register_all"]
