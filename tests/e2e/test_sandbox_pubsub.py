"""The sandbox Pub/Sub, driven over real sockets by the real google-cloud-pubsub client."""

from __future__ import annotations

import base64
import itertools
import json
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from google.api_core import exceptions
from google.cloud import pubsub_v1

from sandbox.pubsub import PubSubServer, SubscriptionConfig, start_pubsub
from tests.e2e import pubsub_fixtures as fx

# Fixtures are registered by binding them in this module's namespace.
pubsub = fx.pubsub
publisher = fx.publisher
subscriber = fx.subscriber
push_endpoint = fx.push_endpoint
cloud_event_function = fx.cloud_event_function
topic_path = fx.topic_path
subscription_path = fx.subscription_path
wait_for = fx.wait_for

pytestmark = pytest.mark.e2e

DEAD_LETTER_KEYS = {
    "CloudPubSubDeadLetterSourceDeliveryCount",
    "CloudPubSubDeadLetterSourceSubscription",
    "CloudPubSubDeadLetterSourceSubscriptionProject",
    "CloudPubSubDeadLetterSourceTopicPublishTime",
}


def _topic(publisher: Any, name: str = "jobs") -> str:
    return str(publisher.create_topic(name=topic_path(name)).name)


def _pull(subscriber: Any, subscription: str) -> list[Any]:
    """Synchronous pull; an empty result costs the fixture's short pull wait (0.3 s)."""
    response = subscriber.pull(
        request={"subscription": subscription, "max_messages": 10}, timeout=10
    )
    return list(response.received_messages)


# --------------------------------------------------------------- resources
def test_creating_an_existing_topic_raises_already_exists(publisher: Any) -> None:
    _topic(publisher)
    with pytest.raises(exceptions.AlreadyExists):
        publisher.create_topic(name=topic_path("jobs"))


def test_a_malformed_topic_name_raises_invalid_argument(publisher: Any) -> None:
    with pytest.raises(exceptions.InvalidArgument):
        publisher.create_topic(name=topic_path("x"))
    with pytest.raises(exceptions.InvalidArgument):
        publisher.create_topic(name="projects/p/subscriptions/not-a-topic")


def test_subscribing_to_a_missing_topic_raises_not_found(subscriber: Any) -> None:
    with pytest.raises(exceptions.NotFound):
        subscriber.create_subscription(name=subscription_path("orphan"), topic=topic_path("none"))
    with pytest.raises(exceptions.NotFound):
        subscriber.get_subscription(subscription=subscription_path("orphan"))


def test_creating_an_existing_subscription_raises_already_exists(
    publisher: Any, subscriber: Any
) -> None:
    topic = _topic(publisher)
    subscriber.create_subscription(name=subscription_path("jobs-sub"), topic=topic)
    with pytest.raises(exceptions.AlreadyExists):
        subscriber.create_subscription(name=subscription_path("jobs-sub"), topic=topic)


def test_topics_and_their_subscriptions_are_listed(publisher: Any, subscriber: Any) -> None:
    topic = _topic(publisher)
    _topic(publisher, "other")
    for name in ("b-sub", "a-sub"):
        subscriber.create_subscription(name=subscription_path(name), topic=topic)

    topics = [t.name for t in publisher.list_topics(request={"project": f"projects/{fx.PROJECT}"})]
    attached = list(publisher.list_topic_subscriptions(request={"topic": topic}))

    assert topics == [topic_path("jobs"), topic_path("other")]
    assert attached == [subscription_path("a-sub"), subscription_path("b-sub")]


def test_deleting_a_topic_leaves_its_subscriptions_on_the_deleted_topic(
    publisher: Any, subscriber: Any
) -> None:
    topic = _topic(publisher)
    subscriber.create_subscription(name=subscription_path("jobs-sub"), topic=topic)

    publisher.delete_topic(topic=topic)

    with pytest.raises(exceptions.NotFound):
        publisher.get_topic(topic=topic)
    assert subscriber.get_subscription(subscription=subscription_path("jobs-sub")).topic == (
        "_deleted-topic_"
    )


