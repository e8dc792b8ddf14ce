"""TPU slice provisioning: node pools for admitted JobSets, reaped when they end."""
