"""Load-test metrics: records from the load generator, their BigQuery rows, views and reports."""
