"""Job usage read back: the ``job_lifecycle`` and ``job_usage_daily`` views' SQL, their
typed rows, and ``accelops report jobs``' text and chart."""
