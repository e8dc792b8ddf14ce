"""Node-pool actions through ``ingest_metrics`` into BigQuery, and what their removals saved.

Actions go in as pool_schedule sends them: push deliveries with ``kind=pool_action``,
some redelivered, some out of order. Every figure ``pool_savings_daily`` returns is then
checked against :func:`truth`, a walk over the actions sent (a plain state machine,
split at UTC midnights in Python), never against the emulator's own output. Times are
relative to today's UTC midnight, so the open interval runs up to the real now, as the
view's ``CURRENT_TIMESTAMP()`` does.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared import bigquery
from shared.cli import main
from shared.config import MetricsConfig
from shared.metrics.names import Names
from shared.metrics.pool_action import POOL_ACTION_KIND, pool_action_id
from shared.metrics.run import KIND_ATTRIBUTE
from shared.metrics.savings.sql import POOL_SAVINGS_DAILY
from shared.metrics.savings.views import BigQuerySavings, totals
from shared.metrics.schema import VIEWS, apply_schema
from tests.bigquery_fixtures import PROJECT, count, fresh_dataset
from tests.functional.test_ingest_metrics import envelope

MIDNIGHT = datetime.combine(datetime.now(UTC).date(), time(), UTC)  # today, 00:00 UTC
Action = dict[str, Any]
Key = tuple[date, str]  # (day, pool)


def act(pool: str, action: str, at: datetime, *, count: int, team: str = "research",
        method: str | None = "resize", accelerator: str = "tpu-v5-lite-podslice") -> Action:
    return {"action_id": pool_action_id("acme-ml", "us-central2-b", "train", pool, action, at),
            "at": at.isoformat(), "project": "acme-ml", "location": "us-central2-b",
            "cluster": "train", "pool": pool, "action": action,
            "method": None if action == "skip" else method, "reason": f"{action} by schedule",
            "accelerator_type": accelerator, "accelerator_count": count, "team": team,
            "schedule": "nights"}


def day(n: int, hour: int, minute: int = 0) -> datetime:
    """``hour``:``minute`` UTC, ``n`` days from today (negative: before)."""
    return MIDNIGHT + timedelta(days=n, hours=hour, minutes=minute)


A_REMOVE = act("pool-a", "remove", day(-3, 18), count=16)
# pool-a: removed at 18:00 three days ago (a later tick removes it again at 19:00, a
# skip at 20:00 changes nothing), restored at 06:00 the next day: 6 h on each side of
# midnight; removed again 18:00 to 06:00. pool-b: 8 GPUs removed at 22:00 yesterday and
# never restored. pool-c: only ever skipped. pool-d: a restore with no removal before it,
# then removed 01:00-03:30 yesterday. pool-e: removed and restored in the same instant.
ACTIONS: tuple[Action, ...] = (
    A_REMOVE,
    act("pool-a", "remove", day(-3, 19), count=16),
    act("pool-a", "skip", day(-3, 20), count=16),
    act("pool-a", "restore", day(-2, 6), count=16),
    act("pool-a", "remove", day(-2, 18), count=16, method="delete"),
    act("pool-a", "restore", day(-1, 6), count=16, method="recreate"),
    act("pool-b", "remove", day(-1, 22), count=8, team="serving", accelerator="nvidia-l4"),
    act("pool-c", "skip", day(-2, 18), count=4),
    act("pool-c", "skip", day(-1, 18), count=4),
    act("pool-d", "restore", day(-2, 5), count=2),
    act("pool-d", "remove", day(-1, 1), count=2),
    act("pool-d", "restore", day(-1, 3, 30), count=2),
    act("pool-e", "restore", day(-1, 12), count=8),
    act("pool-e", "remove", day(-1, 12), count=8),
)


def truth(actions: Sequence[Action], now: datetime) -> dict[Key, tuple[float, float]]:
    """(removed hours, accelerator-hours) per day and pool, from the actions themselves."""
    unique = {a["action_id"]: a for a in actions}.values()
    result: dict[Key, tuple[float, float]] = {}

    def add(pool: str, start: datetime, end: datetime, chips: int) -> None:
        while start < end:
            cut = min(end, datetime.combine(start.date() + timedelta(days=1), time(), UTC))
            hours = (cut - start).total_seconds() / 3600
            before = result.get((start.date(), pool), (0.0, 0.0))
            result[(start.date(), pool)] = (before[0] + hours, before[1] + hours * chips)
            start = cut

    for pool in sorted({a["pool"] for a in unique}):
        removed: tuple[datetime, int] | None = None
        for a in sorted((a for a in unique if a["pool"] == pool),
                        key=lambda a: (a["at"], a["action"] != "remove")):
            at = datetime.fromisoformat(a["at"])
            if a["action"] == "remove" and removed is None:
                removed = (at, a["accelerator_count"])
            elif a["action"] == "restore" and removed is not None:
                add(pool, removed[0], at, removed[1])
                removed = None
        if removed is not None:
            add(pool, removed[0], now, removed[1])
    return result


def push(client: Any, actions: Sequence[Action], message_id: str) -> None:
    event = envelope(message_id=message_id)
    event["message"]["data"] = base64.b64encode(json.dumps(list(actions)).encode()).decode()
    event["message"]["attributes"] = {KIND_ATTRIBUTE: POOL_ACTION_KIND}
    response = client.post("/", json=event)
    assert response.status_code == 200, response.get_data(as_text=True)


@dataclass
class Store:
    names: Names
    config: MetricsConfig
    config_path: Path
    endpoint: str


@pytest.fixture(scope="module")
def store(bigquery_endpoint: str, ingest_client: Any,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """One dataset holding :data:`ACTIONS`, sent as pool_schedule would: the restores
    before the removals they close, and one message delivered twice."""
    config = fresh_dataset()
    path = tmp_path_factory.mktemp("savings") / "config.yaml"
    path.write_text(yaml.safe_dump({"metrics": config.model_dump()}))
    with pytest.MonkeyPatch.context() as env:
        env.setenv("BIGQUERY_EMULATOR_HOST", bigquery_endpoint)
        env.setenv("ACCELOPS_PROJECT", PROJECT)
        env.setenv("ACCELOPS_CONFIG", str(path))
        apply_schema(PROJECT, config)
        restores = [a for a in ACTIONS if a["action"] == "restore"]
        push(ingest_client, restores, "pool-1")
        others = [a for a in ACTIONS if a["action"] != "restore"]
        push(ingest_client, others, "pool-2")
        push(ingest_client, others, "pool-2")  # redelivered
        push(ingest_client, [A_REMOVE], "pool-3")  # the same action, published again
        yield Store(Names.of(PROJECT, config), config, path, bigquery_endpoint)


def view_rows(store: Store) -> tuple[dict[Key, dict[str, Any]], datetime, datetime]:
    """The view's rows by (day, pool), and the instants just before and after the query."""
    before = datetime.now(UTC)
    rows = bigquery.query(PROJECT, f"SELECT * FROM {store.names.sql(POOL_SAVINGS_DAILY)}")
    after = datetime.now(UTC)
    return {(r["day"], r["pool"]): r for r in rows}, before, after


