"""bqemulator, as the sandbox runs it: the same program and command line, with the
translation of its queries remembered.

bqemulator turns every query into DuckDB SQL through about eight passes (time travel,
row access, INFORMATION_SCHEMA, wildcard tables, schema annotation, translation,
table qualification), each parsing the statement again with SQLGlot. For a query
over a view with common table expressions — ``team_usage``'s of ``job_usage_daily``
— that is 1.3 s of CPU per query. On a sandbox whose clock runs 300 times faster
than real time, that five-minute Cloud Scheduler tick comes every second, and the
emulator alone took a whole core.

The passes depend on the text, the project, the caller and the catalog (tables, views
and their schemas, row access policies). So a ``SELECT`` is translated once per
catalog *generation*: every catalog write starts a new one, and a translation that saw
a write while it ran is not kept — except the writes no translation reads: a job's
record, a time-travel snapshot, and a table's statistics (row and byte counts,
modification time, etag), which every streamed insert updates. (Only
``INFORMATION_SCHEMA`` and time travel read those, and neither is remembered.) Without
that exception a sandbox receiving load-test rows translated every query afresh.
Statements whose translation depends on more than that are translated every time: time
travel (``FOR SYSTEM_TIME``), ``INFORMATION_SCHEMA`` (expanded from the catalog's
contents), anything while a materialized view exists (reading one refreshes it first),
and all DML, DDL and scripts. What the emulator accepts, refuses and answers is unchanged:
catalog lookups, parameter binding and DuckDB still run on every query.

Run as ``python -m sandbox.bigquery_emulator start ...`` with bqemulator's own
arguments.
"""

from __future__ import annotations

import functools
import re
import sys
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["Memo", "install", "main", "statistics_only"]

# Distinct SELECTs a sandbox runs are few (each function's, the views', the tests');
# the bound is for a fuzz run that sends thousands.
MEMO_SIZE = 512

_SELECT = re.compile(r"\s*(?:--[^\n]*\n\s*|/\*.*?\*/\s*)*\(?\s*(?:SELECT|WITH)\b",
                     re.IGNORECASE | re.DOTALL)
_UNCACHED = ("SYSTEM_TIME", "INFORMATION_SCHEMA")
# Catalog methods that only read, and the jobs' own records (written by every query).
_READS = ("get_", "list_", "ensure_ready")
# Writes whose records no translation reads: jobs' and time-travel snapshots'.
_UNREAD = ("job", "snapshot")
# What a streamed insert or DML changes on a table; no pass that is remembered reads it.
_STATISTICS = frozenset({"num_rows", "num_bytes", "last_modified_time", "etag"})


class Memo:
    """Translations by (statement, project, caller, catalog generation)."""

    def __init__(self, size: int = MEMO_SIZE) -> None:
        self.size = size
        self.generation = 0
        self.hits = 0
        self.misses = 0
        self._translations: OrderedDict[tuple[Any, ...], str] = OrderedDict()

    def changed(self) -> None:
        self.generation += 1

    def get(self, key: tuple[Any, ...]) -> str | None:
        found = self._translations.get(key)
        if found is not None:
            self._translations.move_to_end(key)
            self.hits += 1
        else:
            self.misses += 1
        return found

    def put(self, key: tuple[Any, ...], translated: str) -> None:
        self._translations[key] = translated
        if len(self._translations) > self.size:
            self._translations.popitem(last=False)


def cacheable(sql: str) -> bool:
    """A single read whose translation depends only on text, caller and catalog."""
    upper = sql.upper()
    return bool(_SELECT.match(sql)) and not any(word in upper for word in _UNCACHED)


def statistics_only(old: Any, new: Any) -> bool:
    """Whether a table update changes nothing but the table's statistics."""
    return old is not None and (old.model_dump(exclude=_STATISTICS)
                                == new.model_dump(exclude=_STATISTICS))


def _watch_writes(cls: type, memo: Memo) -> None:
    """Start a new generation around every catalog write (before it, so a translation
    running across it is not kept; after it, so none made before it is used)."""
    for name in [n for n in vars(cls) if not n.startswith("_")]:
        method = getattr(cls, name)
        if not callable(method) or name.startswith(_READS) or any(w in name for w in _UNREAD):
            continue

        def write(self: Any, *args: Any, __method: Any = method, __name: str = name,
                  **kwargs: Any) -> Any:
            if __name == "update_table" and args and statistics_only(
                    self.get_table(args[0].project_id, args[0].dataset_id, args[0].table_id),
                    args[0]):
                return __method(self, *args, **kwargs)
            memo.changed()
            try:
                return __method(self, *args, **kwargs)
            finally:
                memo.changed()

        functools.update_wrapper(write, method)
        setattr(cls, name, write)


def install(size: int = MEMO_SIZE) -> Memo:
    """Wrap bqemulator's single-statement query path; returns the memo (its counters
    say how often it served)."""
    from bqemulator.catalog.duckdb_repository import DuckDBCatalogRepository
    from bqemulator.catalog.memory_repository import MemoryCatalogRepository
    from bqemulator.jobs import executor

    memo = Memo(size)
    for cls in (DuckDBCatalogRepository, MemoryCatalogRepository):
        _watch_writes(cls, memo)
    translate: Callable[..., Awaitable[str]] = getattr(  # noqa: B009 - not re-exported
        executor, "rewrite_and_translate_statement")

    async def remembered(bq_sql: str, *, project_id: str, ctx: Any, caller: Any,
                         translator: Any) -> str:
        def fresh() -> Awaitable[str]:
            return translate(bq_sql, project_id=project_id, ctx=ctx, caller=caller,
                             translator=translator)

        if not cacheable(bq_sql) or ctx.catalog.list_all_materialized_views():
            return await fresh()
        key = (bq_sql, project_id, caller, memo.generation)
        found = memo.get(key)
        if found is not None:
            return found
        translated = await fresh()
        if memo.generation == key[-1]:
            memo.put(key, translated)
        return translated

    # Set by name on the module that calls them (it imported both by name).
    setattr(executor, "rewrite_and_translate_statement", remembered)  # noqa: B010
    # A pure function of its two strings (a regular expression over the text).
    setattr(executor, "rewrite_table_refs",  # noqa: B010
            functools.lru_cache(maxsize=size)(getattr(executor, "rewrite_table_refs")))  # noqa: B009
    return memo


def main() -> int:
    install()
    from bqemulator.cli import main as bqemulator_main

    sys.argv[0] = "bqemulator"
    return int(bqemulator_main() or 0)


if __name__ == "__main__":
    sys.exit(main())
