"""The load generator's options: declared once, read from flags or the environment.

Locust parses the command line with ConfigArgParse, so every option here also reads
an environment variable (``LOADGEN_*``): the same image runs on a laptop with flags
and on GKE or Cloud Run with a Deployment's ``env``. Parsing the namespace into a
frozen :class:`Settings` is separate from Locust so tests can check the rules
without starting it.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, Protocol, cast

from shared.config import Topics
from shared.errors import ConfigError

from .records import Slos

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_FLUSH_INTERVAL",
    "DEFAULT_PUBLISH_TIMEOUT",
    "DEFAULT_TOPIC",
    "SERVERS",
    "Server",
    "Settings",
    "add_arguments",
    "new_test_id",
    "settings_from",
]

Server = Literal["triton", "saxml"]
SERVERS: tuple[Server, ...] = ("triton", "saxml")
DEFAULT_TOPIC = Topics().loadtest_metrics
DEFAULT_BATCH_SIZE = 500
DEFAULT_FLUSH_INTERVAL = 2.0
DEFAULT_PUBLISH_TIMEOUT = 30.0
DEFAULT_MAX_TOKENS = 128
# The alphabet MetricRecord accepts for a test id.
_TEST_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
# Pub/Sub's rule for topic ids (a full ``projects/../topics/..`` path is accepted too).
_TOPIC = re.compile(r"^(projects/[^/]+/topics/)?[A-Za-z][A-Za-z0-9._~+%-]{2,254}$")
# RunRecord's bound on an objective: above 0, at most a day.
_MAX_SLO_MS = 86_400_000.0


class _Parser(Protocol):
    """What is needed of Locust's parser (a ConfigArgParse parser, so ``env_var`` works)."""

    def add_argument(self, *args: Any, **kwargs: Any) -> Any: ...


@dataclass(frozen=True, slots=True)
class Settings:
    """One run's configuration, validated."""

    test_id: str
    server: Server
    model: str
    accelerator: str | None
    max_tokens: int
    prompts_file: str | None
    bad_request_ratio: float
    stream: bool
    metrics_project: str
    metrics_topic: str
    metrics_batch_size: int
    metrics_flush_interval: float
    metrics_publish_timeout: float
    slos: Slos = field(default_factory=Slos)


