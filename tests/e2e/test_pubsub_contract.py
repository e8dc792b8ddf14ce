"""The stand-in held to Google's Pub/Sub emulator: every test runs on both.

Each test drives one backend through the real google-cloud-pubsub client; push
subscriptions deliver to recording HTTP endpoints on 127.0.0.1. Where the two
agree the test asserts the shared behaviour, which is also Pub/Sub's documented
one. Where the emulator departs from the documentation, ONE test named
``test_the_emulator_...`` asserts what each backend does (the stand-in follows
the documentation): should the emulator change, that test says so.

Settings are the service's minimums, so the suite stays quick: ack deadlines of
10 s, retry backoffs of 1 s, 5 delivery attempts. Every wait is bounded.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from google.api_core import exceptions
from google.pubsub_v1 import PublishRequest, PubsubMessage
from google.pubsub_v1.services.publisher import PublisherClient as GeneratedPublisher

from sandbox.common.httpserver import free_port
from tests.e2e import pubsub_fixtures as fx

# Fixtures are registered by binding them in this module's namespace.
pubsub_backend = fx.pubsub_backend
contract = fx.contract
push_endpoints = fx.push_endpoints
wait_for = fx.wait_for
Contract = fx.Contract
Endpoints = Callable[..., fx.RecordingEndpoint]

pytestmark = [
    pytest.mark.e2e,
    # Contract.pull polls with return_immediately, so that no wait hangs on a long poll.
    pytest.mark.filterwarnings("ignore:The return_immediately flag is deprecated"),
]

DEAD_LETTER_KEYS = {
    "CloudPubSubDeadLetterSourceDeliveryCount",
    "CloudPubSubDeadLetterSourceSubscription",
    "CloudPubSubDeadLetterSourceSubscriptionProject",
    "CloudPubSubDeadLetterSourceTopicPublishTime",
}
ENVELOPE_MESSAGE_KEYS = {"attributes", "data", "messageId", "message_id", "publishTime",
                         "publish_time"}
# The client refuses a publish request over this many bytes itself.
CLIENT_REQUEST_LIMIT = 10_000_000
# Long enough for the emulator's slowest retry (~3 s apart) several times over.
PUSH_WAIT = 20.0
# After a push was answered: 1.5 times the 1 s retry backoff, so a retry would have come.
RETRY_WINDOW = 1.5


def _retry(minimum: float, maximum: float) -> dict[str, timedelta]:
    return {"minimum_backoff": timedelta(seconds=minimum),
            "maximum_backoff": timedelta(seconds=maximum)}


def _push(endpoint: fx.RecordingEndpoint) -> dict[str, str]:
    return {"push_endpoint": endpoint.url}


def _data(request: fx.PushRequest) -> bytes:
    return base64.b64decode(request.body["message"]["data"])


def _gaps(requests: list[fx.PushRequest]) -> list[float]:
    return [later.at - earlier.at for earlier, later in itertools.pairwise(requests)]


def _raw_publish(contract: Contract, topic: str, data: bytes, timeout: float) -> list[str]:
    """One Publish RPC without the client's batching, size check and retries."""
    sent = GeneratedPublisher.publish(contract.publisher, topic=topic,
                                      messages=[PubsubMessage(data=data)],
                                      retry=None, timeout=timeout)
    return list(sent.message_ids)


