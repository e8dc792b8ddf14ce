"""What each function's (and service's) Kubernetes identity may do, by the definition — and the
probes ``accelops doctor`` asks the cluster about (SubjectAccessReview) to show
that it may do exactly that: every needed request allowed, every other one of the
same kinds denied. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from shared.config import AccelopsConfig
from shared.deployment import system
from shared.deployment.model import Function, KubeRule, Service

__all__ = ["Probe", "allowed_by_definition", "probes"]

# The verbs probed: everything a client can do to stored objects.
VERBS = ("get", "list", "watch", "create", "update", "patch", "delete")
# Resources no function needs, probed so a grant that leaks to them shows up.
SENSITIVE = (("", "secrets"), ("", "pods/exec"), ("rbac.authorization.k8s.io", "rolebindings"))


@dataclass(frozen=True, slots=True)
class Probe:
    """One question for the authorizer: may ``user`` do this?"""

    verb: str
    group: str
    resource: str  # "pods/exec" names a subresource
    namespace: str  # "" = cluster-wide (all namespaces)
    name: str = ""

    def describe(self) -> str:
        where = f"in namespace {self.namespace}" if self.namespace else "cluster-wide"
        what = f"{self.resource}.{self.group}" if self.group else self.resource
        return f"{self.verb} {what}{f' {self.name}' if self.name else ''} {where}"


def _namespaces(rule: KubeRule, config: AccelopsConfig) -> set[str] | None:
    """Namespaces a rule covers; None for every namespace (cluster scope). A Saxml
    rule covers nothing while serving.saxml_team is unset (no RoleBinding)."""
    if rule.scope == "cluster":
        return None
    if rule.scope == "state_namespace":
        return {config.slices.state_namespace}
    if rule.scope == "serving_namespace":
        return {config.serving.namespace}
    if rule.scope == "saxml_namespace":
        team = config.teams.get(config.serving.saxml_team or "")
        return set() if team is None else {team.namespace}
    return {team.namespace for team in config.teams.values()}


def allowed_by_definition(spec: Function | Service, probe: Probe, config: AccelopsConfig) -> bool:
    """Whether the function's rules allow the probe (RBAC semantics: a cluster-scope
    rule covers every namespace; resourceNames rules match only named requests)."""
    for rule in spec.kube_rules:
        if probe.group != rule.api_group or probe.resource not in rule.resources:
            continue
        if probe.verb not in rule.verbs:
            continue
        if rule.resource_names and probe.name not in rule.resource_names:
            continue
        namespaces = _namespaces(rule, config)
        if namespaces is None or probe.namespace in namespaces:
            return True
    return False


def probes(spec: Function | Service, config: AccelopsConfig) -> list[Probe]:
    """Every verb on every resource any function or service uses (and a few sensitive ones), at
    cluster scope, in the state namespace, the serving namespace and each team
    namespace; plus named probes for rules limited to named objects."""
    specs: tuple[Function | Service, ...] = (*system.FUNCTIONS, *system.SERVICES)
    kinds = {(rule.api_group, resource) for f in specs for rule in f.kube_rules
             for resource in rule.resources} | set(SENSITIVE)
    namespaces = ["", config.slices.state_namespace, config.serving.namespace,
                  *sorted({t.namespace for t in config.teams.values()})]
    found = [Probe(verb, group, resource, namespace)
             for group, resource in sorted(kinds) for verb in VERBS for namespace in namespaces]
    named: Iterable[Probe] = (
        Probe(verb, rule.api_group, resource, namespace, name)
        for rule in spec.kube_rules for resource in rule.resources for verb in rule.verbs
        for name in rule.resource_names for namespace in (_namespaces(rule, config) or {""}))
    return found + list(named)