def new_test_id(now: datetime | None = None) -> str:
    """A fresh test id: UTC time to the second and a random suffix, e.g.
    ``20250314-093000-5f2a9c``; sorts by start time and never collides in practice."""
    stamp = (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{secrets.token_hex(3)}"


def add_arguments(parser: _Parser, environ: Mapping[str, str] | None = None) -> None:
    """Declare the options on Locust's parser (``events.init_command_line_parser``)."""
    env = os.environ if environ is None else environ
    project = env.get("GOOGLE_CLOUD_PROJECT") or env.get("ACCELOPS_PROJECT")
    add = parser.add_argument
    add("--test-id", env_var="LOADGEN_TEST_ID", default=None,
        help="Id stamped on every record (default: UTC time + random suffix, logged at start)")
    add("--server", env_var="LOADGEN_SERVER", choices=SERVERS, default="triton",
        help="Inference server protocol; runs TritonUser or SaxmlUser (default triton)")
    add("--model", env_var="LOADGEN_MODEL", default=None,
        help="Triton model name, or Saxml model path such as /sax/test/lm (required)")
    add("--accelerator", env_var="LOADGEN_ACCELERATOR", default=None,
        help="What the server runs on, recorded with every request, e.g. v5litepod-8 or cpu")
    add("--max-tokens", env_var="LOADGEN_MAX_TOKENS", type=int, default=DEFAULT_MAX_TOKENS,
        help=f"Tokens to generate per request (default {DEFAULT_MAX_TOKENS})")
    add("--prompts-file", env_var="LOADGEN_PROMPTS_FILE", default=None,
        help="Prompts, one per line; .jsonl lines are strings or objects with 'prompt'")
    add("--bad-request-ratio", env_var="LOADGEN_BAD_REQUEST_RATIO", type=float, default=0.0,
        help="Fraction of requests sent to a model that does not exist (default 0)")
    add("--stream", env_var="LOADGEN_STREAM", action="store_true", default=False,
        help="Triton only: stream the completion (generate_stream, server-sent events) and "
             "record the time to the first token")
    add("--metrics-project", env_var="LOADGEN_METRICS_PROJECT", default=project,
        help="Project of the metrics topic (default $GOOGLE_CLOUD_PROJECT or $ACCELOPS_PROJECT)")
    add("--metrics-topic", env_var="LOADGEN_METRICS_TOPIC", default=DEFAULT_TOPIC,
        help=f"Pub/Sub topic for per-request records (default {DEFAULT_TOPIC})")
    add("--metrics-batch-size", env_var="LOADGEN_METRICS_BATCH_SIZE", type=int,
        default=DEFAULT_BATCH_SIZE,
        help=f"Records per Pub/Sub message at most (default {DEFAULT_BATCH_SIZE})")
    add("--metrics-flush-interval", env_var="LOADGEN_METRICS_FLUSH_INTERVAL", type=float,
        default=DEFAULT_FLUSH_INTERVAL,
        help="Seconds a record may wait for its batch to fill "
             f"(default {DEFAULT_FLUSH_INTERVAL:g})")
    add("--metrics-publish-timeout", env_var="LOADGEN_METRICS_PUBLISH_TIMEOUT", type=float,
        default=DEFAULT_PUBLISH_TIMEOUT,
        help="Seconds one publish, and the final flush at shutdown, may take "
             f"(default {DEFAULT_PUBLISH_TIMEOUT:g})")
    add("--slo-ttft-ms", env_var="LOADGEN_SLO_TTFT_MS", type=float, default=None,
        help="SLO: time to first token at most this many ms (needs --stream); "
             "recorded with the run, judged per request in the goodput")
    add("--slo-tpot-ms", env_var="LOADGEN_SLO_TPOT_MS", type=float, default=None,
        help="SLO: time per output token at most this many ms (needs --stream)")
    add("--slo-latency-ms", env_var="LOADGEN_SLO_LATENCY_MS", type=float, default=None,
        help="SLO: the whole request's latency at most this many ms")


def _option(options: Any, name: str) -> Any:
    return getattr(options, name, None)


def _number(options: Any, name: str, kind: Callable[[Any], Any]) -> Any:
    value = _option(options, name)
    flag = "--" + name.replace("_", "-")
    try:
        return kind(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{flag}: {value!r} is not a number", field=flag,
                          rule="number") from exc


def _flag(value: Any) -> bool:
    # A namespace from an older master (or a hand-made one) may carry text.
    if isinstance(value, str):
        return value.strip().lower() in {"1", "true", "yes", "on"}
    return bool(value)


def settings_from(options: Any, *, new_id: Callable[[], str] = new_test_id,
                  model_required: bool = True) -> Settings:
    """Validate a parsed namespace; a missing test id gets ``new_id()``. Without
    ``model_required`` an unnamed model is ``""``: a worker, or a master waiting for
    tests from its web API, learns the model with each test.

    Raises ConfigError naming the option and the rule it breaks.
    """

    def fail(flag: str, rule: str, message: str) -> ConfigError:
        return ConfigError(f"{flag}: {message}", field=flag, rule=rule)

    test_id = _option(options, "test_id") or new_id()
    if not _TEST_ID.match(test_id):
        raise fail("--test-id", "pattern",
                   f"{test_id!r} must be 1-128 of letters, digits, '.', '_', ':', '-', "
                   "starting with a letter or digit")
    server = _option(options, "server") or "triton"
    if server not in SERVERS:
        raise fail("--server", "choice", f"{server!r} is not one of {', '.join(SERVERS)}")
    model = (_option(options, "model") or "").strip()
    if not model and model_required:
        raise fail("--model", "required", "name the model to load (or set LOADGEN_MODEL)")
    max_tokens = _number(options, "max_tokens", int)
    if max_tokens < 1:
        raise fail("--max-tokens", "positive", f"{max_tokens} must be at least 1")
    ratio = _number(options, "bad_request_ratio", float)
    if not 0.0 <= ratio <= 1.0:
        raise fail("--bad-request-ratio", "range", f"{ratio} must be between 0 and 1")
    stream = _flag(_option(options, "stream"))
    if stream and server != "triton":
        raise fail("--stream", "server", "the Saxml HTTP proxy has no streaming endpoint; "
                   "--stream needs --server triton")
    project = (_option(options, "metrics_project") or "").strip()
    if not project:
        raise fail("--metrics-project", "required",
                   "set it, or GOOGLE_CLOUD_PROJECT / ACCELOPS_PROJECT")
    topic = (_option(options, "metrics_topic") or "").strip()
    if not _TOPIC.match(topic):
        raise fail("--metrics-topic", "pattern", f"{topic!r} is not a Pub/Sub topic id")
    batch_size = _number(options, "metrics_batch_size", int)
    if batch_size < 1:
        raise fail("--metrics-batch-size", "positive", f"{batch_size} must be at least 1")
    interval = _number(options, "metrics_flush_interval", float)
    if not interval > 0:
        raise fail("--metrics-flush-interval", "positive", f"{interval} must be above 0")
    publish_timeout = _number(options, "metrics_publish_timeout", float)
    if not publish_timeout > 0:
        raise fail("--metrics-publish-timeout", "positive", f"{publish_timeout} must be above 0")
    slos = _slos(options, stream, fail)
    return Settings(
        test_id=test_id,
        server=cast(Server, server),
        model=model,
        accelerator=(_option(options, "accelerator") or "").strip() or None,
        max_tokens=max_tokens,
        prompts_file=_option(options, "prompts_file") or None,
        bad_request_ratio=ratio,
        stream=stream,
        metrics_project=project,
        metrics_topic=topic,
        metrics_batch_size=batch_size,
        metrics_flush_interval=interval,
        metrics_publish_timeout=publish_timeout,
        slos=slos,
    )


def _slos(options: Any, stream: bool,
          fail: Callable[[str, str, str], ConfigError]) -> Slos:
    """The ``--slo-*-ms`` options: each unset, or a number of ms above 0 (at most a
    day). TTFT and TPOT exist only for streamed requests: without ``--stream`` no
    request could meet them, so they are refused rather than make every request bad."""
    values: dict[str, float | None] = {}
    for name in ("slo_ttft_ms", "slo_tpot_ms", "slo_latency_ms"):
        flag = "--" + name.replace("_", "-")
        raw = _option(options, name)
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            # Unset; the web UI's form posts an empty field as "".
            values[name] = None
            continue
        value = float(_number(options, name, float))
        if not 0.0 < value <= _MAX_SLO_MS:
            raise fail(flag, "range", f"{value:g} must be above 0 and at most "
                       f"{_MAX_SLO_MS:,.0f} (a day)")
        if name != "slo_latency_ms" and not stream:
            raise fail(flag, "stream", "only streamed requests have a time to first token "
                       "and a time per output token; add --stream")
        values[name] = value
    return Slos(ttft_ms=values["slo_ttft_ms"], tpot_ms=values["slo_tpot_ms"],
                latency_ms=values["slo_latency_ms"])
