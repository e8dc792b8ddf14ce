"""BigQuery access: the one module that imports google-cloud-bigquery.

The client is created on first use and reused across invocations. Against a local
endpoint (``BIGQUERY_EMULATOR_HOST``, a URL with scheme) it uses anonymous
credentials; otherwise application default credentials.

Every call is bounded: the client's default retry keeps trying for up to 600 s,
longer than a push delivery's deadline, so calls here use a short retry deadline
and let Pub/Sub redeliver instead. Every failure becomes a domain error: for a
writer, anything BigQuery refuses is a reason to retry, since the rows were
validated before they were sent and must not be acknowledged unstored.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from shared.clients import ClientCache
from shared.errors import (
    ConfigError,
    DeploymentError,
    NotFoundError,
    PermissionDeniedError,
    TransientError,
    UnavailableError,
)

__all__ = [
    "Field",
    "InsertError",
    "MissingTableError",
    "ensure_dataset",
    "ensure_table",
    "ensure_view",
    "insert_rows",
    "query",
    "reset_client",
    "table_fields",
]

EMULATOR_ENV = "BIGQUERY_EMULATOR_HOST"
# Seconds: the whole insert (with the client's retries) must finish well inside a push
# subscription's ack deadline.
INSERT_DEADLINE = 20.0
QUERY_DEADLINE = 60.0
SQL_LABEL = "accelops-sql"

_clients: ClientCache[Any] = ClientCache()


class InsertError(TransientError):
    """BigQuery answered an insert but refused some rows; the message is retried."""


@dataclass(frozen=True, slots=True)
class Field:
    """One column: a BigQuery-free description the schema module can use."""

    name: str
    type: str  # STRING, INT64, FLOAT64, BOOL, TIMESTAMP
    mode: str = "NULLABLE"
    description: str = ""


def client(project: str) -> Any:
    """The process's BigQuery client for ``project`` (created once, reused)."""
    endpoint = os.environ.get(EMULATOR_ENV) or None

    def build() -> Any:
        from google.cloud import bigquery

        if endpoint:
            from google.api_core.client_options import ClientOptions
            from google.auth.credentials import AnonymousCredentials

            return bigquery.Client(
                project=project, credentials=AnonymousCredentials(),  # type: ignore[no-untyped-call]
                client_options=ClientOptions(api_endpoint=endpoint))
        import google.auth.exceptions

        try:
            return bigquery.Client(project=project)
        except google.auth.exceptions.DefaultCredentialsError as exc:
            # A deployment (or a workstation) without credentials, not a bad request.
            raise ConfigError(f"no Google credentials for BigQuery: {exc}") from exc

    return _clients.get((project, endpoint), build)


def reset_client() -> None:
    """Forget the cached client (tests that switch endpoints)."""
    _clients.reset()


def _retry(deadline: float) -> Any:
    from google.cloud.bigquery import DEFAULT_RETRY

    return DEFAULT_RETRY.with_deadline(deadline)


class MissingTableError(DeploymentError):
    """Rows were sent to a table or dataset that does not exist. Retried, never
    dropped: the data is fine, the deployment is not (run ``accelops bq init``)."""


@contextmanager
def _translated(what: str, missing: type[Exception] = NotFoundError) -> Iterator[None]:
    from google.api_core import exceptions as gexc
    from requests import exceptions as rexc

    try:
        yield
    except gexc.NotFound as exc:
        raise missing(f"{what}: {exc.message}") from exc
    except (gexc.Forbidden, gexc.Unauthorized) as exc:
        raise PermissionDeniedError(f"{what}: {exc.message}") from exc
    except (gexc.GoogleAPIError, rexc.RequestException, OSError) as exc:
        raise UnavailableError(f"{what}: {exc}") from exc


def insert_rows(project: str, table: str, rows: Sequence[Mapping[str, Any]],
                row_ids: Sequence[str]) -> None:
    """Stream ``rows`` into ``dataset.table`` in one insertAll request.

    ``row_ids`` become insertIds (BigQuery's best-effort de-duplication). Raises
    InsertError when BigQuery refuses rows, MissingTableError when the table is missing,
    UnavailableError when BigQuery cannot be reached; the caller sizes the request.
    """
    target = f"{project}.{table}"
    with _translated(f"inserting {len(rows)} rows into {target}", missing=MissingTableError):
        errors = client(project).insert_rows_json(
            target, rows, row_ids=list(row_ids), retry=_retry(INSERT_DEADLINE),
            timeout=INSERT_DEADLINE)
    if errors:
        first = errors[0]
        raise InsertError(f"BigQuery refused {len(errors)} of {len(rows)} rows in {target}; "
                          f"first: row {first.get('index')}: {first.get('errors')}")


