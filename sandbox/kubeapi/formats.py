"""String formats kube-apiserver checks in custom resources, as it checks them.

apiextensions-apiserver (v0.32.0, pkg/apiserver/validation/formats.go) keeps a schema's
``format`` only when it is one of its supported formats (``int32``, ``int64``, ``float``…
are dropped, so never checked) and validates the rest with kube-openapi's strfmt registry
(kube-openapi 32ad38e42d3f, pkg/validation/strfmt): ``date-time`` (IsDateTime),
``date``, ``duration`` (Go durations and the Scala-like ``5 days`` form), ``uri`` (Go's
``url.ParseRequestURI``), ``ipv4``, ``ipv6``, ``cidr``, ``uuid``/``uuid3``/``4``/``5``,
``byte`` (base64), ``hexcolor``, ``password``. The other supported names (``email``,
``hostname``, ``mac``, ``isbn``…, ``creditcard``, ``ssn``, ``rgbcolor``,
``bsonobjectid``) are not simulated: a CRD that uses one fails to load
(:func:`checked_format`) rather than being checked more kindly than by the real server.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta, timezone

__all__ = [
    "UnsupportedFormat",
    "checked_format",
    "format_ok",
    "parse_date_time",
    "parse_duration",
    "parse_request_uri",
]

_SUPPORTED = frozenset({
    "bsonobjectid", "uri", "email", "hostname", "ipv4", "ipv6", "cidr", "mac", "uuid",
    "uuid3", "uuid4", "uuid5", "isbn", "isbn10", "isbn13", "creditcard", "ssn", "hexcolor",
    "rgbcolor", "byte", "password", "date", "duration", "datetime",
})


class UnsupportedFormat(ValueError):
    """A supported format the sandbox does not check."""


def checked_format(raw: str) -> str:
    """The format name validation uses for a schema's ``format`` ("" when the real server
    strips it); UnsupportedFormat for a kept format the sandbox cannot check."""
    name = raw.replace("-", "")
    if name not in _SUPPORTED:
        return ""
    if name not in _CHECKS:
        raise UnsupportedFormat(f"format {raw!r} is checked by kube-apiserver but not by "
                                "the sandbox")
    return name


def format_ok(name: str, value: str) -> bool:
    """Whether ``value`` is valid in format ``name`` (a :func:`checked_format` result)."""
    return _CHECKS[name](value)


# ----------------------------------------------------------------------------- dates

_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_TIME = re.compile(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$")
_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})?$")


def _is_date(text: str) -> bool:
    match = _DATE.match(text)
    if not match:
        return False
    try:
        date(int(match[1]), int(match[2]), int(match[3]))
    except ValueError:
        return False
    return True


def _is_date_time(text: str) -> bool:
    """strfmt.IsDateTime: a date, ``t``, then hh:mm:ss[.frac] and a zone (``z`` or
    ±hh:mm), hours to 23, minutes and seconds to 59, compared as text."""
    if len(text) < 4:
        return False
    parts = text.lower().split("t")
    if len(parts) < 2 or not _is_date(parts[0]):
        return False
    match = _TIME.match(parts[1])
    if not match:
        return False
    return match[1] <= "23" and match[2] <= "59" and match[3] <= "59"


def parse_date_time(text: str) -> datetime | None:
    """strfmt.ParseDateTime for what CEL rules see of a ``date-time`` string."""
    match = _RFC3339.match(text)
    if not match:
        return None
    year, month, day, hour, minute, second = (int(match[i]) for i in range(1, 7))
    micros = int((match[7] or ".0")[1:7].ljust(6, "0"))
    zone = match[8]
    tz = UTC
    if zone and zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        tz = timezone(sign * timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6])))
    try:
        return datetime(year, month, day, hour, minute, second, micros, tzinfo=tz)
    except ValueError:
        return None


# ----------------------------------------------------------------------------- durations

_GO_DURATION = re.compile(r"^[-+]?((\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h))+$")
_GO_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_GO_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "μs": 1_000, "ms": 1_000_000,
             "s": 1_000_000_000, "m": 60_000_000_000, "h": 3_600_000_000_000}
_SCALA = re.compile(r"((\d+)\s*([A-Za-zµ]+))")
_SCALA_UNITS = (
    (("ns", "nano"), 1),
    (("us", "µs", "micro"), 1_000),
    (("ms", "milli"), 1_000_000),
    (("s", "sec"), 1_000_000_000),
    (("m", "min"), 60_000_000_000),
    (("h", "hr", "hour"), 3_600_000_000_000),
    (("d", "day"), 86_400_000_000_000),
    (("w", "wk", "week"), 604_800_000_000_000),
)


def parse_duration(text: str) -> int | None:
    """strfmt.ParseDuration in nanoseconds: Go's ``time.ParseDuration``, else every
    ``<digits> <unit>`` found in the text (``5 days``, ``1hour``); None when neither."""
    if text == "0" or text in ("+0", "-0"):
        return 0
    if _GO_DURATION.match(text):
        sign = -1 if text.startswith("-") else 1
        total = sum(float(number) * _GO_UNITS[unit] for number, unit in _GO_PART.findall(text))
        return sign * int(total)
    found = False
    total = 0
    for _, digits, unit_text in _SCALA.findall(text):
        unit = unit_text.strip().lower()
        for variants, nanos in _SCALA_UNITS:
            last = len(variants) - 1
            for i, variant in enumerate(variants):
                if (i == last and unit.startswith(variant)) or variant == unit:
                    found = True
                    total += int(digits) * nanos
    return total if found else None


# ----------------------------------------------------------------------------- URIs

_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.\-]*$")
_PORT = re.compile(r"^(:[0-9]*)?$")
_USERINFO = re.compile(r"^[A-Za-z0-9\-._:~!$&'()*+,;=%@]*$")
_HOST_ASCII = re.compile(r"^[A-Za-z0-9\-._~!$&'()*+,;=:\[\]<>\"%]*$")
_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


def parse_request_uri(raw: str) -> bool:
    """Whether Go's ``url.ParseRequestURI`` accepts ``raw``: an absolute URI (a scheme, then
    an opaque part or ``//authority/path``) or an absolute path; no control characters,
    a numeric port, no broken ``%`` escapes."""
    if not raw or any(ord(c) < 0x20 or ord(c) == 0x7F for c in raw):
        return False
    if raw == "*":
        return True
    rest = raw
    scheme = ""
    for i, char in enumerate(raw):
        if char == ":":
            if i == 0:
                return False  # missing protocol scheme
            scheme, rest = raw[:i], raw[i + 1:]
            break
        if not (char.isascii() and (char.isalpha() or (i > 0 and (char.isdigit()
                                                                 or char in "+-.")))):
            break
    if scheme and not _SCHEME.match(scheme):
        scheme, rest = "", raw
    rest = rest.split("?", 1)[0]
    if not rest.startswith("/"):
        return bool(scheme)  # opaque (mailto:x) with a scheme; relative paths are refused
    if scheme and rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        if not _authority_ok(authority):
            return False
        rest = slash + path
    return not _ESCAPE.search(rest)


def _authority_ok(authority: str) -> bool:
    userinfo, at, host = authority.rpartition("@")
    if at and not _USERINFO.match(userinfo):
        return False
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            return False
        return bool(_PORT.match(host[end + 1:]))
    colon = host.rfind(":")
    if colon >= 0 and not _PORT.match(host[colon:]):
        return False
    return all(ord(c) >= 0x80 for c in host if not _HOST_ASCII.match(c)) and \
        not _ESCAPE.search(host)


# ----------------------------------------------------------------------------- the rest


def _ipv4(text: str) -> bool:
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return True


def _ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def _cidr(text: str) -> bool:
    try:
        ipaddress.ip_network(text, strict=False)
    except ValueError:
        return False
    return "/" in text


def _base64(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _matcher(pattern: str) -> Callable[[str], bool]:
    compiled = re.compile(pattern, re.IGNORECASE)
    return lambda text: compiled.match(text) is not None


_CHECKS: dict[str, Callable[[str], bool]] = {
    "datetime": _is_date_time,
    "date": _is_date,
    "duration": lambda text: parse_duration(text) is not None,
    "uri": parse_request_uri,
    "ipv4": _ipv4,
    "ipv6": _ipv6,
    "cidr": _cidr,
    "uuid": _matcher(r"^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$"),
    "uuid3": _matcher(r"^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$"),
    "uuid4": _matcher(
        r"^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$"),
    "uuid5": _matcher(
        r"^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$"),
    "byte": _base64,
    "hexcolor": _matcher(r"^#?([0-9a-f]{3}|[0-9a-f]{6})$"),
    "password": lambda _text: True,
}
