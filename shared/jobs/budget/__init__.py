"""Team budgets: TPU chip-hours a team may use per day and per week, the usage counted
from the ``job_events`` table, and the gate ``submit_job`` applies before it creates a
JobSet.

``model`` holds a budget's arithmetic, ``usage_sql`` and ``usage`` refresh the usage
snapshot the gate reads (a ConfigMap), ``gate`` decides, ``report`` and ``cli`` show it.
"""
