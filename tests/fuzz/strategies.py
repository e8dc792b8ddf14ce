"""Inputs for the fuzz suite: valid ones built from the documented rules (docs/guides), and
hostile ones that break a known rule at a known place.

The oracle is the construction, never the implementation: a valid request is valid
because every field was drawn from its documented range; a poisoned one is invalid
because one value at one path breaks one documented rule. JSON text is assembled here
(:func:`dumps`) so that hostile tokens the ``json`` module would not write — duplicate
keys, ``NaN``, numbers thousands of digits long, nesting thousands of levels deep — can
be placed anywhere.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import strategies as st

# ----------------------------------------------------------------------- JSON text


@dataclass(frozen=True)
class Raw:
    """JSON text put into a document as it is."""

    text: str


@dataclass(frozen=True)
class Pairs:
    """An object written member by member, so a key may appear twice."""

    members: tuple[tuple[str, Any], ...]


def _string(text: str, ascii_only: bool) -> str:
    # A lone surrogate can only travel escaped: "\ud800" is valid JSON text, its raw
    # code point is not UTF-8.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        ascii_only = True
    return json.dumps(text, ensure_ascii=ascii_only)


def dumps(value: Any, ascii_only: bool = False) -> str:
    """JSON text for ``value``, with :class:`Raw` and :class:`Pairs` written as they are."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, Pairs | dict):
        members = value.members if isinstance(value, Pairs) else tuple(value.items())
        return "{" + ", ".join(f"{_string(k, ascii_only)}: {dumps(v, ascii_only)}"
                               for k, v in members) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(dumps(v, ascii_only) for v in value) + "]"
    if isinstance(value, str):
        return _string(value, ascii_only)
    return json.dumps(value)


def encode(value: Any, ascii_only: bool = False) -> bytes:
    return dumps(value, ascii_only).encode("utf-8")


# ---------------------------------------------------------------------- plain text

# Any Unicode text a user may legitimately send: everything but lone surrogates.
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)


def lone_surrogate_text() -> st.SearchStrategy[str]:
    return st.tuples(TEXT, st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
                     TEXT).map("".join)


# --------------------------------------------------------------------- hostile values


@dataclass(frozen=True)
class Poison:
    """A value that breaks a rule wherever it is put; ``kind`` names the class."""

    value: Any
    kind: str


def poison(max_string_chars: int, max_items: int, max_depth: int) -> st.SearchStrategy[Poison]:
    """Hostile values for documents whose limits are the given ones."""
    deep = st.integers(max_depth + 1, 3_000)
    return st.one_of(
        deep.map(lambda d: Poison(Raw("[" * d + "]" * d), "deep array")),
        st.integers(2_000, 20_000).map(lambda d: Poison(Raw("[" * d + "]" * d),
                                                        "array deeper than the parser")),
        deep.map(lambda d: Poison(Raw('{"a": ' * d + "1" + "}" * d), "deep object")),
        st.integers(41, 6_000).map(lambda n: Poison(Raw("9" * n), "long integer")),
        st.integers(41, 4_300).map(lambda n: Poison(Raw("-" + "8" * n), "long negative integer")),
        st.sampled_from(["NaN", "Infinity", "-Infinity"]).map(
            lambda c: Poison(Raw(c), "non-standard constant")),
        st.sampled_from(["1e999", "-1e400"]).map(lambda c: Poison(Raw(c), "infinite float")),
        lone_surrogate_text().map(lambda t: Poison(t, "lone surrogate")),
        st.builds(lambda k: Poison(Pairs(((k, 1), (k, 2))), "duplicate key"), TEXT),
        st.builds(lambda k: Poison({k: 1}, "lone surrogate key"), lone_surrogate_text()),
        st.integers(max_string_chars + 1, max_string_chars * 2).map(
            lambda n: Poison("x" * n, "long string")),
        st.just(Poison([0] * (max_items + 1), "long array")),
    )


# ---------------------------------------------------------------------- job requests

TEAMS: dict[str, dict[str, Any]] = {
    # As tests/data/config.yaml says.
    "research": {"namespace": "research", "queue": "research-queue",
                 "types": ["v5litepod-16", "v4-32", "v5p-128"], "max_slices": 4,
                 "prefix": "us-docker.pkg.dev/acme/"},
    "inference": {"namespace": "inference", "queue": "inference-queue",
                  "types": None, "max_slices": None, "prefix": ""},
}
# A sample of the catalogue a team without an allow-list may use.
ANY_TPU_TYPES = ["v5litepod-1", "v5litepod-4", "v5litepod-8", "v5litepod-16", "v4-8",
                 "v4-16", "v5p-8", "v5p-16", "v6e-1", "v6e-4", "v6e-8", "v6e-16"]