# ----------------------------------------------------------------- resources
def test_topics_and_subscriptions_are_created_read_listed_updated_and_deleted(
    contract: Contract,
) -> None:
    topic = contract.topic("crud")
    dead = contract.topic("crud-dead")
    sub = contract.subscription(
        topic, "crud-sub", ack_deadline_seconds=30, labels={"team": "research"},
        retry_policy=_retry(1, 5),
        dead_letter_policy={"dead_letter_topic": dead, "max_delivery_attempts": 7})

    project = f"projects/{contract.project}"
    assert contract.publisher.get_topic(topic=topic).name == topic
    assert topic in [t.name for t in contract.publisher.list_topics(project=project)]
    assert list(contract.publisher.list_topic_subscriptions(topic=topic)) == [sub]
    assert sub in [s.name for s in contract.subscriber.list_subscriptions(project=project)]
    read = contract.subscriber.get_subscription(subscription=sub)
    assert (read.topic, read.ack_deadline_seconds, dict(read.labels)) == (
        topic, 30, {"team": "research"})
    assert read.retry_policy.minimum_backoff == timedelta(seconds=1)
    assert read.retry_policy.maximum_backoff == timedelta(seconds=5)
    assert (read.dead_letter_policy.dead_letter_topic,
            read.dead_letter_policy.max_delivery_attempts) == (dead, 7)

    updated = contract.subscriber.update_subscription(request={
        "subscription": {"name": sub, "ack_deadline_seconds": 60, "labels": {"x": "y"}},
        "update_mask": {"paths": ["ack_deadline_seconds"]}})
    assert (updated.ack_deadline_seconds, dict(updated.labels)) == (60, {"team": "research"})

    contract.publisher.delete_topic(topic=topic)
    with pytest.raises(exceptions.NotFound):
        contract.publisher.get_topic(topic=topic)
    # The subscription outlives its topic, attached to the deleted-topic marker.
    assert contract.subscriber.get_subscription(subscription=sub).topic == "_deleted-topic_"
    contract.subscriber.delete_subscription(subscription=sub)
    with pytest.raises(exceptions.NotFound):
        contract.subscriber.get_subscription(subscription=sub)


def test_creating_an_existing_topic_or_subscription_raises_already_exists(
    contract: Contract,
) -> None:
    topic = contract.topic("taken")
    sub = contract.subscription(topic, "taken-sub")

    with pytest.raises(exceptions.AlreadyExists):
        contract.publisher.create_topic(name=topic)
    with pytest.raises(exceptions.AlreadyExists):
        contract.subscriber.create_subscription(name=sub, topic=topic)


def test_using_a_missing_topic_or_subscription_raises_not_found(contract: Contract) -> None:
    topic = f"projects/{contract.project}/topics/{contract.unique('missing')}"
    sub = f"projects/{contract.project}/subscriptions/{contract.unique('missing-sub')}"
    calls: list[Callable[[], Any]] = [
        lambda: contract.publisher.get_topic(topic=topic),
        lambda: contract.publisher.delete_topic(topic=topic),
        lambda: _raw_publish(contract, topic, b"x", timeout=10),
        lambda: contract.subscriber.create_subscription(name=sub, topic=topic),
        lambda: contract.subscriber.get_subscription(subscription=sub),
        lambda: contract.subscriber.delete_subscription(subscription=sub),
        lambda: contract.subscriber.pull(
            request={"subscription": sub, "max_messages": 1, "return_immediately": True},
            timeout=10, retry=None),
    ]
    for call in calls:
        with pytest.raises(exceptions.NotFound):
            call()


@pytest.mark.parametrize("resource_id", [
    "ab",  # shorter than 3 characters
    "1-starts-with-a-digit",
    "goog-reserved",
    "has space",
    "x" * 256,  # longer than 255 characters
])
def test_a_resource_id_pubsub_refuses_raises_invalid_argument(
    contract: Contract, resource_id: str,
) -> None:
    topic = contract.topic("valid")
    with pytest.raises(exceptions.InvalidArgument):
        contract.publisher.create_topic(name=f"projects/{contract.project}/topics/{resource_id}")
    with pytest.raises(exceptions.InvalidArgument):
        contract.subscriber.create_subscription(
            name=f"projects/{contract.project}/subscriptions/{resource_id}", topic=topic)


def test_every_character_pubsub_allows_in_a_resource_id_is_accepted(contract: Contract) -> None:
    name = f"projects/{contract.project}/topics/{contract.unique('Aa0-._~%+')}"
    assert contract.publisher.create_topic(name=name).name == name


