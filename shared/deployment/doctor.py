"""``accelops doctor``: check a deployment from outside against the definition and
print each problem with its fix.

Pub/Sub: every topic exists, every push subscription points at its function with
the definition's ack deadline, retry and dead-letter policy. Kubernetes: the
cluster answers, every configured team has its namespace, LocalQueue and
ClusterQueue, the ResourceFlavors and priority classes exist, and the serving
namespace holds the model servers' service accounts and the Sax cell. Identities: each
function's and service's identity may do what its code needs and nothing else of the
same kinds (SubjectAccessReview, asked as the cluster's own authorizer answers it). BigQuery:
the tables carry every column of the schema and the views exist.

Each area is checked on its own: one that cannot be reached is reported as a
problem and the others are still checked.
"""

from __future__ import annotations

import argparse
import functools
import math
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from shared import bigquery as bq
from shared import pubsub
from shared.config import AccelopsConfig, Settings, load_config
from shared.deployment import system
from shared.deployment.access import Probe, allowed_by_definition, probes
from shared.deployment.manifests import PREEMPTION, PRIORITY_VALUES, cluster_queue_name, identity
from shared.deployment.model import Function, Service
from shared.deployment.serving import SAXML_ADMIN, SAXML_PROXY, identity_namespaces
from shared.errors import AccelopsError, ConfigError, MissingTargetError, NotFoundError
from shared.kube import (
    DEPLOYMENTS,
    GATEWAYS,
    NAMESPACES,
    SUBJECT_ACCESS_REVIEWS,
    Resource,
    get_client,
)
from shared.metrics.schema import TABLES, VIEWS
from shared.serving.endpoints import gateway_url

__all__ = ["AREAS", "Expectations", "Finding", "check", "main", "production_retry", "run"]

Retry = tuple[float, float, int, int]  # minimum, maximum backoff; attempts; ack deadline


@dataclass(frozen=True, slots=True)
class Finding:
    area: str
    ok: bool
    what: str
    fix: str = ""


@dataclass(frozen=True, slots=True)
class Expectations:
    """What the deployment should look like."""

    project: str
    config: AccelopsConfig
    retry: Callable[[Function], Retry]
    # Function → the push endpoint it must have; None: any, signed with OIDC as the
    # push invoker (production, where URLs are Terraform's outputs).
    push_endpoints: Mapping[str, str] | None = None
    # The functions deployed (a partial sandbox runs some); default: all.
    functions: tuple[str, ...] = tuple(f.name for f in system.FUNCTIONS)

    def deployed(self) -> list[Function]:
        return [f for f in system.FUNCTIONS if f.name in self.functions]

    def identities(self) -> list[Function | Service]:
        """The deployed functions and every service: each acting in the cluster under
        an identity of its own."""
        return [*self.deployed(), *system.SERVICES]


def production_retry(spec: Function) -> Retry:
    r = spec.retry
    return (float(r.minimum_backoff_seconds), float(r.maximum_backoff_seconds),
            r.max_delivery_attempts, r.ack_deadline_seconds)


def _guard(area: str, what: str, run: Callable[[], list[Finding]]) -> list[Finding]:
    try:
        return run()
    except AccelopsError as exc:
        return [Finding(area, False, f"cannot check {what}: {exc.message}",
                        "make the service reachable with these credentials, then run again")]


# ------------------------------------------------------------------------ Pub/Sub
def _pubsub(expect: Expectations) -> list[Finding]:
    found = []
    for topic in system.TOPICS:
        ok = pubsub.topic_exists(expect.project, topic)
        found.append(Finding("pubsub", ok, f"topic {topic} exists" if ok
                             else f"topic {topic} is missing",
                             "" if ok else "terraform apply (modules/pubsub)"))
    for spec in expect.deployed():
        found += _subscription(expect, spec, pubsub.get_subscription(expect.project,
                                                                     spec.subscription))
    return found