REQUEST_ID = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,40}", fullmatch=True)
_IMAGE_PATH = st.from_regex(
    r"[a-z0-9]{1,10}(/[a-z0-9]{1,10}){0,2}(:[A-Za-z0-9_][A-Za-z0-9._-]{0,15})?",
    fullmatch=True)
REQUEST_FIELDS_LIMITS = {"max_string_chars": 4096, "max_items": 256, "max_depth": 4}


@st.composite
def job_request(draw: st.DrawFn, team: str | None = None) -> dict[str, Any]:
    """A request every documented rule accepts."""
    team = team or draw(st.sampled_from(sorted(TEAMS)))
    policy = TEAMS[team]
    types = policy["types"] or ANY_TPU_TYPES
    tpu: dict[str, Any] = {"type": draw(st.sampled_from(types)),
                           "slices": draw(st.integers(1, policy["max_slices"] or 8))}
    capacity = draw(st.sampled_from(["default", "spot", "reservation"]))
    if capacity == "spot":
        tpu["spot"] = draw(st.booleans())
    elif capacity == "reservation":
        tpu["reservation"] = draw(st.from_regex(r"[a-z]([-a-z0-9]{0,20}[a-z0-9])?",
                                                fullmatch=True))
    body: dict[str, Any] = {
        "name": draw(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,30}", fullmatch=True)),
        "team": team,
        "image": policy["prefix"] + draw(_IMAGE_PATH),
        "tpu": tpu,
    }
    optional = {
        "command": st.lists(TEXT, max_size=4),
        "args": st.lists(TEXT, max_size=6),
        "env": st.dictionaries(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,15}", fullmatch=True),
                               TEXT, max_size=4),
        "priority": st.sampled_from(["low", "medium", "high"]),
        "max_restarts": st.integers(0, 10),
        "request_id": REQUEST_ID,
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            body[key] = draw(strategy)
    return body


# Where a value can be broken, and values of the wrong type for it.
_NOT_INT = st.one_of(st.booleans(), st.floats(allow_nan=False, allow_infinity=False),
                     st.integers(1, 4).map(str), st.just([1]), st.none())
_NOT_STR = st.one_of(st.integers(-5, 5), st.booleans(), st.just(["x"]), st.just({"x": 1}),
                     st.floats(allow_nan=False, allow_infinity=False))
_NOT_LIST = st.one_of(st.just("python train.py"), st.integers(), st.just({"a": "b"}))
WRONG_TYPES: dict[tuple[str, ...], st.SearchStrategy[Any]] = {
    ("tpu", "slices"): _NOT_INT,
    ("max_restarts",): _NOT_INT,
    ("tpu", "spot"): st.one_of(st.sampled_from(["true", "false", "1"]), st.integers(0, 1)),
    ("name",): _NOT_STR.filter(lambda v: v is not None),
    ("team",): _NOT_STR,
    ("image",): _NOT_STR,
    ("tpu", "type"): _NOT_STR,
    ("priority",): _NOT_STR,
    ("command",): _NOT_LIST,
    ("args",): _NOT_LIST,
    ("env",): st.one_of(st.just(["A=1"]), st.just("A=1"), st.integers()),
    ("tpu",): st.one_of(st.just("v5litepod-16"), st.just([1]), st.integers()),
    ("request_id",): st.one_of(st.integers(), st.booleans(), st.just(["r"])),
}
OUT_OF_RANGE: dict[tuple[str, ...], st.SearchStrategy[Any]] = {
    ("tpu", "slices"): st.one_of(st.integers(-10**6, 0), st.integers(1025, 10**18)),
    ("max_restarts",): st.one_of(st.integers(-100, -1), st.integers(11, 10**18)),
    ("name",): st.one_of(st.just(""), st.just("   "), st.text(min_size=64, max_size=100),
                         st.sampled_from(["-lead", "a/b", "a\nb", "é"])),
    ("priority",): st.sampled_from(["urgent", "", "HIGH"]),
    ("request_id",): st.sampled_from(["", " ", "-x", "a b", "x" * 129, "ü"]),
    ("image",): st.sampled_from(["", "UPPER/case", "a b", "img;rm -rf /", "x" * 600]),
    ("tpu", "type"): st.sampled_from(["v9-64", "v5p-7", "", "v5litepod-16x", "tpu"]),
    ("args", 0): st.text(min_size=4097, max_size=4200),
    ("env",): st.dictionaries(st.sampled_from(["1BAD", "A-B", "", "A B"]), TEXT,
                              min_size=1, max_size=1),
}
POD_SPEC_FIELDS = ["serviceAccountName", "hostNetwork", "securityContext", "volumes",
                   "privileged", "hostPath", "nodeSelector", "tolerations", "containers",
                   "automountServiceAccountToken", "hostPID", "initContainers"]