def test_dead_letter_policy_out_of_range_is_rejected(publisher: Any, subscriber: Any) -> None:
    topic = _topic(publisher)
    dead = _topic(publisher, "dead")
    with pytest.raises(exceptions.InvalidArgument):
        subscriber.create_subscription(
            request={
                "name": subscription_path("jobs-sub"),
                "topic": topic,
                "dead_letter_policy": {"dead_letter_topic": dead, "max_delivery_attempts": 2},
            }
        )


# -------------------------------------------------------------------- pull
def test_a_published_message_is_pulled_with_its_data_attributes_and_id(
    publisher: Any, subscriber: Any
) -> None:
    topic = _topic(publisher)
    sub = subscriber.create_subscription(name=subscription_path("jobs-sub"), topic=topic).name

    message_id = publisher.publish(topic, b"train-42", job="train", zone="us-central2-b").result(
        timeout=10
    )
    received = _pull(subscriber, sub)

    assert len(received) == 1
    message = received[0].message
    assert message.data == b"train-42"
    assert dict(message.attributes) == {"job": "train", "zone": "us-central2-b"}
    assert message.message_id == message_id
    assert message.message_id.isdigit()
    assert message.publish_time.year >= 2024
    assert received[0].delivery_attempt == 0  # no dead-letter policy, like the real API


def test_message_ids_are_increasing_numbers(publisher: Any) -> None:
    topic = _topic(publisher)
    ids = [publisher.publish(topic, f"m{i}".encode()).result(timeout=10) for i in range(3)]
    assert [int(i) for i in ids] == sorted(int(i) for i in ids)
    assert len(set(ids)) == 3


def test_an_acknowledged_message_is_not_delivered_again(
    pubsub: PubSubServer, publisher: Any, subscriber: Any
) -> None:
    topic = _topic(publisher)
    sub = subscriber.create_subscription(name=subscription_path("jobs-sub"), topic=topic).name
    publisher.publish(topic, b"once").result(timeout=10)

    first = _pull(subscriber, sub)
    subscriber.acknowledge(subscription=sub, ack_ids=[first[0].ack_id])
    pubsub.broker.advance_clock(60)

    assert _pull(subscriber, sub) == []
    assert pubsub.broker.stats(sub).acked == 1
    assert pubsub.broker.wait_idle(sub, timeout=1)


def test_an_unacked_message_is_redelivered_after_its_ack_deadline(
    pubsub: PubSubServer, publisher: Any, subscriber: Any
) -> None:
    topic = _topic(publisher)
    sub = subscriber.create_subscription(
        name=subscription_path("jobs-sub"), topic=topic, ack_deadline_seconds=10
    ).name
    publisher.publish(topic, b"forgotten").result(timeout=10)

    first = _pull(subscriber, sub)
    assert _pull(subscriber, sub) == []  # still leased
    pubsub.broker.advance_clock(10.5)  # cross the 10 s deadline without sleeping
    again = _pull(subscriber, sub)

    assert [m.message.data for m in again] == [b"forgotten"]
    assert again[0].message.message_id == first[0].message.message_id
    assert again[0].ack_id != first[0].ack_id
    assert pubsub.broker.stats(sub).expired == 1


def test_modify_ack_deadline_zero_redelivers_at_once(
    pubsub: PubSubServer, publisher: Any, subscriber: Any
) -> None:
    topic = _topic(publisher)
    sub = subscriber.create_subscription(name=subscription_path("jobs-sub"), topic=topic).name
    publisher.publish(topic, b"nack-me").result(timeout=10)

    first = _pull(subscriber, sub)
    subscriber.modify_ack_deadline(
        subscription=sub, ack_ids=[first[0].ack_id], ack_deadline_seconds=0
    )
    again = _pull(subscriber, sub)

    assert [m.message.data for m in again] == [b"nack-me"]
    assert pubsub.broker.stats(sub).nacked == 1


def test_a_message_published_before_the_subscription_existed_is_not_delivered(
    pubsub: PubSubServer, publisher: Any, subscriber: Any
) -> None:
    topic = _topic(publisher)
    publisher.publish(topic, b"too-early").result(timeout=10)
    sub = subscriber.create_subscription(name=subscription_path("late-sub"), topic=topic).name
    publisher.publish(topic, b"in-time").result(timeout=10)

    received = _pull(subscriber, sub)

    assert [m.message.data for m in received] == [b"in-time"]
    assert pubsub.broker.stats(sub).published == 1