def _subscription(expect: Expectations, spec: Function,
                  sub: dict[str, Any] | None) -> list[Finding]:
    name = f"subscription {spec.subscription}"
    fix = "terraform apply (modules/pubsub)"
    if sub is None:
        return [Finding("pubsub", False, f"{name} is missing", fix)]
    problems = []
    topic = f"projects/{expect.project}/topics/{spec.trigger_topic}"
    if sub["topic"] != topic:
        problems.append(f"reads {sub['topic']}, not {topic}")
    wanted = (expect.push_endpoints or {}).get(spec.name)
    if not sub["push_endpoint"]:
        problems.append("is a pull subscription: nothing delivers to the function")
    elif wanted is not None and sub["push_endpoint"] != wanted:
        problems.append(f"pushes to {sub['push_endpoint']}, not {wanted}")
    invoker = f"{system.PUSH_INVOKER}@{expect.project}.iam.gserviceaccount.com"
    if expect.push_endpoints is None and sub["oidc_service_account"] != invoker:
        problems.append(f"pushes without an OIDC token of {invoker}")
    minimum, maximum, attempts, ack = expect.retry(spec)
    if sub["ack_deadline_seconds"] != ack:
        problems.append(f"ack deadline {sub['ack_deadline_seconds']} s, not {ack} s")
    # Durations travel as seconds + nanos: compare to the millisecond.
    if not all(got is not None and math.isclose(got, want, abs_tol=1e-3) for got, want in
               ((sub["minimum_backoff"], minimum), (sub["maximum_backoff"], maximum))):
        problems.append(f"retry backoff {sub['minimum_backoff']}..{sub['maximum_backoff']} s, "
                        f"not {minimum:g}..{maximum:g} s")
    dead_letter = f"projects/{expect.project}/topics/{spec.dead_letter_topic}"
    if (sub["dead_letter_topic"], sub["max_delivery_attempts"]) != (dead_letter, attempts):
        problems.append(f"dead-letters to {sub['dead_letter_topic'] or 'nothing'} after "
                        f"{sub['max_delivery_attempts']} attempts, not to {dead_letter} "
                        f"after {attempts}")
    if problems:
        return [Finding("pubsub", False, f"{name} {p}", fix) for p in problems]
    return [Finding("pubsub", True, f"{name} delivers to {spec.name} with its retry and "
                                    f"dead-letter policy")]


# --------------------------------------------------------------------- Kubernetes
def _kubernetes(expect: Expectations) -> list[Finding]:
    kueue = "kueue.x-k8s.io"
    kube = get_client()
    names = {n["metadata"]["name"] for n in kube.list(NAMESPACES)}
    found = [Finding("kubernetes", True, f"cluster {kube.host} answers")]
    apply = "kubectl apply --server-side -k <your overlay> (accelops manifests render)"

    def exists(what: str, present: bool) -> Finding:
        return Finding("kubernetes", present, f"{what} {'exists' if present else 'is missing'}",
                       "" if present else apply)

    flavors = {f["metadata"]["name"] for f in kube.list(
        Resource(kueue, "v1beta1", "resourceflavors", namespaced=False))}
    priorities = {p["metadata"]["name"] for p in kube.list(
        Resource(kueue, "v1beta1", "workloadpriorityclasses", namespaced=False))}
    queues = {q["metadata"]["name"]: q for q in kube.list(
        Resource(kueue, "v1beta1", "clusterqueues", namespaced=False))}
    found.append(exists(f"namespace {expect.config.slices.state_namespace}",
                        expect.config.slices.state_namespace in names))
    found += [exists(f"WorkloadPriorityClass {p}", p in priorities) for p in PRIORITY_VALUES]
    for team_name, team in sorted(expect.config.teams.items()):
        found.append(exists(f"namespace {team.namespace} (team {team_name})",
                            team.namespace in names))
        local = kube.find(Resource(kueue, "v1beta1", "localqueues"), team.queue, team.namespace) \
            if team.namespace in names else None
        found.append(exists(f"LocalQueue {team.namespace}/{team.queue}", local is not None))
        wanted = cluster_queue_name(team_name)
        if local is not None and (local.get("spec") or {}).get("clusterQueue") != wanted:
            found.append(Finding("kubernetes", False, f"LocalQueue {team.namespace}/{team.queue} "
                                 f"feeds {local['spec'].get('clusterQueue')}, not {wanted}", apply))
        found.append(exists(f"ClusterQueue {wanted}", wanted in queues))
        preemption = ((queues.get(wanted) or {}).get("spec") or {}).get("preemption") or {}
        if wanted in queues and preemption.get("withinClusterQueue") != \
                PREEMPTION["withinClusterQueue"]:
            # Without it (Kueue's default is Never) a high-priority job waits behind
            # lower-priority ones instead of preempting them, as the submit-jobs guide
            # says it does.
            found.append(Finding(
                "kubernetes", False,
                f"ClusterQueue {wanted} preempts within the queue "
                f"{preemption.get('withinClusterQueue') or 'Never (unset)'}, not "
                f"{PREEMPTION['withinClusterQueue']}: higher priorities will not preempt",
                apply))
        for flavor in _queue_flavors(queues.get(wanted)):
            if flavor not in flavors:
                found.append(exists(f"ResourceFlavor {flavor} (of {wanted})", False))
    return found + _serving(kube, expect.config, names, exists)