def test_the_view_saves_the_accelerator_hours_python_computes_from_the_actions(store):
    rows, before, after = view_rows(store)
    low, high = truth(ACTIONS, before), truth(ACTIONS, after)

    assert set(rows) == set(low) | set(high)
    for key, row in rows.items():
        low_hours, low_saved = low.get(key, (0.0, 0.0))
        high_hours, high_saved = high[key]
        assert low_hours - 1e-9 <= row["removed_hours"] <= high_hours + 1e-9, key
        assert low_saved - 1e-9 <= row["accelerator_hours_saved"] <= high_saved + 1e-9, key


def test_an_interval_across_utc_midnight_is_split_between_the_two_days(store):
    rows, _, _ = view_rows(store)

    first, second = rows[(day(-3, 0).date(), "pool-a")], rows[(day(-2, 0).date(), "pool-a")]
    assert (first["removed_hours"], first["accelerator_hours_saved"]) == (6.0, 96.0)
    # 00:00-06:00 of the first removal, and 18:00-24:00 of the second.
    assert (second["removed_hours"], second["accelerator_hours_saved"]) == (12.0, 192.0)
    assert second["intervals"] == 2


def test_duplicated_and_repeated_removes_count_once_from_the_first(store):
    rows, _, _ = view_rows(store)

    # Counted from 18:00 (not 19:00, the repeat) and once, though sent three times.
    assert rows[(day(-3, 0).date(), "pool-a")]["removed_hours"] == 6.0
    assert count(store.config, "pool_actions_unique", "pool = 'pool-a'") == 6


