"""Cloud Logging LogEntry JSON for Kubernetes Events, as a log sink delivers them.

On GKE, Kubernetes Events land in Cloud Logging under ``logs/events`` with
resource type ``k8s_pod`` (for pod events) and the Event object as
``jsonPayload``; a log sink with a Pub/Sub destination publishes each matching
entry as the message data (JSON) with the attribute
``logging.googleapis.com/timestamp``. :func:`log_entry` builds that entry for a
FailedScheduling Event; :class:`PubSubSink` publishes it with google-cloud-pubsub
(which honours ``PUBSUB_EMULATOR_HOST``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from sandbox.cluster.nodes import ClusterRef
from sandbox.cluster.objects import Obj, short_digest

__all__ = ["PubSubSink", "log_entry", "topic_path"]

log = logging.getLogger(__name__)


def log_entry(event: Mapping[str, Any], cluster: ClusterRef, receive_timestamp: str) -> Obj:
    """The LogEntry a sink delivers for a core/v1 Event about a pod."""
    involved = event.get("involvedObject") or {}
    metadata = event.get("metadata") or {}
    when = str(event.get("lastTimestamp") or event.get("firstTimestamp") or receive_timestamp)
    severity = "WARNING" if event.get("type") == "Warning" else "INFO"
    return {
        "insertId": short_digest(str(metadata.get("uid", "")), str(metadata.get("name", "")),
                                 length=14),
        "jsonPayload": dict(event),
        "resource": {
            "type": "k8s_pod",
            "labels": {
                "project_id": cluster.project,
                "location": cluster.location,
                "cluster_name": cluster.name,
                "namespace_name": str(involved.get("namespace", "")),
                "pod_name": str(involved.get("name", "")),
            },
        },
        "timestamp": when,
        "severity": severity,
        "logName": f"projects/{cluster.project}/logs/events",
        "receiveTimestamp": receive_timestamp,
    }


def topic_path(project: str, topic: str) -> str:
    """``projects/<project>/topics/<topic>`` (a full path is returned as is)."""
    return topic if topic.startswith("projects/") else f"projects/{project}/topics/{topic}"


class PubSubSink:
    """Publishes LogEntries to a topic like a Cloud Logging sink (fire and forget)."""

    def __init__(self, cluster: ClusterRef, topic: str, publisher: Any = None) -> None:
        if publisher is None:
            from google.cloud import pubsub_v1  # type: ignore[attr-defined,unused-ignore]

            publisher = pubsub_v1.PublisherClient()
        self.cluster = cluster
        self.topic = topic_path(cluster.project, topic)
        self.publisher = publisher

    def publish(self, event: Mapping[str, Any], receive_timestamp: str) -> Any:
        entry = log_entry(event, self.cluster, receive_timestamp)
        data = json.dumps(entry, separators=(",", ":")).encode("utf-8")
        future = self.publisher.publish(
            self.topic, data, **{"logging.googleapis.com/timestamp": entry["timestamp"]})
        future.add_done_callback(self._log_failure)
        return future

    @staticmethod
    def _log_failure(future: Any) -> None:
        exc = future.exception()
        if exc is not None:
            log.warning("publishing a FailedScheduling log entry failed: %s", exc)

    def close(self) -> None:
        stop = getattr(self.publisher, "stop", None)
        if callable(stop):
            stop()
