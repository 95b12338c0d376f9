"""gym-sysmath: Gymnasium text environments for machine-level reasoning with exact rewards."""