def _serving(kube: Any, config: AccelopsConfig, namespaces: set[str],
             exists: Callable[[str, bool], Finding]) -> list[Finding]:
    """The serving namespace, the servers' service accounts, the Sax cell."""
    namespace = config.serving.namespace
    found = [exists(f"namespace {namespace} (serving)", namespace in namespaces)]
    if namespace not in namespaces:
        return found
    accounts = Resource("", "v1", "serviceaccounts")
    # An unknown saxml_team is refused by `accelops manifests render`: check the
    # serving namespace's accounts only.
    known = config.serving.saxml_team is None or config.serving.saxml_team in config.teams
    for spec in system.WORKLOAD_IDENTITIES:
        for where in identity_namespaces(spec, config) if known else [namespace]:
            present = where in namespaces and kube.find(
                accounts, spec.kubernetes_service_account, where) is not None
            found.append(exists(f"ServiceAccount {where}/{spec.kubernetes_service_account}",
                                present))
    found += [exists(f"Deployment {namespace}/{name}",
                     kube.find(DEPLOYMENTS, name, namespace) is not None)
              for name in (SAXML_ADMIN, SAXML_PROXY)]
    return [*found, _gateway(kube, config)]


def _gateway(kube: Any, config: AccelopsConfig) -> Finding:
    """Every Triton model is reached through the serving Gateway: it must exist and be
    programmed (GKE has made its load balancer) with an address."""
    namespace, name = config.serving.namespace, config.serving.gateway
    where = f"Gateway {namespace}/{name}"
    try:
        gateway = kube.find(GATEWAYS, name, namespace)
    except MissingTargetError:
        return Finding("kubernetes", False, f"{where}: the cluster serves no Gateway API",
                       "enable it: gateway_api_config in terraform/modules/gke (accelops "
                       "deploy up applies it)")
    if gateway is None:
        return Finding("kubernetes", False, f"{where} is missing",
                       "kubectl apply --server-side -k <your overlay> (accelops manifests "
                       "render)")
    conditions = {c.get("type"): c for c in (gateway.get("status") or {}).get("conditions")
                  or []}
    programmed = conditions.get("Programmed") or {}
    if programmed.get("status") != "True":
        return Finding("kubernetes", False,
                       f"{where} is not programmed yet: {programmed.get('reason') or 'no status'}"
                       f" {programmed.get('message') or ''}".rstrip(),
                       "GKE makes its load balancer within minutes; kubectl describe gateway "
                       f"{name} -n {namespace} says why if it does not")
    try:
        return Finding("kubernetes", True, f"{where} is programmed at {gateway_url(gateway)}")
    except NotFoundError as exc:
        return Finding("kubernetes", False, f"{where}: {exc.message}")


def _queue_flavors(queue: dict[str, Any] | None) -> list[str]:
    groups = ((queue or {}).get("spec") or {}).get("resourceGroups") or []
    return [str(f.get("name")) for g in groups for f in g.get("flavors") or []]


# -------------------------------------------------------------------- identities
def _review(kube: Any, user: str, probe: Probe) -> bool:
    resource, _, subresource = probe.resource.partition("/")
    attributes = {"verb": probe.verb, "group": probe.group, "resource": resource,
                  "subresource": subresource, "namespace": probe.namespace,
                  "name": probe.name}
    answer = kube.create(SUBJECT_ACCESS_REVIEWS, {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": ["system:authenticated"],
                 "resourceAttributes": {k: v for k, v in attributes.items() if v}}})
    return bool((answer.get("status") or {}).get("allowed"))


