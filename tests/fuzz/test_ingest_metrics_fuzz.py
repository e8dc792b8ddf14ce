"""ingest_metrics under hostile input: for every message, no 5xx while BigQuery is
healthy; every good record lands in the requests table exactly as sent; every bad
record, and every message that cannot be read at all, lands in the rejections table;
nothing else lands anywhere.

Each example posts one message; what BigQuery holds is read once, after the whole run,
and compared with what each example's construction says it must hold.
"""

from __future__ import annotations

import base64
import itertools
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.conftest import MetricsWorld, budget
from tests.fuzz.strategies import (
    HOSTILE_HEADERS,
    BadRecord,
    GoodRecord,
    Raw,
    bad_record,
    dumps,
    good_record,
    hostile_body,
)

pytestmark = pytest.mark.fuzz

_ids = itertools.count(1)


@dataclass
class Expected:
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)  # row key -> fields
    rejected: set[str] = field(default_factory=set)  # row keys
    # Either key, exactly one: a one-record message nested deeper than the parser
    # recurses (how deep that is depends on the stack) is refused whole or as a record.
    either: list[tuple[str, str]] = field(default_factory=list)
    sent: dict[str, str] = field(default_factory=dict)  # message id -> what it was


def envelope(data: bytes, message_id: str) -> dict[str, Any]:
    return {"message": {"data": base64.b64encode(data).decode(), "messageId": message_id,
                        "attributes": {"records": "?"}},
            "subscription": "projects/accelops-test/subscriptions/loadtest-metrics-ingest"}


@st.composite
def batch(draw: st.DrawFn) -> tuple[bytes, list[GoodRecord | BadRecord | None], str]:
    """A message, and per record what it is (None: the message as a whole is bad)."""
    kind = draw(st.sampled_from(["records"] * 8 + ["single", "garbage"]))
    ascii_only = draw(st.booleans())
    if kind == "single":
        record = draw(st.one_of(good_record(), bad_record()))
        if isinstance(record.value, dict):
            return dumps(record.value, ascii_only).encode(), [record], "one record object"
        kind = "records"
    if kind == "records":
        records = draw(st.lists(st.one_of(good_record(), good_record(), bad_record()),
                                min_size=1, max_size=6))
        text = "[" + ", ".join(dumps(r.value, ascii_only) for r in records) + "]"
        return text.encode(), list(records), "records"
    garbage = draw(st.sampled_from([
        b"\xff\xfe not utf-8", b"", b"not json", b"[1, 2", b'{"test_id": }', b"42", b"null",
        b'"a string"', ("[" + "{}," * 5_000 + "{}]").encode(),
        ("{" + '"a": [' * 3_000 + "]" * 3_000 + "}").encode(),
        (dumps(Raw("[" * 50_000 + "]" * 49_999))).encode(),
        # Too deep, then a string that never closes: bracket matching must stay linear.
        b"[" + b"[" * 1_100 + b'"' + b'\\"' * 200_000]))
    return garbage, [None], "garbage"


def expect(expected: Expected, message_id: str, data: bytes,
           records: list[GoodRecord | BadRecord | None], kind: str) -> None:
    expected.sent[message_id] = f"{kind}: {data[:300]!r}"
    [only] = records if kind == "one record object" else [None]
    if isinstance(only, BadRecord) and only.deep:
        expected.either.append((f"{message_id}:0", f"{message_id}:message"))
        return
    if records == [None]:
        expected.rejected.add(f"{message_id}:message")
        return
    for index, record in enumerate(records):
        key = f"{message_id}:{index}"
        if isinstance(record, GoodRecord):
            expected.rows[key] = record.expected
        else:
            expected.rejected.add(key)


def test_every_good_record_is_stored_as_sent_and_every_bad_one_rejected_alone(
    metrics_world: MetricsWorld,
) -> None:
    expected = Expected()

    @given(message=batch())
    @budget(1200)
    def deliver(message: tuple[bytes, list[GoodRecord | BadRecord | None], str]) -> None:
        data, records, kind = message
        message_id = f"m{next(_ids)}"
        expect(expected, message_id, data, records, kind)

        response = metrics_world.client.post("/", json=envelope(data, message_id))

        assert response.status_code == 200, (kind, response.get_data(as_text=True)[:500])

    deliver()

    def ours(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [r for r in rows if r["message_id"] in expected.sent]

    rows = ours(metrics_world.query(
        "SELECT row_key, message_id, test_id, request_name, response_time, start_time, "
        "exception FROM DATASET.requests"))
    rejections = ours(metrics_world.query(
        "SELECT row_key, message_id, reason, record FROM DATASET.rejections"))
    stored = {r["row_key"]: r for r in rows}
    refused = {r["row_key"]: r for r in rejections}
    assert len(stored) == len(rows), "a record was stored twice"
    assert len(refused) == len(rejections), "a rejection was stored twice"

    lost = sorted(set(expected.rows) - set(stored))
    assert not lost, [(k, expected.sent[k.split(":")[0]]) for k in lost[:5]]
    assert set(stored) == set(expected.rows), sorted(set(stored) - set(expected.rows))[:5]
    for one, other in expected.either:
        assert (one in refused) != (other in refused), (one, expected.sent[one.split(":")[0]])
    alternatives = {key for pair in expected.either for key in pair}
    assert set(refused) - alternatives == expected.rejected, sorted(
        (set(refused) - alternatives) ^ expected.rejected)[:5]
    for key, want in expected.rows.items():
        got = stored[key]
        assert got["start_time"].astimezone(UTC) == want["start_time"], key
        assert {k: got[k] for k in ("test_id", "request_name", "response_time",
                                    "exception")} == {
            k: want[k] for k in ("test_id", "request_name", "response_time", "exception")}, key
    assert all(r["reason"] for r in rejections)


def test_a_record_nested_deeper_than_the_parser_rejects_that_record_only(
    metrics_world: MetricsWorld,
) -> None:
    good = {"test_id": "deep-1", "request_type": "POST", "request_name": "/x",
            "response_time": 1.5, "start_time": datetime(2026, 11, 23, tzinfo=UTC).isoformat()}
    deep = "[" * 100_000 + "]" * 100_000
    data = f"[{dumps(good)}, {deep}, {dumps(good)}]".encode()

    response = metrics_world.client.post("/", json=envelope(data, "deep-message"))

    assert response.status_code == 200
    keys = {r["row_key"] for r in metrics_world.query(
        "SELECT row_key FROM DATASET.requests WHERE message_id = 'deep-message'")}
    [rejection] = metrics_world.query(
        "SELECT row_key, reason FROM DATASET.rejections WHERE message_id = 'deep-message'")
    assert keys == {"deep-message:0", "deep-message:2"}
    assert rejection["row_key"] == "deep-message:1"
    assert "nesting depth" in rejection["reason"]


@given(body=hostile_body(), headers=HOSTILE_HEADERS)
@budget(300)
def test_no_request_body_makes_ingest_metrics_answer_5xx(
    metrics_world: MetricsWorld, body: bytes, headers: dict[str, str]
) -> None:
    response = metrics_world.client.post("/", data=body, headers=headers)

    assert response.status_code < 500, response.get_data(as_text=True)
