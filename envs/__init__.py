"""One module per task family; each registers its Gymnasium ids through gym_sysmath."""