# ---------------------------------------------------------------------- pull
def test_a_published_message_is_pulled_with_its_data_attributes_id_and_publish_time(
    contract: Contract,
) -> None:
    topic = contract.topic("pull")
    sub = contract.subscription(topic, "pull-sub")
    before = datetime.now(UTC) - timedelta(seconds=5)

    message_id = contract.publish(topic, b"train-42", job="train", zone="us-central2-b")
    [received] = contract.pull(sub)

    message = received.message
    assert (message.data, dict(message.attributes), message.message_id) == (
        b"train-42", {"job": "train", "zone": "us-central2-b"}, message_id)
    assert before <= message.publish_time <= datetime.now(UTC) + timedelta(seconds=5)
    assert received.delivery_attempt == 0  # only counted with a dead-letter policy
    contract.ack(sub, [received])


def test_a_message_published_before_a_subscription_existed_is_not_delivered_to_it(
    contract: Contract,
) -> None:
    topic = contract.topic("late")
    contract.publish(topic, b"too-early")
    sub = contract.subscription(topic, "late-sub")
    contract.publish(topic, b"in-time")

    received = contract.pull(sub, count=2, within=0.5)

    assert [m.message.data for m in received] == [b"in-time"]
    contract.ack(sub, received)


def test_a_nacked_message_without_a_retry_policy_is_redelivered_at_once(
    contract: Contract,
) -> None:
    topic = contract.topic("nack")
    sub = contract.subscription(topic, "nack-sub")
    contract.publish(topic, b"nack-me")

    [first] = contract.pull(sub)
    contract.nack(sub, [first])
    started = time.monotonic()
    [again] = contract.pull(sub, within=2.0)

    assert time.monotonic() - started < 1.0
    assert again.message.message_id == first.message.message_id
    assert again.ack_id != first.ack_id
    contract.ack(sub, [again])


def test_an_unacked_message_comes_back_after_the_ack_deadline_unless_acked_or_extended(
    contract: Contract,
) -> None:
    topic = contract.topic("deadline")
    sub = contract.subscription(topic, "deadline-sub", ack_deadline_seconds=10)
    for data in (b"forgotten", b"extended", b"acked"):
        contract.publish(topic, data)

    first = {m.message.data: m for m in contract.pull(sub, count=3)}
    leased_at = time.monotonic()
    contract.subscriber.modify_ack_deadline(subscription=sub, ack_ids=[first[b"extended"].ack_id],
                                            ack_deadline_seconds=60)
    contract.ack(sub, [first[b"acked"]])
    again = contract.pull(sub, within=20.0)

    assert time.monotonic() - leased_at >= 9.5
    assert [m.message.data for m in again] == [b"forgotten"]
    assert again[0].message.message_id == first[b"forgotten"].message.message_id
    assert again[0].ack_id != first[b"forgotten"].ack_id
    assert contract.pull(sub, within=0.5) == []
    contract.ack(sub, [again[0], first[b"extended"]])


def test_a_pull_message_nacked_max_delivery_attempts_times_is_dead_lettered(
    contract: Contract,
) -> None:
    topic = contract.topic("poison")
    dead_topic = contract.topic("poison-dead")
    dead_sub = contract.subscription(dead_topic, "poison-dead-sub")
    sub = contract.subscription(topic, "poison-sub", dead_letter_policy={
        "dead_letter_topic": dead_topic, "max_delivery_attempts": 5})
    contract.publish(topic, b"poison", origin="test")

    attempts = []
    for _ in range(5):
        [received] = contract.pull(sub)
        attempts.append(received.delivery_attempt)
        contract.nack(sub, [received])
    # The stand-in forwards at the fifth nack, the emulator when the subscription is
    # next pulled (the documentation does not say when): a subscriber keeps pulling.
    assert contract.pull(sub, within=0.5) == []
    [dead] = contract.pull(dead_sub)

    assert attempts == [1, 2, 3, 4, 5]
    assert dead.message.data == b"poison"
    assert dead.message.attributes["origin"] == "test"
    assert dead.message.attributes["CloudPubSubDeadLetterSourceDeliveryCount"] == "5"
    assert set(dead.message.attributes) >= DEAD_LETTER_KEYS
    contract.ack(dead_sub, [dead])