def test_a_subscription_filter_only_delivers_matching_messages(
    publisher: Any, subscriber: Any
) -> None:
    topic = _topic(publisher)
    sub = subscriber.create_subscription(
        request={
            "name": subscription_path("tpu-only"),
            "topic": topic,
            "filter": 'attributes.accelerator = "tpu" AND NOT attributes:skip',
        }
    ).name
    publisher.publish(topic, b"gpu", accelerator="gpu").result(timeout=10)
    publisher.publish(topic, b"tpu-skip", accelerator="tpu", skip="1").result(timeout=10)
    publisher.publish(topic, b"tpu", accelerator="tpu").result(timeout=10)

    assert [m.message.data for m in _pull(subscriber, sub)] == [b"tpu"]


def test_nacked_pull_messages_count_delivery_attempts_and_dead_letter(
    pubsub: PubSubServer, publisher: Any, subscriber: Any
) -> None:
    topic = _topic(publisher)
    dead_topic = _topic(publisher, "jobs-dead")
    dead_sub = subscriber.create_subscription(
        name=subscription_path("jobs-dead-sub"), topic=dead_topic
    ).name
    sub = subscriber.create_subscription(
        request={
            "name": subscription_path("jobs-sub"),
            "topic": topic,
            "dead_letter_policy": {"dead_letter_topic": dead_topic, "max_delivery_attempts": 5},
        }
    ).name
    publisher.publish(topic, b"poison", origin="test").result(timeout=10)

    attempts = []
    for _ in range(5):
        received = _pull(subscriber, sub)
        attempts.append(received[0].delivery_attempt)
        subscriber.modify_ack_deadline(
            subscription=sub, ack_ids=[received[0].ack_id], ack_deadline_seconds=0
        )
    dead = _pull(subscriber, dead_sub)

    assert attempts == [1, 2, 3, 4, 5]
    assert _pull(subscriber, sub) == []
    assert dead[0].message.data == b"poison"
    assert dead[0].message.attributes["origin"] == "test"
    assert dead[0].message.attributes["CloudPubSubDeadLetterSourceDeliveryCount"] == "5"
    assert pubsub.broker.stats(sub).dead_lettered == 1


# --------------------------------------------------------------- streaming
def test_streaming_subscribe_receives_and_acks_every_message(
    pubsub: PubSubServer, publisher: Any, subscriber: Any
) -> None:
    topic = _topic(publisher)
    sub = subscriber.create_subscription(name=subscription_path("stream-sub"), topic=topic).name
    received: list[bytes] = []
    lock = threading.Lock()

    def callback(message: Any) -> None:
        with lock:
            received.append(message.data)
        message.ack()

    future = subscriber.subscribe(sub, callback)
    try:
        for i in range(5):
            publisher.publish(topic, f"event-{i}".encode()).result(timeout=10)
        assert wait_for(lambda: len(received) == 5, timeout=10)
        assert pubsub.broker.wait_idle(sub, timeout=10)
    finally:
        future.cancel()
        future.result(timeout=10)

    assert sorted(received) == [f"event-{i}".encode() for i in range(5)]
    stats = pubsub.broker.stats(sub)
    assert (stats.acked, stats.outstanding) == (5, 0)
    # The server side of the stream ends once the client cancels it.
    assert wait_for(
        lambda: not any(t.name == "pubsub-stream-stream-sub" for t in threading.enumerate()),
        timeout=5,
    )


def test_a_message_nacked_in_a_streaming_callback_is_redelivered(
    publisher: Any, subscriber: Any
) -> None:
    topic = _topic(publisher)
    sub = subscriber.create_subscription(name=subscription_path("stream-sub"), topic=topic).name
    seen: list[str] = []

    def callback(message: Any) -> None:
        seen.append(message.message_id)
        if len(seen) == 1:
            message.nack()
        else:
            message.ack()

    future = subscriber.subscribe(sub, callback)
    try:
        publisher.publish(topic, b"retry-me").result(timeout=10)
        assert wait_for(lambda: len(seen) >= 2, timeout=10)
    finally:
        future.cancel()
        future.result(timeout=10)

    assert seen[0] == seen[1]