def test_a_pool_still_removed_counts_up_to_now_and_is_marked(store):
    rows, before, after = view_rows(store)

    yesterday, today = rows[(day(-1, 0).date(), "pool-b")], rows[(day(0, 0).date(), "pool-b")]
    assert (yesterday["removed_hours"], yesterday["accelerator_hours_saved"]) == (2.0, 16.0)
    hours_low = (before - MIDNIGHT).total_seconds() / 3600
    hours_high = (after - MIDNIGHT).total_seconds() / 3600
    assert hours_low - 1e-9 <= today["removed_hours"] <= hours_high + 1e-9
    assert today["accelerator_hours_saved"] == pytest.approx(today["removed_hours"] * 8)
    assert today["still_removed"] is True
    assert yesterday["still_removed"] is True
    assert rows[(day(-1, 0).date(), "pool-a")]["still_removed"] is False


def test_skips_a_restore_before_any_removal_and_an_instant_removal_save_nothing(store):
    rows, _, _ = view_rows(store)

    assert not [key for key in rows if key[1] in ("pool-c", "pool-e")]
    assert [key for key in rows if key[1] == "pool-d"] == [(day(-1, 0).date(), "pool-d")]
    assert rows[(day(-1, 0).date(), "pool-d")]["accelerator_hours_saved"] == 5.0  # 2.5 h x 2


def test_the_reader_returns_the_window_typed_with_totals_that_add_up(store):
    # A window reaching back into yesterday covers yesterday and today, whole days.
    rows = BigQuerySavings(store.names).pool_savings(datetime.now(UTC) - day(-1, 12))

    assert {row.day for row in rows} == {day(-1, 0).date(), day(0, 0).date()}
    assert rows == sorted(rows, key=lambda r: (r.day, r.team or "", r.pool))
    per_pool, total = totals(rows)
    assert {t.pool for t in per_pool} == {"pool-a", "pool-b", "pool-d"}
    assert total.accelerator_hours_saved == pytest.approx(
        sum(row.accelerator_hours_saved for row in rows))
    [a] = [t for t in per_pool if t.pool == "pool-a"]
    assert (a.removed_hours, a.accelerator_hours_saved) == (6.0, 96.0)  # 00:00-06:00


def test_report_savings_prints_every_day_and_pool_with_the_total(store, capsys, monkeypatch):
    monkeypatch.setenv("BIGQUERY_EMULATOR_HOST", store.endpoint)
    monkeypatch.setenv("ACCELOPS_PROJECT", PROJECT)
    monkeypatch.setenv("ACCELOPS_CONFIG", str(store.config_path))

    assert main(["report", "savings", "--since", "7d"]) == 0

    out = capsys.readouterr().out
    days = out.split("\n\n")[1].splitlines()[1:]  # the first table, without its header
    printed = {(date.fromisoformat(cells[0]), cells[-4]): float(cells[-1].replace(",", ""))
               for cells in (line.split() for line in days)}
    now = datetime.now(UTC)
    expected = truth(ACTIONS, now)
    assert set(printed) == set(expected)
    for key, saved in printed.items():
        if key[1] != "pool-b":  # still removed: grows while the test runs
            assert saved == round(expected[key][1], 1), key
    [total] = [line.split() for line in out.splitlines() if line.startswith("Total")]
    assert float(total[-1].replace(",", "")) == pytest.approx(
        sum(saved for _, saved in expected.values()), abs=0.1)
    assert "still removed: counted up to now" in out
    assert "still removed: counted up to now" in out