# ----------------------------------------------------------------- streaming
def test_streaming_pull_delivers_every_message_and_redelivers_a_nacked_one(
    contract: Contract,
) -> None:
    topic = contract.topic("stream")
    sub = contract.subscription(topic, "stream-sub")
    seen: list[bytes] = []
    lock = threading.Lock()

    def callback(message: Any) -> None:
        with lock:
            seen.append(message.data)
            first_time = seen.count(message.data) == 1
        if message.data == b"event-0" and first_time:
            message.nack()
        else:
            message.ack()

    future = contract.subscriber.subscribe(sub, callback)
    try:
        for n in range(3):
            contract.publish(topic, f"event-{n}".encode())
        assert wait_for(lambda: len(seen) >= 4, timeout=10)
    finally:
        future.cancel()
        future.result(timeout=10)

    assert sorted(seen) == [b"event-0", b"event-0", b"event-1", b"event-2"]
    assert contract.pull(sub, within=0.5) == []


# ---------------------------------------------------------------------- push
def test_push_posts_the_standard_envelope_as_json(
    contract: Contract, push_endpoints: Endpoints,
) -> None:
    endpoint = push_endpoints()
    topic = contract.topic("envelope")
    sub = contract.subscription(topic, "envelope-sub", push_config=_push(endpoint))

    message_id = contract.publish(topic, b'{"job": 1}', kind="tpu")
    assert endpoint.wait(timeout=PUSH_WAIT)

    request = endpoint.received()[0]
    assert request.path == "/push"
    assert request.headers["content-type"] == "application/json"
    assert set(request.body) == {"message", "subscription"}
    assert request.body["subscription"] == sub
    message = request.body["message"]
    assert set(message) == ENVELOPE_MESSAGE_KEYS
    assert _data(request) == b'{"job": 1}'
    assert message["attributes"] == {"kind": "tpu"}
    assert message["messageId"] == message["message_id"] == message_id
    assert message["publishTime"] == message["publish_time"]
    assert message["publishTime"].endswith("Z")
    published = datetime.fromisoformat(message["publishTime"].replace("Z", "+00:00"))
    assert abs(datetime.now(UTC) - published) < timedelta(seconds=30)


def test_a_push_answered_200_or_204_is_acknowledged_and_not_sent_again(
    contract: Contract, push_endpoints: Endpoints,
) -> None:
    topic = contract.topic("acked")
    endpoints = {status: push_endpoints(lambda _n, status=status: status)
                 for status in (200, 204)}
    for endpoint in endpoints.values():
        contract.subscription(topic, "acked-sub", push_config=_push(endpoint),
                              retry_policy=_retry(1, 1))

    contract.publish(topic, b"once")
    assert all(e.wait(timeout=PUSH_WAIT) for e in endpoints.values())
    time.sleep(RETRY_WINDOW)

    assert {status: len(e.received()) for status, e in endpoints.items()} == {200: 1, 204: 1}


def test_a_push_answered_404_or_refused_is_retried_until_the_endpoint_acks(
    contract: Contract, push_endpoints: Endpoints,
) -> None:
    topic = contract.topic("retried")
    not_found = push_endpoints(lambda n: 404 if n == 1 else 204)
    contract.subscription(topic, "retried-404", push_config=_push(not_found),
                          retry_policy=_retry(1, 1))
    port = free_port()  # nothing listens here until later: connections are refused
    contract.subscription(topic, "retried-refused",
                          push_config={"push_endpoint": f"http://127.0.0.1:{port}/push"},
                          retry_policy=_retry(1, 1))

    contract.publish(topic, b"persist")
    assert not_found.wait(2, timeout=PUSH_WAIT)
    refused_until_now = push_endpoints(port=port)
    assert refused_until_now.wait(timeout=PUSH_WAIT)

    assert [_data(r) for r in not_found.received()] == [b"persist", b"persist"]
    assert [_data(r) for r in refused_until_now.received()] == [b"persist"]