def _identities(expect: Expectations) -> list[Finding]:
    kube = get_client()
    found = []
    for spec in expect.identities():
        if not spec.kube_rules:
            continue
        user = identity(spec, expect.project)
        asked = probes(spec, expect.config)
        with ThreadPoolExecutor(max_workers=8) as pool:
            answers = list(pool.map(lambda p, u=user: _review(kube, u, p), asked))
        wrong = [(p, got) for p, got in zip(asked, answers, strict=True)
                 if got != allowed_by_definition(spec, p, expect.config)]
        for probe, got in wrong:
            if got:
                found.append(Finding("identity", False, f"{user} may {probe.describe()}, which "
                                     f"{spec.name} does not need",
                                     "remove the binding that grants it (kubectl get "
                                     "clusterrolebindings,rolebindings -A -o wide)"))
            else:
                found.append(Finding("identity", False, f"{user} may not {probe.describe()}, "
                                     f"which {spec.name} needs",
                                     "apply the RBAC of manifests/base and your overlay"))
        if not wrong:
            found.append(Finding("identity", True, f"{spec.name} ({user}) may do what it needs "
                                                   f"and nothing more ({len(asked)} checks)"))
    return found


# ----------------------------------------------------------------------- BigQuery
def _bigquery(expect: Expectations) -> list[Finding]:
    metrics = expect.config.metrics
    fix = "terraform apply (modules/bigquery), or accelops bq init"
    found = []
    for spec in TABLES:
        table = f"{metrics.dataset}.{spec.name(metrics)}"
        columns = bq.table_fields(expect.project, table)
        if columns is None:
            found.append(Finding("bigquery", False, f"table {table} is missing", fix))
            continue
        have = {(c.name, c.type, c.mode) for c in columns}
        missing = [f"{f.name} {f.type} {f.mode}" for f in spec.fields
                   if (f.name, f.type, f.mode) not in have]
        found.append(Finding("bigquery", not missing,
                             f"table {table} lacks or differs in {', '.join(missing)}"
                             if missing else f"table {table} has every column",
                             fix if missing else ""))
    for view in VIEWS:
        ok = bq.table_fields(expect.project, f"{metrics.dataset}.{view.name}") is not None
        found.append(Finding("bigquery", ok, f"view {metrics.dataset}.{view.name} "
                             f"{'exists' if ok else 'is missing'}", "" if ok else fix))
    return found


AREAS: dict[str, tuple[str, Callable[[Expectations], list[Finding]]]] = {
    "pubsub": ("Pub/Sub", _pubsub),
    "kubernetes": ("the cluster", _kubernetes),
    "identity": ("function and service identities", _identities),
    "bigquery": ("BigQuery", _bigquery),
}


def check(expect: Expectations, areas: tuple[str, ...] = tuple(AREAS)) -> Iterator[Finding]:
    """Every finding, area by area (an area that cannot be reached is one finding)."""
    for area in areas:
        what, run = AREAS[area]
        yield from _guard(area, what, functools.partial(run, expect))


def report(findings: Iterator[Finding], out: Callable[[str], None] = print) -> int:
    """Print the findings; the number of problems."""
    problems = 0
    for finding in findings:
        if finding.ok:
            out(f"  ok       {finding.what}")
        else:
            problems += 1
            out(f"  PROBLEM  {finding.what}")
            if finding.fix:
                out(f"           fix: {finding.fix}")
    out("no problems found" if not problems else f"{problems} problem(s) found")
    return problems


def run(expect: Expectations, areas: tuple[str, ...] = tuple(AREAS)) -> int:
    """Check and print every finding; the exit code (1: problems found)."""
    return 1 if report(check(expect, areas)) else 0


def main(args: argparse.Namespace) -> int:
    """``accelops doctor``: the deployment the options or the environment name (the
    sandbox adds ``--state-dir`` for itself: ``sandbox/commands.py``)."""
    settings = Settings.from_env()
    project = args.project or settings.project
    source = args.config or settings.config_source
    if not project or not source:
        raise ConfigError("doctor needs a project and a config: pass --project and --config "
                          "(or set ACCELOPS_PROJECT and ACCELOPS_CONFIG), or --state-dir "
                          "for the local sandbox")
    print(f"checking project {project} with config {source}")
    return run(Expectations(project, load_config(source), production_retry))
