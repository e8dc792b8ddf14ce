"""The sandbox's bqemulator remembers how it translated a SELECT; it must never answer
from a translation the catalog has since changed under (sandbox.bigquery_emulator).

Each test runs the same statement before and after a change to what it reads — a
view's query, a table's columns, the table itself — through google-cloud-bigquery
against the emulator as the sandbox starts it, and checks the answer follows the
change. The expected rows are the ones the test inserted, counted here.

(bqemulator itself does not add a column to a table whose schema is patched: a
``SELECT *`` after ``update_table`` answers the old columns with or without the memo,
so a table made again stands for a schema change here.)"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from bqemulator.catalog.models import TableFieldSchema, TableMeta, TableSchema
from google.api_core.client_options import ClientOptions
from google.api_core.exceptions import GoogleAPICallError
from google.auth.credentials import AnonymousCredentials
from google.cloud import bigquery

from sandbox.bigquery_emulator import cacheable, statistics_only
from tests.bigquery_fixtures import PROJECT


@pytest.fixture
def dataset(bigquery_endpoint: str) -> Iterator[tuple[bigquery.Client, str]]:
    client = bigquery.Client(project=PROJECT, credentials=AnonymousCredentials(),
                             client_options=ClientOptions(api_endpoint=bigquery_endpoint))
    name = f"memo_{uuid.uuid4().hex[:8]}"
    client.create_dataset(name)
    try:
        yield client, f"{PROJECT}.{name}"
    finally:
        client.close()


def rows(client: bigquery.Client, sql: str, **params: int) -> list[dict[str, Any]]:
    config = bigquery.QueryJobConfig(query_parameters=[
        bigquery.ScalarQueryParameter(k, "INT64", v) for k, v in params.items()])
    return [dict(r.items()) for r in client.query(sql, job_config=config).result(timeout=30)]


def numbers(client: bigquery.Client, table: str, values: range) -> None:
    client.create_table(bigquery.Table(table, schema=[bigquery.SchemaField("a", "INT64")]))
    assert client.insert_rows_json(table, [{"a": v} for v in values]) == []


def test_a_select_over_a_view_answers_from_the_views_new_query_once_it_is_replaced(dataset):
    client, ds = dataset
    numbers(client, f"{ds}.t", range(10))
    view = bigquery.Table(f"{ds}.v")
    view.view_query = f"SELECT a FROM `{ds}.t` WHERE a > 1"
    client.create_table(view)
    sql = f"WITH big AS (SELECT a FROM `{ds}.v`) SELECT COUNT(*) AS n FROM big"
    before = [rows(client, sql)[0]["n"] for _ in range(3)]

    view.view_query = f"SELECT a FROM `{ds}.t` WHERE a > 5"
    client.update_table(view, ["view_query"])

    assert before == [8, 8, 8]
    assert rows(client, sql)[0]["n"] == 4


def test_a_table_made_again_with_other_columns_is_read_with_them_by_the_same_select_star(
    dataset,
):
    client, ds = dataset
    numbers(client, f"{ds}.t", range(3))
    sql = f"SELECT * FROM `{ds}.t` ORDER BY a"
    assert rows(client, sql) == [{"a": 0}, {"a": 1}, {"a": 2}] == rows(client, sql)

    client.delete_table(f"{ds}.t")
    client.create_table(bigquery.Table(f"{ds}.t", schema=[
        bigquery.SchemaField("a", "INT64"), bigquery.SchemaField("b", "STRING")]))
    assert client.insert_rows_json(f"{ds}.t", [{"a": 7, "b": "x"}]) == []

    assert rows(client, sql) == [{"a": 7, "b": "x"}]


def test_a_table_deleted_after_a_query_read_it_is_refused_by_that_same_query(dataset):
    client, ds = dataset
    numbers(client, f"{ds}.t", range(2))
    sql = f"SELECT COUNT(*) AS n FROM `{ds}.t`"
    assert rows(client, sql) == [{"n": 2}] == rows(client, sql)

    client.delete_table(f"{ds}.t")

    with pytest.raises(GoogleAPICallError, match="t"):
        rows(client, sql)


def test_rows_streamed_between_two_runs_of_the_same_select_are_counted_by_the_second(
    dataset,
):
    client, ds = dataset
    numbers(client, f"{ds}.t", range(3))
    sql = f"SELECT COUNT(*) AS n, SUM(a) AS total FROM `{ds}.t`"
    assert rows(client, sql) == [{"n": 3, "total": 3}]

    assert client.insert_rows_json(f"{ds}.t", [{"a": 10}, {"a": 20}]) == []

    assert rows(client, sql) == [{"n": 5, "total": 33}]


def table(**changes: Any) -> TableMeta:
    made = datetime(2026, 11, 28, tzinfo=UTC)
    return TableMeta(project_id=PROJECT, dataset_id="d", table_id="t", creation_time=made,
                     last_modified_time=made, etag="e1",
                     schema=TableSchema(fields=(TableFieldSchema(name="a", type="INT64"),))
                     ).model_copy(update=changes)


@pytest.mark.parametrize(("changes", "statistics"), [
    ({"num_rows": 5, "num_bytes": 40, "etag": "e2",
      "last_modified_time": datetime(2026, 11, 29, tzinfo=UTC)}, True),
    ({"schema_": TableSchema(fields=(TableFieldSchema(name="b", type="STRING"),))}, False),
    ({"view_query": "SELECT 1 AS a", "table_type": "VIEW"}, False),
    ({"num_rows": 5, "description": "x"}, False),
])
def test_only_an_update_of_row_counts_and_times_keeps_the_remembered_translations(
    changes, statistics,
):
    assert statistics_only(table(), table(**changes)) is statistics
    assert statistics_only(None, table(**changes)) is False


def test_the_same_select_with_other_parameters_answers_for_those_parameters(dataset):
    client, ds = dataset
    numbers(client, f"{ds}.t", range(10))
    sql = f"SELECT COUNT(*) AS n FROM `{ds}.t` WHERE a >= @low"

    assert [rows(client, sql, low=low)[0]["n"] for low in (0, 5, 9, 5)] == [10, 5, 1, 5]


@pytest.mark.parametrize(("sql", "remembered"), [
    ("SELECT 1", True),
    ("  with x AS (SELECT 1) SELECT * FROM x", True),
    ("-- a comment\n/* and another */ (SELECT 1)", True),
    ("INSERT INTO d.t (a) VALUES (1)", False),
    ("CREATE TABLE d.t AS SELECT 1 AS a", False),
    ("DECLARE x INT64; SELECT x", False),
    ("SELECT * FROM d.t FOR SYSTEM_TIME AS OF TIMESTAMP '2026-01-01'", False),
    ("SELECT table_name FROM d.INFORMATION_SCHEMA.TABLES", False),
])
def test_only_reads_whose_translation_the_catalog_decides_are_remembered(sql, remembered):
    assert cacheable(sql) is remembered