def test_a_push_that_keeps_failing_is_dead_lettered_after_max_delivery_attempts(
    contract: Contract, push_endpoints: Endpoints,
) -> None:
    endpoint = push_endpoints(lambda _n: 500)
    topic = contract.topic("push-poison")
    dead_topic = contract.topic("push-poison-dead")
    dead_sub = contract.subscription(dead_topic, "push-poison-dead-sub")
    sub = contract.subscription(
        topic, "push-poison-sub", push_config=_push(endpoint), retry_policy=_retry(1, 1),
        dead_letter_policy={"dead_letter_topic": dead_topic, "max_delivery_attempts": 5})

    message_id = contract.publish(topic, b"poison", job="bad")
    [dead] = contract.pull(dead_sub, within=PUSH_WAIT)

    requests = endpoint.received()
    assert [r.body["message"]["messageId"] for r in requests] == [message_id] * 5
    attributes = dict(dead.message.attributes)
    assert dead.message.data == b"poison"
    assert set(attributes) == DEAD_LETTER_KEYS | {"job"}
    assert attributes["job"] == "bad"
    assert attributes["CloudPubSubDeadLetterSourceDeliveryCount"] == "5"
    assert attributes["CloudPubSubDeadLetterSourceSubscription"] == sub.rsplit("/", 1)[1]
    assert attributes["CloudPubSubDeadLetterSourceSubscriptionProject"] == contract.project
    assert attributes["CloudPubSubDeadLetterSourceTopicPublishTime"] == (
        requests[0].body["message"]["publishTime"])
    contract.ack(dead_sub, [dead])


def test_modify_push_config_switches_a_subscription_between_pull_and_push(
    contract: Contract, push_endpoints: Endpoints,
) -> None:
    endpoint = push_endpoints()
    topic = contract.topic("switch")
    sub = contract.subscription(topic, "switch-sub")

    contract.subscriber.modify_push_config(subscription=sub, push_config=_push(endpoint))
    contract.publish(topic, b"pushed")
    assert endpoint.wait(timeout=PUSH_WAIT)
    assert contract.subscriber.get_subscription(subscription=sub).push_config.push_endpoint == (
        endpoint.url)

    contract.subscriber.modify_push_config(subscription=sub, push_config={})
    contract.publish(topic, b"pulled")
    received = contract.pull(sub, within=5.0)

    assert [m.message.data for m in received] == [b"pulled"]
    assert [_data(r) for r in endpoint.received()] == [b"pushed"]
    assert contract.subscriber.get_subscription(subscription=sub).push_config.push_endpoint == ""
    contract.ack(sub, received)


# ---------------------------------------------------------- snapshots, seek
def _snapshot_path(contract: Contract, prefix: str) -> str:
    return f"projects/{contract.project}/snapshots/{contract.unique(prefix)}"


def test_seeking_to_a_snapshot_makes_what_was_unacked_then_and_published_since_unacked_again(
    contract: Contract,
) -> None:
    topic = contract.topic("snap")
    sub = contract.subscription(topic, "snap-sub")
    for n in range(3):
        contract.publish(topic, f"m{n}".encode())
    first = {m.message.data: m for m in contract.pull(sub, count=3)}
    contract.ack(sub, [first[b"m0"]])

    snapshot = contract.subscriber.create_snapshot(
        name=_snapshot_path(contract, "snap"), subscription=sub)
    contract.ack(sub, [first[b"m1"], first[b"m2"]])
    contract.publish(topic, b"after")
    contract.ack(sub, contract.pull(sub))
    contract.subscriber.seek(request={"subscription": sub, "snapshot": snapshot.name})
    replayed = contract.pull(sub, count=3)

    assert sorted(m.message.data for m in replayed) == [b"after", b"m1", b"m2"]
    assert snapshot.topic == topic
    expires_in = snapshot.expire_time - datetime.now(UTC)
    assert timedelta(days=6) < expires_in <= timedelta(days=7)
    listed = contract.subscriber.list_snapshots(project=f"projects/{contract.project}")
    assert snapshot.name in [s.name for s in listed]
    assert list(contract.publisher.list_topic_snapshots(topic=topic)) == [snapshot.name]
    contract.ack(sub, replayed)
    contract.subscriber.delete_snapshot(snapshot=snapshot.name)
    with pytest.raises(exceptions.NotFound):
        contract.subscriber.get_snapshot(snapshot=snapshot.name)


