"""Task builders, reference implementations and generated task data, one subpackage per family."""