def test_report_savings_refuses_a_window_it_cannot_read(capsys):
    assert main(["report", "savings", "--since", "a week"]) == 1

    assert "'a week' is not a duration like 7d, 36h or 2w" in capsys.readouterr().err


def test_a_load_test_report_refuses_since(capsys):
    assert main(["report", "lt-1", "--since", "7d"]) == 1

    assert "--since is for `accelops report savings`" in capsys.readouterr().err


def test_a_bad_action_goes_to_rejections_and_the_good_ones_to_the_pool_actions_table(
        ingest_client, metrics_store):
    good = act("pool-z", "remove", day(-1, 18), count=4)
    bad = dict(act("pool-y", "remove", day(-1, 18), count=4), accelerator_count="4")

    push(ingest_client, [good, bad], "reject-1")

    assert count(metrics_store, "pool_actions_unique") == 1
    assert count(metrics_store, "requests") == 0
    [rejection] = bigquery.query(
        PROJECT, f"SELECT * FROM `{PROJECT}.{metrics_store.dataset}.rejections`")
    assert rejection["row_key"] == "reject-1:1"
    assert rejection["reason"] == "accelerator_count: Input should be a valid integer"


def test_no_view_measures_a_duration_in_a_unit_the_emulator_counts_differently():
    names = Names(PROJECT, "d", "requests", "rejections", "test_runs", "pool_actions", "job_events")
    [savings] = [view.sql(names) for view in VIEWS if view.name == POOL_SAVINGS_DAILY]

    units = [part.split(")")[0].rsplit(",", 1)[-1].strip()
             for part in savings.split("TIMESTAMP_DIFF(")[1:]]
    assert units == ["MICROSECOND"]


def test_no_view_names_the_column_at_without_quotes_as_bigquery_requires():
    # AT is a reserved keyword in GoogleSQL: an identifier spelled like one must be
    # quoted, except after a dot (starts.at). bqemulator accepts a bare `at` in ORDER BY
    # and window functions, so only this check would catch it before real BigQuery.
    names = Names(PROJECT, "d", "requests", "rejections", "test_runs", "pool_actions", "job_events")

    for view in VIEWS:
        assert not re.search(r"(?<![.`\w])at(?![`\w])", view.sql(names)), view.name


def test_the_emulator_counts_hour_boundaries_where_bigquery_counts_whole_hours(metrics_store):
    """A known departure of the sandbox's BigQuery emulator.

    BigQuery documents TIMESTAMP_DIFF("2001-02-01 01:00:00", "2001-02-01 00:00:01", HOUR)
    as 0: only whole hours count. bqemulator answers 1, the hour boundaries crossed
    (and likewise for SECOND across a second boundary). This is why the savings view
    measures in microseconds, where both agree. Should this test fail, the emulator
    has been fixed.
    """
    [row] = bigquery.query(PROJECT, """SELECT
  TIMESTAMP_DIFF(TIMESTAMP "2001-02-01 01:00:00+00", TIMESTAMP "2001-02-01 00:00:01+00",
                 HOUR) AS hours,
  TIMESTAMP_DIFF(TIMESTAMP "2001-02-01 01:00:00+00", TIMESTAMP "2001-02-01 00:00:01+00",
                 MICROSECOND) AS micros""")

    assert row["micros"] == 3_599_000_000  # what BigQuery answers too
    assert row["hours"] == 1  # BigQuery: 0