def test_seeking_to_a_time_replays_retained_messages_and_seeking_ahead_purges_the_backlog(
    contract: Contract,
) -> None:
    topic = contract.topic("seek")
    retaining = contract.subscription(topic, "seek-retained", retain_acked_messages=True)
    plain = contract.subscription(topic, "seek-plain")
    contract.publish(topic, b"old")
    time.sleep(0.1)
    contract.publish(topic, b"new")
    received = {m.message.data: m for m in contract.pull(retaining, count=2)}
    contract.ack(retaining, list(received.values()))
    between = received[b"old"].message.publish_time + timedelta(milliseconds=50)

    contract.subscriber.seek(request={"subscription": retaining, "time": between})
    after_between = contract.pull(retaining, count=2, within=1.0)
    contract.ack(retaining, after_between)
    contract.subscriber.seek(request={"subscription": retaining,
                                      "time": between - timedelta(minutes=5)})
    after_earlier = contract.pull(retaining, count=2)
    contract.ack(retaining, after_earlier)
    contract.subscriber.seek(request={"subscription": plain,
                                      "time": datetime.now(UTC) + timedelta(seconds=1)})

    assert [m.message.data for m in after_between] == [b"new"]
    assert sorted(m.message.data for m in after_earlier) == [b"new", b"old"]
    assert contract.pull(plain, within=0.5) == []


def test_snapshot_and_seek_errors_match_the_service(contract: Contract) -> None:
    topic = contract.topic("snap-errors")
    other_topic = contract.topic("snap-errors-other")
    sub = contract.subscription(topic, "snap-errors-sub")
    other_sub = contract.subscription(other_topic, "snap-errors-other-sub")
    name = _snapshot_path(contract, "snap-errors")
    missing_sub = f"projects/{contract.project}/subscriptions/{contract.unique('none')}"
    contract.subscriber.create_snapshot(name=name, subscription=sub)

    with pytest.raises(exceptions.AlreadyExists):
        contract.subscriber.create_snapshot(name=name, subscription=sub)
    with pytest.raises(exceptions.NotFound):
        contract.subscriber.create_snapshot(name=_snapshot_path(contract, "snap-errors"),
                                            subscription=missing_sub)
    with pytest.raises(exceptions.NotFound):
        contract.subscriber.seek(request={"subscription": sub,
                                          "snapshot": _snapshot_path(contract, "none")})
    with pytest.raises(exceptions.FailedPrecondition):
        contract.subscriber.seek(request={"subscription": other_sub, "snapshot": name})


# ---------------------------------------------------------------------- size
def test_the_largest_message_the_client_sends_is_published_and_pushed_intact(
    contract: Contract, push_endpoints: Endpoints,
) -> None:
    """Pushed rather than pulled: with PUBSUB_EMULATOR_HOST set, the client's channel
    keeps gRPC's 4 MiB receive limit, so no client pulls a message this large from
    either backend (against Pub/Sub itself the limit is lifted)."""
    endpoint = push_endpoints()
    topic = contract.topic("large")
    contract.subscription(topic, "large-sub", push_config=_push(endpoint))
    probe = b"x" * (CLIENT_REQUEST_LIMIT - 1000)
    framing = PublishRequest.pb()(topic=topic, messages=[PubsubMessage.pb()(data=probe)])
    data = b"x" * (CLIENT_REQUEST_LIMIT - (framing.ByteSize() - len(probe)))

    message_id = contract.publish(topic, data)
    assert endpoint.wait(timeout=PUSH_WAIT)

    [request] = endpoint.received()
    assert request.body["message"]["messageId"] == message_id
    assert hashlib.sha256(_data(request)).digest() == hashlib.sha256(data).digest()


