"""The metrics dataset: what ``ingest_metrics`` writes and what is read back from it.

At this level, the ingest side every product shares: the records published on the
metrics topic (load-test requests and runs, job lifecycle events, node-pool actions),
their parsing and insertion, and the tables and views (``schema``, ``names``). What
each product reads back and shows lives in its own package: ``loadtest`` (the load-test
report and dashboard), ``usage`` (how jobs fared, for reports and budgets) and
``savings`` (what off-hours pool removal saved).
"""
