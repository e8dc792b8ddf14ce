"""Off-hours savings read back: the ``pool_savings_daily`` view's SQL, its typed rows,
and ``accelops report savings``' text and chart."""