# ------------------------------------------------- where the emulator departs
def test_the_emulator_ignores_subscription_filters_where_pubsub_applies_them(
    contract: Contract,
) -> None:
    """Divergence: fx.FILTERS_IGNORED.

    Pub/Sub delivers only the messages a subscription's filter matches (and acks
    the others itself); the emulator accepts and reports the filter, then delivers
    everything.
    """
    topic = contract.topic("filtered")
    expression = 'attributes.accelerator = "tpu" AND NOT attributes:skip'
    sub = contract.subscription(topic, "filtered-sub", filter=expression)
    contract.publish(topic, b"gpu", accelerator="gpu")
    contract.publish(topic, b"tpu-skip", accelerator="tpu", skip="1")
    contract.publish(topic, b"tpu", accelerator="tpu")

    received = contract.pull(sub, count=3, within=0.5)

    assert contract.subscriber.get_subscription(subscription=sub).filter == expression
    delivered = sorted(m.message.data for m in received)
    if contract.backend.is_emulator:
        assert delivered == [b"gpu", b"tpu", b"tpu-skip"]
    else:
        assert delivered == [b"tpu"]
    contract.ack(sub, received)


def test_the_emulator_leaves_delivery_attempt_out_of_push_bodies_where_pubsub_sends_it(
    contract: Contract, push_endpoints: Endpoints,
) -> None:
    """Divergence: fx.NO_DELIVERY_ATTEMPT_IN_PUSH.

    With a dead-letter policy Pub/Sub adds ``deliveryAttempt`` (1 on the first
    delivery) next to ``message`` and ``subscription``; the emulator does not.
    """
    endpoint = push_endpoints()
    topic = contract.topic("attempts")
    dead_topic = contract.topic("attempts-dead")
    contract.subscription(topic, "attempts-sub", push_config=_push(endpoint),
                          dead_letter_policy={"dead_letter_topic": dead_topic,
                                              "max_delivery_attempts": 5})

    contract.publish(topic, b"counted")
    assert endpoint.wait(timeout=PUSH_WAIT)

    body = endpoint.received()[0].body
    if contract.backend.is_emulator:
        assert set(body) == {"message", "subscription"}
    else:
        assert set(body) == {"message", "subscription", "deliveryAttempt"}
        assert body["deliveryAttempt"] == 1


def test_the_emulator_retries_a_push_answered_202_where_pubsub_acks_it(
    contract: Contract, push_endpoints: Endpoints,
) -> None:
    """Divergence: fx.RETRIES_A_202.

    Pub/Sub's push acks are 102, 200, 201, 202 and 204; the emulator treats a 202
    Accepted as a failure and sends the message again after the backoff.
    """
    endpoint = push_endpoints(lambda _n: 202)
    topic = contract.topic("accepted")
    contract.subscription(topic, "accepted-sub", push_config=_push(endpoint),
                          retry_policy=_retry(1, 1))

    contract.publish(topic, b"accepted")
    assert endpoint.wait(timeout=PUSH_WAIT)
    time.sleep(RETRY_WINDOW)

    if contract.backend.is_emulator:
        assert len(endpoint.received()) >= 2
    else:
        assert len(endpoint.received()) == 1


