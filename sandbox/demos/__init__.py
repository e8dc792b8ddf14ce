"""Scenarios played on a started sandbox with the real clients: ``accelops demo`` (jobs,
the off-hours node pools, serving rollouts) and ``accelops loadtest``."""
