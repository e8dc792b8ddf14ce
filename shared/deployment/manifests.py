"""The Kubernetes side of the definition, as kustomize input.

``manifests/base/`` (committed, checked for staleness like Terraform's
files) holds what is the same in every cluster: the ``accelops-system`` namespace,
one ResourceFlavor per TPU accelerator, the WorkloadPriorityClasses job requests
name, and a ClusterRole (and Role) per function and service from its ``kube_rules``.

A deployment's overlay comes from its team config and project
(``accelops manifests render --config C --project P --out DIR``): one namespace per
team with Pod Security Admission labels, its ClusterQueue (TPU quota from the
team's ``tpu_chips``, admitting from the team's namespace only, lower priorities
preempted within it) and LocalQueue, the serving namespace with the model servers'
service accounts and the Sax cell (``serving.py``), and the bindings that give each
function's and service's Google service account (a Kubernetes user named by its
email on GKE) its roles. Queues and config therefore cannot drift: both come from the
same file. Pure.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from shared.config import AccelopsConfig, TeamPolicy
from shared.deployment import system
from shared.deployment.locust import LocustSite, locust_objects
from shared.deployment.model import Function, KubeRule, Service
from shared.deployment.serving import SaxmlSite, sax_bucket_name, serving_objects
from shared.errors import ConfigError
from shared.jobspec.labels import LABEL_TEAM
from shared.jobspec.tpu import catalogue, lookup

__all__ = [
    "BASE_DIR",
    "PREEMPTION",
    "PRIORITY_VALUES",
    "base_files",
    "cluster_queue_name",
    "identity",
    "overlay_files",
    "team_flavors",
    "with_kube_rules",
]

BASE_DIR = "manifests/base"  # generated entirely: edit shared/deployment instead
PART_OF = {"app.kubernetes.io/part-of": "accelops"}
KUEUE = "kueue.x-k8s.io/v1beta1"
RBAC = "rbac.authorization.k8s.io/v1"
# Job requests name one of these (shared/jobspec/request.py). Kueue admits higher first,
# and a team's ClusterQueue lets a job that does not fit evict admitted jobs of lower
# priority (PREEMPTION): without a WorkloadPriorityClass of its name, Kueue makes no
# Workload for the JobSet at all.
PRIORITY_VALUES = {"low": 100, "medium": 500, "high": 1000}
# The ClusterQueue CRD defaults withinClusterQueue to Never: nothing would preempt.
# LowerPriority evicts only strictly lower priorities, so equal ones never evict each
# other and a job is never preempted by one of its own priority.
PREEMPTION = {"withinClusterQueue": "LowerPriority"}
# What team pods must satisfy. TPU pods need no privileges, so "baseline" holds; the
# stricter "restricted" profile is reported (warn, audit) to show what to tighten.
POD_SECURITY = {
    "pod-security.kubernetes.io/enforce": "baseline",
    "pod-security.kubernetes.io/enforce-version": "v1.32",
    "pod-security.kubernetes.io/warn": "restricted",
    "pod-security.kubernetes.io/audit": "restricted",
}


def _yaml(objects: Iterable[dict[str, Any]]) -> str:
    return "---\n".join(yaml.safe_dump(o, sort_keys=False, width=100) for o in objects)


def _meta(name: str, namespace: str | None = None, **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = {**PART_OF, **labels}
    return meta


_ROLE_SUFFIX = {"cluster": "", "state_namespace": "-state", "team_namespaces": "-team",
                "serving_namespace": "-serving", "saxml_namespace": "-saxml"}


def role_name(spec: Function | Service, scope: str) -> str:
    """``accelops-<function or service>`` for its cluster rules, ``...-state``,
    ``...-team``, ``...-serving`` and ``...-saxml`` for the rules of those namespaces."""
    return f"accelops-{spec.name.replace('_', '-')}{_ROLE_SUFFIX[scope]}"


def _rules(rules: Iterable[KubeRule]) -> list[dict[str, Any]]:
    out = []
    for rule in rules:
        entry: dict[str, Any] = {"apiGroups": [rule.api_group],
                                 "resources": list(rule.resources), "verbs": list(rule.verbs)}
        if rule.resource_names:
            entry["resourceNames"] = list(rule.resource_names)
        out.append(entry)
    return out


def with_kube_rules() -> list[Function | Service]:
    """The functions and services whose identities act in the cluster."""
    specs: tuple[Function | Service, ...] = (*system.FUNCTIONS, *system.SERVICES)
    return [spec for spec in specs if spec.kube_rules]


def _scopes(spec: Function | Service) -> dict[str, list[KubeRule]]:
    scopes: dict[str, list[KubeRule]] = {}
    for rule in spec.kube_rules:
        scopes.setdefault(rule.scope, []).append(rule)
    return scopes


def _roles() -> list[dict[str, Any]]:
    """ClusterRoles for cluster rules and for the rules of namespaces the config
    names (a RoleBinding in each refers to one); a Role in accelops-system for
    state rules."""
    objects = []
    for spec in with_kube_rules():
        for scope, rules in _scopes(spec).items():
            namespace = system.STATE_NAMESPACE if scope == "state_namespace" else None
            objects.append({"apiVersion": RBAC, "kind": "Role" if namespace else "ClusterRole",
                            "metadata": _meta(role_name(spec, scope), namespace),
                            "rules": _rules(rules)})
    return objects


def _accelerators() -> list[str]:
    return sorted({shape.accelerator for shape in catalogue()})


def base_files() -> dict[str, str]:
    """``manifests/base/`` (path → content)."""
    namespace = {"apiVersion": "v1", "kind": "Namespace",
                 "metadata": _meta(system.STATE_NAMESPACE)}
    flavors = [{"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": _meta(acc),
                "spec": {"nodeLabels": {"cloud.google.com/gke-tpu-accelerator": acc}}}
               for acc in _accelerators()]
    priorities = [{"apiVersion": KUEUE, "kind": "WorkloadPriorityClass",
                   "metadata": _meta(name), "value": value,
                   "description": f"job requests with priority {name!r}"}
                  for name, value in PRIORITY_VALUES.items()]
    files = {
        "namespace.yaml": _yaml([namespace]),
        "kueue-flavors.yaml": _yaml(flavors),
        "kueue-priorities.yaml": _yaml(priorities),
        "rbac.yaml": _yaml(_roles()),
    }
    header = "# Generated by `accelops deploy generate` from shared/deployment; do not edit.\n"
    files = {name: header + text for name, text in files.items()}
    files["kustomization.yaml"] = header + yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": sorted(files)}, sort_keys=False)
    return files


# ----------------------------------------------------------------------- overlays
def identity(spec: Function | Service, project: str) -> str:
    """The Kubernetes user GKE maps a function's or service's Google service account to."""
    return f"{spec.service_account}@{project}.iam.gserviceaccount.com"


def cluster_queue_name(team: str) -> str:
    return f"{team}-cluster-queue"


def team_flavors(team: TeamPolicy) -> list[str]:
    """The ResourceFlavors (TPU accelerators) a team's queue offers: those of its
    allowed TPU types, or every accelerator when it has no allow-list."""
    if team.tpu_types is None:
        return _accelerators()
    return sorted({lookup(t).accelerator for t in team.tpu_types})


def _team_objects(name: str, team: TeamPolicy) -> list[dict[str, Any]]:
    queue = cluster_queue_name(name)
    return [
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": _meta(team.namespace, **{LABEL_TEAM: name, **POD_SECURITY})},
        {"apiVersion": KUEUE, "kind": "ClusterQueue",
         "metadata": _meta(queue, **{LABEL_TEAM: name}),
         "spec": {
             "namespaceSelector": {"matchLabels": {LABEL_TEAM: name}},
             "queueingStrategy": "BestEffortFIFO",
             "preemption": dict(PREEMPTION),
             "resourceGroups": [{
                 "coveredResources": ["google.com/tpu"],
                 "flavors": [{"name": flavor, "resources": [
                     {"name": "google.com/tpu", "nominalQuota": team.tpu_chips}]}
                     for flavor in team_flavors(team)],
             }],
         }},
        {"apiVersion": KUEUE, "kind": "LocalQueue",
         "metadata": _meta(team.queue, team.namespace, **{LABEL_TEAM: name}),
         "spec": {"clusterQueue": queue}},
    ]


def _binding(kind: str, name: str, role_kind: str, role: str, user: str,
             namespace: str | None = None) -> dict[str, Any]:
    return {"apiVersion": RBAC, "kind": kind, "metadata": _meta(name, namespace),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                          "name": user}]}


def _binding_namespaces(scope: str, config: AccelopsConfig) -> list[str]:
    """Where a RoleBinding of a namespaced scope goes (none for an unset Saxml team)."""
    if scope == "state_namespace":
        return [config.slices.state_namespace]
    if scope == "serving_namespace":
        return [config.serving.namespace]
    if scope == "saxml_namespace":
        team = config.serving.saxml_team
        return [] if team is None else [config.teams[team].namespace]
    return [team.namespace for team in config.teams.values()]


def _bindings(config: AccelopsConfig, project: str) -> list[dict[str, Any]]:
    objects = []
    for spec in with_kube_rules():
        user = identity(spec, project)
        for scope in _scopes(spec):
            role = role_name(spec, scope)
            if scope == "cluster":
                objects.append(_binding("ClusterRoleBinding", role, "ClusterRole", role, user))
                continue
            kind = "Role" if scope == "state_namespace" else "ClusterRole"
            objects += [_binding("RoleBinding", role, kind, role, user, namespace)
                        for namespace in _binding_namespaces(scope, config)]
    return objects


def _check(config: AccelopsConfig) -> None:
    """Refuse a config the base and Terraform were not made for (ConfigError)."""
    if config.slices.state_namespace != system.STATE_NAMESPACE:
        raise ConfigError(
            f"slices.state_namespace {config.slices.state_namespace!r}: the manifests "
            f"create {system.STATE_NAMESPACE!r}; use it or adapt manifests/base",
            field="slices.state_namespace")
    serving = config.serving
    # Terraform's Workload Identity bindings name these (terraform/generated).
    fixed = {"serving.namespace": (serving.namespace, system.SERVING_NAMESPACE)}
    fixed |= {f"serving.{spec.name}_service_account":
              (getattr(serving, f"{spec.name}_service_account"),
               spec.kubernetes_service_account) for spec in system.WORKLOAD_IDENTITIES}
    for field, (got, defined) in fixed.items():
        if got != defined:
            raise ConfigError(
                f"{field} {got!r}: Terraform binds Workload Identity for {defined!r} "
                "(shared/deployment/system.py); use it or change the definition",
                field=field)
    if serving.namespace in {t.namespace for t in config.teams.values()}:
        raise ConfigError(f"serving.namespace {serving.namespace!r} is also a team's "
                          "namespace; model servers get a namespace of their own",
                          field="serving.namespace")
    if serving.saxml_team is not None and serving.saxml_team not in config.teams:
        raise ConfigError(f"serving.saxml_team {serving.saxml_team!r} is not a team of "
                          f"this config (teams: {sorted(config.teams)})",
                          field="serving.saxml_team")


def overlay_files(config: AccelopsConfig, project: str, out_dir: Path,
                  repo_root: Path, site: SaxmlSite | None = None,
                  locust: LocustSite | None = None) -> dict[str, str]:
    """A kustomize overlay for this config and project (path → content), with the base
    referred to relative to ``out_dir`` (kustomize wants relative paths). ``site``:
    the Sax cell's bucket and images (default: the bucket Terraform names for the
    project). ``locust``: the load generator's image (and default target), for its
    master and worker Deployments (``locust.yaml``; none without it). Raises
    ConfigError for a config the definition cannot deploy."""
    _check(config)
    base = os.path.relpath(repo_root / BASE_DIR, out_dir.resolve())
    teams = [obj for name, team in sorted(config.teams.items())
             for obj in _team_objects(name, team)]
    serving = serving_objects(config, project, site or SaxmlSite(sax_bucket_name(project)),
                              POD_SECURITY)
    header = ("# Generated by `accelops manifests render` from the team config; "
              "do not edit (render again).\n")
    files = {
        "teams.yaml": header + _yaml(teams),
        "serving.yaml": header + _yaml(serving),
        "bindings.yaml": header + _yaml(_bindings(config, project)),
    }
    if locust is not None:
        files["locust.yaml"] = header + _yaml(locust_objects(config, project, locust))
    files["kustomization.yaml"] = header + yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [base, *(name for name in files if name != "kustomization.yaml")]},
        sort_keys=False)
    return files