def query(project: str, sql: str, params: Mapping[str, Any] | None = None,
          ) -> list[dict[str, Any]]:
    """Run a query with named parameters and return its rows as dicts.

    A list or tuple becomes an ARRAY parameter of its items' type (STRING when empty),
    for ``WHERE x IN UNNEST(@xs)``.
    """
    from google.cloud import bigquery

    def parameter(name: str, value: Any) -> Any:
        if isinstance(value, list | tuple):
            kind = _param_type(value[0]) if value else "STRING"
            return bigquery.ArrayQueryParameter(name, kind, list(value))
        return bigquery.ScalarQueryParameter(name, _param_type(value), value)

    config = bigquery.QueryJobConfig(query_parameters=[
        parameter(name, value) for name, value in (params or {}).items()])
    with _translated("query"):
        job = client(project).query(sql, job_config=config, retry=_retry(QUERY_DEADLINE),
                                    timeout=QUERY_DEADLINE)
        return [dict(row.items()) for row in job.result(timeout=QUERY_DEADLINE)]


def _param_type(value: Any) -> str:
    if isinstance(value, bool):
        return "BOOL"
    if isinstance(value, int):
        return "INT64"
    if isinstance(value, float):
        return "FLOAT64"
    return "STRING"


def ensure_dataset(project: str, dataset: str, location: str) -> str:
    """Create the dataset unless it exists; returns "created" or "unchanged"."""
    from google.api_core import exceptions as gexc
    from google.cloud import bigquery

    bq = client(project)
    with _translated(f"dataset {dataset}"):
        try:
            bq.get_dataset(f"{project}.{dataset}", retry=_retry(QUERY_DEADLINE))
            return "unchanged"
        except gexc.NotFound:
            ds = bigquery.Dataset(f"{project}.{dataset}")
            ds.location = location
            bq.create_dataset(ds, exists_ok=True, retry=_retry(QUERY_DEADLINE))
            return "created"


def ensure_table(project: str, table: str, fields: Sequence[Field], *,
                 partition_field: str | None = None, clustering: Sequence[str] = (),
                 partition_expiration_days: int | None = None, description: str = "") -> str:
    """Create the table, or add the columns it lacks; "created", "updated" or "unchanged".

    Columns are only ever added (BigQuery allows no other in-place change), so an
    older table keeps its data when the schema grows.
    """
    from google.api_core import exceptions as gexc
    from google.cloud import bigquery

    schema = [bigquery.SchemaField(f.name, f.type, mode=f.mode, description=f.description)
              for f in fields]
    bq = client(project)
    ref = f"{project}.{table}"
    with _translated(f"table {table}"):
        try:
            existing = bq.get_table(ref, retry=_retry(QUERY_DEADLINE))
        except gexc.NotFound:
            new = bigquery.Table(ref, schema=schema)
            new.description = description
            if partition_field:
                expiration = (partition_expiration_days * 86_400_000
                              if partition_expiration_days else None)
                new.time_partitioning = bigquery.TimePartitioning(
                    type_=bigquery.TimePartitioningType.DAY, field=partition_field,
                    expiration_ms=expiration)
            if clustering:
                new.clustering_fields = list(clustering)
            bq.create_table(new, exists_ok=True, retry=_retry(QUERY_DEADLINE))
            return "created"
        have = {f.name for f in existing.schema}
        missing = [f for f in schema if f.name not in have]
        if not missing:
            return "unchanged"
        existing.schema = [*existing.schema, *missing]
        bq.update_table(existing, ["schema"], retry=_retry(QUERY_DEADLINE))
        return "updated"


def ensure_view(project: str, view: str, sql: str, description: str = "") -> str:
    """Create the view or replace its query; "created", "updated" or "unchanged".

    The view carries a label with a hash of its SQL, so "unchanged" needs no
    comparison of query text (which BigQuery may return reformatted).
    """
    from google.api_core import exceptions as gexc
    from google.cloud import bigquery

    bq = client(project)
    ref = f"{project}.{view}"
    labels = {SQL_LABEL: hashlib.sha256(sql.encode()).hexdigest()[:16]}
    with _translated(f"view {view}"):
        try:
            existing = bq.get_table(ref, retry=_retry(QUERY_DEADLINE))
        except gexc.NotFound:
            new = bigquery.Table(ref)
            new.view_query = sql
            new.description = description
            new.labels = labels
            bq.create_table(new, exists_ok=True, retry=_retry(QUERY_DEADLINE))
            return "created"
        if (existing.labels or {}).get(SQL_LABEL) == labels[SQL_LABEL]:
            return "unchanged"
        existing.view_query = sql
        existing.description = description
        existing.labels = labels
        bq.update_table(existing, ["view_query", "description", "labels"],
                        retry=_retry(QUERY_DEADLINE))
        return "updated"


def table_fields(project: str, table: str) -> list[Field] | None:
    """The columns of a table or view (``dataset.name``), or None when it does not exist."""
    from google.api_core import exceptions as gexc

    with _translated(f"table {table}"):
        try:
            found = client(project).get_table(f"{project}.{table}",
                                              retry=_retry(QUERY_DEADLINE))
        except gexc.NotFound:
            return None
    return [Field(f.name, _STANDARD_TYPES.get(f.field_type, f.field_type), f.mode or "NULLABLE")
            for f in found.schema]


# The API answers with legacy type names; the schema module speaks standard SQL.
_STANDARD_TYPES = {"INTEGER": "INT64", "FLOAT": "FLOAT64", "BOOLEAN": "BOOL"}