def with_value(body: dict[str, Any], path: tuple[str | int, ...], value: Any) -> Any:
    """A copy of ``body`` with ``value`` at ``path`` (creating the last step)."""
    copy: Any = json.loads(json.dumps(body))
    node = copy
    for step in path[:-1]:
        if isinstance(node, dict) and step not in node:
            node[step] = [] if isinstance(path[len(path) - 1], int) else {}
        node = node[step]
    last = path[-1]
    if isinstance(node, list):
        while len(node) <= int(last):
            node.append("x")
    node[last] = value
    return copy


def path_text(path: tuple[str | int, ...]) -> str:
    return ".".join(str(p) for p in path) or "<root>"


@dataclass(frozen=True)
class BadRequest:
    """Job-request bytes that must be refused; the refusal names ``field`` or a field
    below it ("" when any field will do)."""

    data: bytes
    field: str
    kind: str

    @property
    def may_fail_whole(self) -> bool:
        """Nested deeper than the parser recurses: only "data" can be named."""
        return self.kind in DEEP_KINDS


DEEP_KINDS = {"deep array", "deep object", "array deeper than the parser"}


@st.composite
def bad_request(draw: st.DrawFn) -> BadRequest:
    base = draw(job_request())
    ascii_only = draw(st.booleans())
    kind = draw(st.sampled_from(["type", "range", "pod-spec", "poison", "policy",
                                 "root", "bytes", "size", "capacity", "garbage"]))
    if kind == "type":
        path = draw(st.sampled_from(sorted(WRONG_TYPES)))
        body = with_value(base, path, draw(WRONG_TYPES[path]))
        return BadRequest(encode(body, ascii_only), path_text(path), f"type of {path}")
    if kind == "range":
        path = draw(st.sampled_from(sorted(OUT_OF_RANGE, key=str)))
        body = with_value(base, path, draw(OUT_OF_RANGE[path]))
        shown = path_text(path[:1]) if path == ("args", 0) else path_text(path)
        return BadRequest(encode(body, ascii_only), shown, f"range of {path}")
    if kind == "pod-spec":
        field = draw(st.sampled_from(POD_SPEC_FIELDS))
        where = draw(st.sampled_from([(), ("tpu",)]))
        body = with_value(base, (*where, field), draw(st.one_of(
            st.booleans(), st.just({"privileged": True}), st.just("cluster-admin"))))
        return BadRequest(encode(body, ascii_only), path_text((*where, field)),
                          "pod-spec field")
    if kind == "poison":
        item = draw(poison(**REQUEST_FIELDS_LIMITS))
        path = draw(st.sampled_from([("name",), ("team",), ("image",), ("tpu", "type"),
                                     ("tpu", "slices"), ("args", 0), ("env", "A"),
                                     ("max_restarts",), ("request_id",), ("priority",),
                                     ("extra",)]))
        body = with_value(base, path, item.value)
        return BadRequest(encode(body, ascii_only), path_text(path), item.kind)
    if kind == "policy":
        choice = draw(st.sampled_from(["team", "image", "type", "slices"]))
        research = draw(job_request(team="research"))
        if choice == "team":
            body = {**research, "team": draw(st.sampled_from(["marketing", "Research",
                                                              "research ", "ops"]))}
            field = "team"
            if body["team"].strip() == "research":
                body["team"] = "marketing"
        elif choice == "image":
            body = {**research, "image": "docker.io/someone/miner:1"}
            field = "image"
        elif choice == "type":
            body = with_value(research, ("tpu", "type"), draw(st.sampled_from(
                ["v6e-16", "v5litepod-4", "v4-8"])))
            field = "tpu.type"
        else:
            body = with_value(research, ("tpu", "slices"), draw(st.integers(5, 1024)))
            field = "tpu.slices"
        return BadRequest(encode(body, ascii_only), field, f"policy: {choice}")
    if kind == "capacity":
        body = with_value(base, ("tpu",), {**base["tpu"], "spot": True, "reservation": "r1"})
        return BadRequest(encode(body, ascii_only), "tpu", "spot and reservation")
    if kind == "root":
        value = draw(st.one_of(st.lists(st.integers(), max_size=3), st.text(max_size=5),
                               st.integers(), st.none(), st.booleans()))
        return BadRequest(encode(value), "<root>", "not an object")
    if kind == "bytes":
        data = draw(st.one_of(st.binary(min_size=1, max_size=64).filter(_not_utf8),
                              st.sampled_from([b"", b"{", b'{"name": }', b"[1,]", b"\xef\xbb\xbf{}",
                                               b'{"a": 1} trailing'])))
        return BadRequest(data, "data", "not UTF-8 JSON")
    if kind == "size":
        body = {**base, "args": ["x" * 4000] * 66}  # 264 KB: over the 256 KiB limit
        return BadRequest(encode(body), "data", "too large")
    garbage = draw(st.recursive(
        st.none() | st.booleans() | st.integers() | TEXT,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
        max_leaves=8).filter(lambda v: isinstance(v, dict) and "name" not in v))
    return BadRequest(encode(garbage, ascii_only), "", "arbitrary object")


