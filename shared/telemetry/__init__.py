"""Job lifecycle telemetry: the records of what happened to a job (submitted,
rejected, admitted, running, finished) and their publishing on the metrics topic.

``submit_job`` (``shared.jobs``) and ``reconcile_slices`` (``shared.slices``) both
report transitions through it; ``ingest_metrics`` writes them to the ``job_events``
table.
"""