def test_streaming_pull_leases_no_more_than_the_clients_flow_control_allows(
    pubsub: PubSubServer, publisher: Any, subscriber: Any
) -> None:
    topic = _topic(publisher)
    sub = subscriber.create_subscription(name=subscription_path("slow-sub"), topic=topic).name
    for i in range(6):
        publisher.publish(topic, f"job-{i}".encode()).result(timeout=10)
    release = threading.Event()
    started: list[bytes] = []

    def callback(message: Any) -> None:
        started.append(message.data)
        release.wait(10)
        message.ack()

    future = subscriber.subscribe(
        sub, callback, flow_control=pubsub_v1.types.FlowControl(max_messages=2)
    )
    try:
        assert wait_for(lambda: len(started) == 2, timeout=10)
        time.sleep(0.3)  # give an over-eager server the chance to push more
        assert pubsub.broker.stats(sub).leased == 2
        release.set()
        assert pubsub.broker.wait_idle(sub, timeout=10)
    finally:
        release.set()
        future.cancel()
        future.result(timeout=10)

    assert len(started) == 6


def test_streaming_pull_on_a_missing_subscription_fails_with_not_found(subscriber: Any) -> None:
    future = subscriber.subscribe(subscription_path("missing"), lambda message: message.ack())
    with pytest.raises(exceptions.NotFound):
        future.result(timeout=10)


# -------------------------------------------------------------------- push
def test_push_delivery_posts_the_exact_pubsub_push_format(
    pubsub: PubSubServer, publisher: Any, subscriber: Any, push_endpoint: fx.RecordingEndpoint
) -> None:
    topic = _topic(publisher)
    sub = subscriber.create_subscription(
        name=subscription_path("push-sub"),
        topic=topic,
        push_config={"push_endpoint": push_endpoint.url},
    ).name

    message_id = publisher.publish(topic, b'{"job": 1}', kind="tpu").result(timeout=10)
    assert pubsub.broker.wait_idle(sub, timeout=10)

    [request] = push_endpoint.received()
    assert request.path == "/push"
    assert request.headers["content-type"] == "application/json"
    body = request.body
    assert set(body) == {"message", "subscription"}  # no deliveryAttempt without dead-lettering
    assert body["subscription"] == sub
    message = body["message"]
    assert set(message) == {
        "attributes",
        "data",
        "messageId",
        "message_id",
        "publishTime",
        "publish_time",
    }
    assert message["attributes"] == {"kind": "tpu"}
    assert base64.b64decode(message["data"]) == b'{"job": 1}'
    assert message["messageId"] == message["message_id"] == message_id
    assert message["publishTime"] == message["publish_time"]
    assert message["publishTime"].endswith("Z")
    datetime.fromisoformat(message["publishTime"].replace("Z", "+00:00"))
    [record] = pubsub.broker.push_log(sub)
    assert (record.message_id, record.attempt, record.status, record.acked) == (
        message_id,
        1,
        204,
        True,
    )
    assert pubsub.broker.stats(sub).push_successes == 1


def test_a_failing_push_endpoint_is_retried_with_growing_backoff_until_it_acks(
    pubsub: PubSubServer, publisher: Any, subscriber: Any, push_endpoint: fx.RecordingEndpoint
) -> None:
    push_endpoint.respond = lambda n: 503 if n <= 3 else 200
    topic = _topic(publisher)
    sub = subscriber.create_subscription(
        request={
            "name": subscription_path("push-sub"),
            "topic": topic,
            "push_config": {"push_endpoint": push_endpoint.url},
            "retry_policy": {
                "minimum_backoff": timedelta(milliseconds=50),
                "maximum_backoff": timedelta(seconds=1),
            },
        }
    ).name

    message_id = publisher.publish(topic, b"flaky").result(timeout=10)
    assert pubsub.broker.wait_idle(sub, timeout=10)

    requests = push_endpoint.received()
    assert [r.body["message"]["messageId"] for r in requests] == [message_id] * 4
    gaps = [later.at - earlier.at for earlier, later in itertools.pairwise(requests)]
    for gap, backoff in zip(gaps, (0.05, 0.1, 0.2), strict=True):
        assert gap >= backoff * 0.9
    assert gaps[2] > gaps[0]
    log = pubsub.broker.push_log(sub)
    assert [(r.attempt, r.status, r.acked) for r in log] == [
        (1, 503, False),
        (2, 503, False),
        (3, 503, False),
        (4, 200, True),
    ]
    stats = pubsub.broker.stats(sub)
    assert (stats.push_failures, stats.nacked, stats.acked) == (3, 3, 1)


