"""Managed collection, as GMP's operator does it, for the sandbox's Prometheus (pure).

Google Cloud Managed Service for Prometheus turns each ``PodMonitoring`` into one
Prometheus scrape job per endpoint (prometheus-engine, ``pkg/operator/apis/monitoring/
v1/pod_config.go``): Kubernetes pod discovery, then relabelling that keeps the pods of
the PodMonitoring's namespace matching its selector, in a phase other than Failed or
Succeeded, with a container port of the endpoint's name, and sets the target labels:

* ``project_id``, ``location``, ``cluster`` -- forced, a scraped series cannot override
  them;
* ``namespace`` -- always; ``job`` -- the PodMonitoring's name;
* ``instance`` -- ``<pod name>:<port name>`` for a named port (``<pod>:<number>`` for a
  numeric one);
* ``targetLabels.metadata`` (default ``container, pod, top_level_controller_name,
  top_level_controller_type``): ``container`` only for a named port; the top-level
  controller of a pod made by a Deployment's ReplicaSet (its pod-template-hash label
  set) is the Deployment (its name is the ReplicaSet's without the hash suffix);
* ``targetLabels.fromPod``: each pod label ``from`` copied to ``to`` (default: the same
  name), skipped when the pod lacks it (an empty value sets no label).

Here the same decision is made from the objects listed through the Kubernetes API,
and the result is written as ``file_sd`` target groups: the target's address is the
container port's loopback host port (the process kubelet's annotation) instead of the
pod IP. What is not modelled: per-node collectors, ClusterPodMonitoring, scrape
limits, authorisation and TLS of endpoints, metric relabelling.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DEFAULT_METADATA",
    "ScrapeJob",
    "Site",
    "scrape_jobs",
    "selector_matches",
]

DEFAULT_METADATA = ("container", "pod", "top_level_controller_name",
                    "top_level_controller_type")
ANNOTATION_HOST_PORTS = "sandbox.accelops.dev/host-ports"
_POD_TEMPLATE_HASH = "pod-template-hash"
_DEFAULT_INTERVAL = "1m"  # the CRD's default for an endpoint's interval
_DURATION = re.compile(r"^(\d+)(ms|s|m|h)$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True, slots=True)
class Site:
    """Where the cluster is: the labels GMP forces onto every target."""

    project_id: str
    location: str
    cluster: str


@dataclass(frozen=True, slots=True)
class ScrapeJob:
    """One endpoint of one PodMonitoring: a Prometheus scrape job and its targets."""

    name: str  # PodMonitoring/<namespace>/<name>/<port>, as GMP names the job
    interval: str
    timeout: str
    path: str
    targets: tuple[dict[str, Any], ...] = field(default=())

    @property
    def file_name(self) -> str:
        """A file_sd file name for the job (job names hold slashes)."""
        return "targets-" + hashlib.sha256(self.name.encode()).hexdigest()[:16] + ".json"

    def file_sd(self) -> str:
        return json.dumps(list(self.targets), indent=1, sort_keys=True)


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector: matchLabels and matchExpressions (In, NotIn, Exists,
    DoesNotExist) must all hold; an empty selector matches every pod."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression.get("key"), expression.get("operator")
        values = expression.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def _seconds(duration: str) -> float:
    match = _DURATION.match(duration)
    if match is None:
        raise ValueError(f"not a duration this stand-in reads: {duration!r}")
    return int(match.group(1)) * _UNITS[match.group(2)]


def _host_ports(pod: Mapping[str, Any]) -> dict[int, int]:
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_HOST_PORTS)
    try:
        return {int(k): int(v) for k, v in json.loads(raw).items()} if raw else {}
    except (TypeError, ValueError, AttributeError):
        return {}


def _controller(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """(name, kind) of the pod's top-level controller, by GMP's rules."""
    meta = pod.get("metadata") or {}
    owner = next((ref for ref in meta.get("ownerReferences") or []
                  if ref.get("controller")), None)
    if owner is None:
        return None
    name, kind = str(owner.get("name") or ""), str(owner.get("kind") or "")
    if kind == "ReplicaSet" and _POD_TEMPLATE_HASH in (meta.get("labels") or {}):
        match = re.match(r"^(.+)-[a-z0-9]+$", name)
        if match:
            return match.group(1), "Deployment"
    match = re.match(r"^(.+)-\d{8}$", name)
    if kind == "Job" and match:
        return match.group(1), "CronJob"
    return name, kind


def _port(pod: Mapping[str, Any], port: str | int) -> tuple[str, int] | None:
    """(container name, container port) the endpoint's port means on this pod."""
    for container in (pod.get("spec") or {}).get("containers") or []:
        for declared in container.get("ports") or []:
            if (declared.get("name") == port if isinstance(port, str)
                    else declared.get("containerPort") == port):
                return str(container.get("name") or ""), int(declared["containerPort"])
    if isinstance(port, int):
        return "", port  # an undeclared numeric port is still scraped
    return None