def _not_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


# ---------------------------------------------------------------- bodies, not events

HOSTILE_HEADERS = st.sampled_from([
    {"Content-Type": "application/json"},
    {"Content-Type": "application/cloudevents+json"},
    {"Content-Type": "text/plain"},
    {"Content-Type": "application/json", "ce-id": "1", "ce-source": "//fuzz",
     "ce-type": "google.cloud.pubsub.topic.v1.messagePublished", "ce-specversion": "1.0"},
])


@st.composite
def hostile_body(draw: st.DrawFn) -> bytes:
    """A request body that is not a well-formed Pub/Sub push, in any of the ways a
    misconfigured sender could get it wrong."""
    kind = draw(st.sampled_from(["bytes", "json", "poison", "envelope"]))
    if kind == "bytes":
        return draw(st.binary(max_size=300))
    if kind == "json":
        return encode(draw(st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=10),
            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                st.text(max_size=8), inner, max_size=3), max_leaves=10)))
    if kind == "poison":
        item = draw(poison(max_string_chars=14_000_000, max_items=200, max_depth=4))
        return encode(draw(st.sampled_from([item.value, {"message": item.value},
                                            {"message": {"data": "", "attributes": item.value,
                                                         "messageId": "1"}}])))
    message: dict[str, Any] = {"data": base64.b64encode(b"{}").decode(), "messageId": "7"}
    broken = draw(st.sampled_from(["messageId", "data", "attributes", "publishTime"]))
    message[broken] = draw(st.one_of(st.integers(-1, 1) | st.just(""), st.just([]),
                                     st.just({"a": {"b": 1}}), st.just("%%%"),
                                     st.text(max_size=5), st.just("x" * 200)))
    return encode({"message": message})


# --------------------------------------------------------------------- metric records

EPOCH_MIN, EPOCH_MAX = 946_684_800, 4_102_444_800
TEST_ID = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,30}", fullmatch=True)
_SHORT = st.text(st.characters(exclude_categories=("Cs",)), max_size=30)
_COUNT = st.integers(0, 10**9)


@st.composite
def start_time(draw: st.DrawFn) -> tuple[Any, datetime]:
    """A start time as a record may give it, and the instant it stands for (UTC)."""
    form = draw(st.sampled_from(["float", "int", "iso"]))
    if form == "float":
        value = draw(st.floats(EPOCH_MIN, EPOCH_MAX))
        return value, datetime.fromtimestamp(value, UTC)
    if form == "int":
        seconds = draw(st.integers(EPOCH_MIN, EPOCH_MAX))
        return seconds, datetime.fromtimestamp(seconds, UTC)
    instant = draw(st.datetimes(min_value=datetime(2000, 1, 2), max_value=datetime(2099, 12, 30),
                                timezones=st.just(UTC)))
    offset = timezone(timedelta(minutes=draw(st.integers(-23 * 60 - 59, 23 * 60 + 59))))
    return instant.astimezone(offset).isoformat(), instant


@dataclass(frozen=True)
class GoodRecord:
    value: dict[str, Any]
    expected: dict[str, Any]  # what the row must hold