def test_an_unreachable_push_endpoint_counts_as_a_failed_delivery(
    pubsub: PubSubServer, publisher: Any, subscriber: Any
) -> None:
    topic = _topic(publisher)
    dead_topic = _topic(publisher, "jobs-dead")
    sub = subscriber.create_subscription(
        request={
            "name": subscription_path("push-sub"),
            "topic": topic,
            "push_config": {"push_endpoint": "http://127.0.0.1:9/unreachable"},
            "retry_policy": {
                "minimum_backoff": timedelta(milliseconds=10),
                "maximum_backoff": timedelta(milliseconds=20),
            },
            "dead_letter_policy": {"dead_letter_topic": dead_topic, "max_delivery_attempts": 5},
        }
    ).name

    publisher.publish(topic, b"nowhere").result(timeout=10)
    assert pubsub.broker.wait_idle(sub, timeout=10)

    log = pubsub.broker.push_log(sub)
    assert [r.attempt for r in log] == [1, 2, 3, 4, 5]
    assert all(r.status is None and r.error for r in log)
    assert pubsub.broker.stats(sub).dead_lettered == 1


def test_a_push_endpoint_that_always_fails_dead_letters_after_max_delivery_attempts(
    pubsub: PubSubServer, publisher: Any, subscriber: Any, push_endpoint: fx.RecordingEndpoint
) -> None:
    push_endpoint.respond = lambda _n: 500
    topic = _topic(publisher)
    dead_topic = _topic(publisher, "jobs-dead")
    dead_sub = subscriber.create_subscription(
        name=subscription_path("jobs-dead-sub"), topic=dead_topic
    ).name
    sub = subscriber.create_subscription(
        request={
            "name": subscription_path("push-sub"),
            "topic": topic,
            "push_config": {"push_endpoint": push_endpoint.url},
            "retry_policy": {
                "minimum_backoff": timedelta(milliseconds=50),
                "maximum_backoff": timedelta(milliseconds=200),
            },
            "dead_letter_policy": {"dead_letter_topic": dead_topic, "max_delivery_attempts": 5},
        }
    ).name

    message_id = publisher.publish(topic, b"poison", job="bad").result(timeout=10)
    assert pubsub.broker.wait_idle(sub, timeout=10)
    dead = _pull(subscriber, dead_sub)

    requests = push_endpoint.received()
    assert [r.body["deliveryAttempt"] for r in requests] == [1, 2, 3, 4, 5]
    assert {r.body["message"]["messageId"] for r in requests} == {message_id}
    assert len(dead) == 1
    attributes = dict(dead[0].message.attributes)
    assert dead[0].message.data == b"poison"
    assert set(attributes) >= DEAD_LETTER_KEYS
    assert attributes["job"] == "bad"
    assert attributes["CloudPubSubDeadLetterSourceDeliveryCount"] == "5"
    assert attributes["CloudPubSubDeadLetterSourceSubscription"] == "push-sub"
    assert attributes["CloudPubSubDeadLetterSourceSubscriptionProject"] == fx.PROJECT
    assert (
        attributes["CloudPubSubDeadLetterSourceTopicPublishTime"]
        == (requests[0].body["message"]["publishTime"])
    )
    stats = pubsub.broker.stats(sub)
    assert (stats.push_failures, stats.dead_lettered, stats.outstanding) == (5, 1, 0)