def _target(monitoring: Mapping[str, Any], endpoint: Mapping[str, Any],
            pod: Mapping[str, Any], site: Site) -> dict[str, Any] | None:
    meta, pod_meta = monitoring.get("metadata") or {}, pod.get("metadata") or {}
    port = endpoint.get("port")
    if not isinstance(port, (str, int)):
        return None
    resolved = _port(pod, port)
    if resolved is None:
        return None
    container, number = resolved
    host_port = _host_ports(pod).get(number)
    if host_port is None:
        return None  # not started yet: no address to scrape
    spec = monitoring.get("spec") or {}
    target_labels = spec.get("targetLabels") or {}
    metadata = target_labels.get("metadata", list(DEFAULT_METADATA)) or []
    pod_name = str(pod_meta.get("name") or "")
    labels: dict[str, str] = {
        "project_id": site.project_id, "location": site.location,
        "cluster": site.cluster, "namespace": str(meta.get("namespace") or ""),
        "job": str(meta.get("name") or ""),
        "instance": f"{pod_name}:{port}",
    }
    if "pod" in metadata:
        labels["pod"] = pod_name
    if "container" in metadata and isinstance(port, str) and container:
        labels["container"] = container
    if "node" in metadata and (pod.get("spec") or {}).get("nodeName"):
        labels["node"] = str(pod["spec"]["nodeName"])
    controller = _controller(pod)
    if controller is not None:
        if "top_level_controller_name" in metadata:
            labels["top_level_controller_name"] = controller[0]
        if "top_level_controller_type" in metadata:
            labels["top_level_controller_type"] = controller[1]
    pod_labels = pod_meta.get("labels") or {}
    for mapping in target_labels.get("fromPod") or []:
        value = pod_labels.get(mapping.get("from"))
        if value:
            labels[str(mapping.get("to") or mapping["from"])] = str(value)
    return {"targets": [f"127.0.0.1:{host_port}"], "labels": labels}


def scrape_jobs(monitorings: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]],
                site: Site) -> list[ScrapeJob]:
    """The scrape jobs the collectors would run for these PodMonitorings and pods,
    sorted by name (pure)."""
    pods = list(pods)
    jobs: list[ScrapeJob] = []
    for monitoring in monitorings:
        meta, spec = monitoring.get("metadata") or {}, monitoring.get("spec") or {}
        namespace = meta.get("namespace")
        selector = spec.get("selector") or {}
        filter_running = spec.get("filterRunning", True)
        selected = [
            pod for pod in pods
            if (pod.get("metadata") or {}).get("namespace") == namespace
            and selector_matches(selector, (pod.get("metadata") or {}).get("labels") or {})
            and not (filter_running and (pod.get("status") or {}).get("phase")
                     in ("Failed", "Succeeded"))]
        for endpoint in spec.get("endpoints") or []:
            interval = str(endpoint.get("interval") or _DEFAULT_INTERVAL)
            timeout = str(endpoint.get("timeout") or interval)
            _seconds(interval), _seconds(timeout)
            targets = [t for pod in selected
                       if (t := _target(monitoring, endpoint, pod, site)) is not None]
            jobs.append(ScrapeJob(
                name=f"PodMonitoring/{namespace}/{meta.get('name')}/{endpoint.get('port')}",
                interval=interval, timeout=timeout,
                path=str(endpoint.get("path") or "/metrics"),
                targets=tuple(sorted(targets, key=lambda t: t["labels"]["instance"]))))
    return sorted(jobs, key=lambda job: job.name)