def test_the_emulator_stretches_retry_backoff_to_about_3_s_where_pubsub_caps_it_at_the_maximum(
    contract: Contract, push_endpoints: Endpoints,
) -> None:
    """Divergence: fx.BACKOFF_STRETCHED.

    With a 1 s minimum and 2 s maximum backoff, Pub/Sub retries a failing push
    after 1, 2, 2 s (doubling, capped); the emulator after about 1, 2.4-2.8, 3 s.
    Both wait at least the minimum and both deliver once the endpoint acks.
    """
    endpoint = push_endpoints(lambda n: 500 if n <= 3 else 204)
    topic = contract.topic("backoff")
    contract.subscription(topic, "backoff-sub", push_config=_push(endpoint),
                          retry_policy=_retry(1, 2))

    contract.publish(topic, b"flaky")
    assert endpoint.wait(4, timeout=PUSH_WAIT)

    requests = endpoint.received()
    gaps = _gaps(requests)
    assert 0.9 <= gaps[0] <= 1.8
    assert all(gap >= 0.9 for gap in gaps)
    if contract.backend.is_emulator:
        assert gaps[2] > 2.5  # beyond the 2 s maximum
    else:
        assert [round(gap) for gap in gaps] == [1, 2, 2]
        assert max(gaps) < 2.5


def test_the_emulator_redelivers_a_nacked_message_at_once_where_pubsub_waits_the_minimum_backoff(
    contract: Contract,
) -> None:
    """Divergence: fx.NACK_IGNORES_BACKOFF.

    A subscription's retry policy applies to nacks too: Pub/Sub redelivers a
    nacked message after the minimum backoff (1 s here); the emulator at once.
    """
    topic = contract.topic("nack-backoff")
    sub = contract.subscription(topic, "nack-backoff-sub", retry_policy=_retry(1, 1))
    contract.publish(topic, b"later")

    [first] = contract.pull(sub)
    contract.nack(sub, [first])
    nacked_at = time.monotonic()
    [again] = contract.pull(sub, within=5.0)
    waited = time.monotonic() - nacked_at

    assert again.message.message_id == first.message.message_id
    if contract.backend.is_emulator:
        assert waited < 0.5
    else:
        assert 0.9 <= waited < 2.0
    contract.ack(sub, [again])


def test_the_emulator_accepts_publishes_over_10_mb_and_never_answers_one_over_11_mb_where_pubsub_refuses_them(  # noqa: E501
    contract: Contract,
) -> None:
    """Divergence: fx.OVERSIZED_PUBLISH.

    Pub/Sub refuses message data over 10,000,000 bytes, and any request over its
    10 MiB limit, with InvalidArgument (which no client retries); the emulator
    stores a 10,000,001-byte message and never answers a request over 11,000,000
    bytes (the call hangs until its deadline). The client refuses such requests
    itself, so only a raw RPC can send one.
    """
    topic = contract.topic("oversized")
    just_over = b"x" * (CLIENT_REQUEST_LIMIT + 1)
    far_over = b"x" * 12_000_000

    if contract.backend.is_emulator:
        assert len(_raw_publish(contract, topic, just_over, timeout=10)) == 1
        started = time.monotonic()
        with pytest.raises(exceptions.DeadlineExceeded):
            _raw_publish(contract, topic, far_over, timeout=3)
        assert time.monotonic() - started >= 2.9
        return
    for data, reason in ((just_over, "at most 10000000 bytes"),
                         (far_over, "Request payload size exceeds the limit: 10485760")):
        started = time.monotonic()
        with pytest.raises(exceptions.InvalidArgument, match=reason):
            _raw_publish(contract, topic, data, timeout=10)
        assert time.monotonic() - started < 2.0


def test_the_emulator_numbers_messages_from_1_again_after_a_restart_where_pubsub_ids_stay_unique(
    contract: Contract, tmp_path: Path,
) -> None:
    """Divergence: fx.MESSAGE_IDS_RESTART.

    Pub/Sub's message ids are unique, and consumers key rows on them; a fresh
    emulator numbers messages from 1, so ids repeat across a sandbox restart. The
    stand-in keeps counting from the clock, past every id it handed out before.
    """
    earlier = int(contract.publish(contract.topic("before-restart"), b"earlier"))

    with fx.running_backend(contract.backend.name, tmp_path) as fresh, \
            Contract.connected(fresh) as restarted:
        first = int(restarted.publish(restarted.topic("after-restart"), b"first"))

    if contract.backend.is_emulator:
        assert first == 1
    else:
        assert first > earlier