def test_modify_push_config_turns_a_pull_subscription_into_a_push_one(
    pubsub: PubSubServer, publisher: Any, subscriber: Any, push_endpoint: fx.RecordingEndpoint
) -> None:
    topic = _topic(publisher)
    sub = subscriber.create_subscription(name=subscription_path("jobs-sub"), topic=topic).name

    subscriber.modify_push_config(
        subscription=sub, push_config={"push_endpoint": push_endpoint.url}
    )
    publisher.publish(topic, b"now-pushed").result(timeout=10)

    assert pubsub.broker.wait_idle(sub, timeout=10)
    assert [base64.b64decode(r.body["message"]["data"]) for r in push_endpoint.received()] == [
        b"now-pushed"
    ]
    assert subscriber.get_subscription(subscription=sub).push_config.push_endpoint == (
        push_endpoint.url
    )


def test_update_subscription_changes_only_the_fields_in_the_mask(
    publisher: Any, subscriber: Any
) -> None:
    topic = _topic(publisher)
    sub = subscriber.create_subscription(name=subscription_path("jobs-sub"), topic=topic).name

    updated = subscriber.update_subscription(
        request={
            "subscription": {"name": sub, "ack_deadline_seconds": 60, "labels": {"a": "b"}},
            "update_mask": {"paths": ["ack_deadline_seconds"]},
        }
    )

    assert updated.ack_deadline_seconds == 60
    assert dict(updated.labels) == {}
    assert subscriber.get_subscription(subscription=sub).ack_deadline_seconds == 60


def test_functions_framework_accepts_the_push_body_as_a_cloud_event(
    pubsub: PubSubServer,
    publisher: Any,
    subscriber: Any,
    cloud_event_function: fx.FunctionApp,
) -> None:
    topic = _topic(publisher)
    sub = subscriber.create_subscription(
        name=subscription_path("function-sub"),
        topic=topic,
        push_config={"push_endpoint": cloud_event_function.url},
    ).name

    message_id = publisher.publish(topic, b'{"event": "node-ready"}', node="n1").result(timeout=10)
    assert pubsub.broker.wait_idle(sub, timeout=10)

    [event] = cloud_event_function.events()
    assert event["id"] == message_id
    assert event["type"] == "google.cloud.pubsub.topic.v1.messagePublished"
    message = event["data"]["message"]
    assert base64.b64decode(message["data"]) == b'{"event": "node-ready"}'
    assert message["attributes"] == {"node": "n1"}
    assert message["messageId"] == message_id
    assert [r.status for r in pubsub.broker.push_log(sub)] == [200]


# -------------------------------------------------------------- lifecycle
def test_topics_and_subscriptions_survive_a_restart_with_a_state_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "pubsub.json"
    first = start_pubsub(state_file=state)
    try:
        first.broker.create_topic(topic_path("jobs"))
        first.broker.create_subscription(
            SubscriptionConfig(
                name=subscription_path("jobs-sub"),
                topic=topic_path("jobs"),
                ack_deadline_seconds=30,
            )
        )
    finally:
        first.stop()

    second = start_pubsub(state_file=state)
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", second.address)
    client = pubsub_v1.SubscriberClient()
    try:
        restored = client.get_subscription(subscription=subscription_path("jobs-sub"))
        assert restored.topic == topic_path("jobs")
        assert restored.ack_deadline_seconds == 30
    finally:
        client.close()
        second.stop()


def test_stopping_the_server_returns_promptly_with_an_open_stream(
    publisher: Any, subscriber: Any, pubsub: PubSubServer
) -> None:
    topic = _topic(publisher)
    sub = subscriber.create_subscription(name=subscription_path("stream-sub"), topic=topic).name
    future = subscriber.subscribe(sub, lambda message: message.ack())
    try:
        publisher.publish(topic, b"x").result(timeout=10)
        assert pubsub.broker.wait_idle(sub, timeout=10)
        started = time.monotonic()
        pubsub.stop(grace=0.2)
        assert time.monotonic() - started < 5
    finally:
        future.cancel()


def test_the_module_entry_point_serves_until_sigterm(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    process = subprocess.Popen(
        [sys.executable, "-m", "sandbox.pubsub", "--port", "0", "--state-file", str(state)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        assert line.startswith("PUBSUB_EMULATOR_HOST=127.0.0.1:")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
        assert json.loads(state.read_text()) == {"subscriptions": [], "topics": []}
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=5)
