"""The sandbox Kubernetes API's own copies of the pinned CRDs: unedited, all loaded, every
rule evaluated."""

from __future__ import annotations

import hashlib
import re
from typing import Any

import yaml

from sandbox.kubeapi.crd_schema import CRD_DIRECTORY, Schema, crds

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
SOURCES = (CRD_DIRECTORY / "SOURCES.md").read_text()


def recorded_hashes() -> dict[str, str]:
    rows = re.findall(r"^\| (\S+\.yaml) \|.*\| ([0-9a-f]{64}) \|$", SOURCES, re.MULTILINE)
    return dict(rows)


def test_each_crd_copy_is_byte_for_byte_the_upstream_file_its_sources_name():
    files = {path.name: hashlib.sha256(path.read_bytes()).hexdigest()
             for path in CRD_DIRECTORY.glob("*.yaml")}

    assert files == recorded_hashes()


def test_the_sandbox_serves_the_kinds_accelops_uses_at_the_pinned_versions():
    served = {(crd.group, crd.kind): sorted(crd.versions) for crd in crds()}

    assert served == {
        ("jobset.x-k8s.io", "JobSet"): ["v1alpha2"],
        ("kueue.x-k8s.io", "ClusterQueue"): ["v1beta1"],
        ("kueue.x-k8s.io", "LocalQueue"): ["v1beta1"],
        ("kueue.x-k8s.io", "ResourceFlavor"): ["v1beta1"],
        ("kueue.x-k8s.io", "WorkloadPriorityClass"): ["v1beta1"],
        ("kueue.x-k8s.io", "Workload"): ["v1beta1"],
        ("monitoring.googleapis.com", "PodMonitoring"): ["v1", "v1alpha1"],
        ("gateway.networking.k8s.io", "GatewayClass"): ["v1", "v1beta1"],
        ("gateway.networking.k8s.io", "Gateway"): ["v1", "v1beta1"],
        ("gateway.networking.k8s.io", "HTTPRoute"): ["v1", "v1beta1"],
        ("gateway.networking.k8s.io", "ReferenceGrant"): ["v1beta1"],
        ("networking.gke.io", "HealthCheckPolicy"): ["v1"],
    }


def nodes(schema: Schema) -> list[Schema]:
    found = [schema]
    for child in [*(schema.properties or {}).values(), schema.additional, schema.items]:
        if child is not None:
            found.extend(nodes(child))
    return found


def raw_rules(node: Any) -> list[str]:
    """Every rule written anywhere in a raw schema."""
    if isinstance(node, dict):
        own = [r["rule"] for r in node.get("x-kubernetes-validations") or []]
        return own + [rule for key, value in node.items()
                      if key != "x-kubernetes-validations" for rule in raw_rules(value)]
    if isinstance(node, list):
        return [rule for item in node for rule in raw_rules(item)]
    return []


def test_every_rule_of_every_crd_is_compiled_for_evaluation():
    # Loading compiles each rule and fails on one calling a function the sandbox's CEL
    # environment lacks; and each rule written in a file is one the walk reaches.
    written = sorted(rule for path in CRD_DIRECTORY.glob("*.yaml")
                     for rule in raw_rules(yaml.load(path.read_text(), Loader=LOADER)))
    compiled = sorted(rule.source for crd in crds() for version in crd.versions.values()
                      for node in nodes(version.schema) for rule in node.rules)

    assert len(written) == 223
    assert compiled == written


def test_no_rule_compares_a_whole_set_or_map_list_whose_order_kubernetes_would_ignore():
    whole_value_rules = [
        (crd.kind, node) for crd in crds() for version in crd.versions.values()
        for node in nodes(version.schema)
        if any(re.search(r"\bself\s*==\s*oldSelf\b", rule.source) for rule in node.rules)]

    assert whole_value_rules
    assert [kind for kind, node in whole_value_rules if node.has_list_sets] == []