@st.composite
def good_record(draw: st.DrawFn) -> GoodRecord:
    given_start, instant = draw(start_time())
    response_time = draw(st.one_of(st.floats(0, 86_400_000), st.integers(0, 86_400_000)))
    record: dict[str, Any] = {
        "test_id": draw(TEST_ID),
        "request_type": draw(_SHORT),
        "request_name": draw(TEXT),
        "response_time": response_time,
        "start_time": given_start,
    }
    exception = draw(st.one_of(st.none(), st.text(st.characters(exclude_categories=("Cs",)),
                                                  min_size=1, max_size=3000)))
    if exception is not None or draw(st.booleans()):
        record["exception"] = exception
    for key in ("model_name", "model_method", "tokenizer", "server", "accelerator", "worker"):
        if draw(st.booleans()):
            record[key] = draw(_SHORT)
    for key in ("response_length", "num_input_tokens", "num_output_tokens", "users"):
        if draw(st.booleans()):
            record[key] = draw(_COUNT)
    if draw(st.booleans()):  # fields a newer load generator might add are ignored
        record[draw(st.sampled_from(["region", "x_pod", "x_trace"]))] = draw(
            st.one_of(_SHORT, _COUNT, st.booleans(), st.none()))
    expected = {
        "test_id": record["test_id"],
        "request_name": record["request_name"],
        "response_time": float(response_time),
        "start_time": instant,
        "exception": (exception[:2048] or None) if exception is not None else None,
    }
    return GoodRecord(record, expected)


_METRIC_WRONG: dict[str, st.SearchStrategy[Any]] = {
    "response_time": st.one_of(st.booleans(), st.just("12.5"), st.none(), st.just([1])),
    "users": st.one_of(st.floats(allow_nan=False), st.just("4"), st.booleans()),
    "response_length": st.one_of(st.just(4.0), st.just("4"), st.booleans()),
    "test_id": st.one_of(st.integers(), st.none(), st.just(""), st.just("has space"),
                         st.just("-lead"), st.text(min_size=129, max_size=140)),
    "start_time": st.one_of(
        st.booleans(), st.none(), st.just("yesterday"), st.just("2026-11-21T10:00:00"),
        st.just("1763740000"), st.just("9999-12-31T23:59:59-01:00"),
        st.just("0001-01-01T00:00:00+01:00"), st.just(Raw("9" * 310)),
        st.floats(max_value=EPOCH_MIN - 1), st.floats(min_value=EPOCH_MAX + 1),
        st.integers(10**12, 10**20)),
    "request_name": st.one_of(st.integers(), st.text(min_size=1025, max_size=1100)),
    "model_name": st.one_of(st.integers(), st.text(min_size=257, max_size=300)),
    "num_output_tokens": st.one_of(st.integers(-10, -1), st.integers(10**9 + 1, 10**15)),
    "response_time_range": st.one_of(st.floats(max_value=-0.001), st.floats(86_400_001, 1e300)),
}


@dataclass(frozen=True)
class BadRecord:
    value: Any  # may hold Raw / Pairs: written with dumps()
    kind: str

    @property
    def deep(self) -> bool:
        return any(self.kind.startswith(k) for k in DEEP_KINDS)


@st.composite
def bad_record(draw: st.DrawFn) -> BadRecord:
    record = dict(draw(good_record()).value)
    kind = draw(st.sampled_from(["wrong", "missing", "poison", "not-object"]))
    if kind == "wrong":
        key = draw(st.sampled_from(sorted(_METRIC_WRONG)))
        field = "response_time" if key == "response_time_range" else key
        record[field] = draw(_METRIC_WRONG[key])
        return BadRecord(record, f"{key} broken")
    if kind == "missing":
        key = draw(st.sampled_from(["test_id", "request_type", "request_name",
                                    "response_time", "start_time"]))
        record.pop(key)
        return BadRecord(record, f"{key} missing")
    if kind == "poison":
        item = draw(poison(max_string_chars=65_536, max_items=5_000, max_depth=8))
        key = draw(st.sampled_from(["test_id", "request_name", "response_time", "start_time",
                                    "users", "exception", "x_extra"]))
        record[key] = item.value
        return BadRecord(record, f"{item.kind} in {key}")
    return BadRecord(draw(st.one_of(st.integers(), TEXT, st.lists(st.integers(), max_size=2),
                                    st.none())), "not an object")

