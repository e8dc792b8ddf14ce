"""What the sandbox knows about built-in resource types (Kind, scope, delete reply).

The real API learns this from its compiled-in type registry (built-in groups) and
from CustomResourceDefinitions (every other group). This module is the first: a
small table of the built-in types this project touches. Custom types are served
only once their CRD is stored (:mod:`sandbox.kubeapi.registry`). Built-in
resources that are not tabled are still served, guessing their kind (a
singularised, capitalised plural) and taking their scope from the URL.
"""

from __future__ import annotations

from dataclasses import dataclass

# What the real API lets clients do with an ordinary stored type, and with the
# access reviews (answered on create, never stored).
STORED_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update")
REVIEW_VERBS = ("create",)


@dataclass(frozen=True)
class ResourceInfo:
    """Static facts about one (group, resource)."""

    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    verbs: tuple[str, ...] = STORED_VERBS

    @property
    def stored(self) -> bool:
        """Whether objects of this type are kept (reviews are only answered)."""
        return "get" in self.verbs


_KNOWN: dict[tuple[str, str], ResourceInfo] = {
    ("", "pods"): ResourceInfo("Pod", True, "pod", ("po",)),
    ("", "nodes"): ResourceInfo("Node", False, "node", ("no",)),
    ("", "namespaces"): ResourceInfo("Namespace", False, "namespace", ("ns",)),
    ("", "services"): ResourceInfo("Service", True, "service", ("svc",)),
    ("", "configmaps"): ResourceInfo("ConfigMap", True, "configmap", ("cm",)),
    ("", "secrets"): ResourceInfo("Secret", True, "secret"),
    ("", "events"): ResourceInfo("Event", True, "event", ("ev",)),
    ("", "serviceaccounts"): ResourceInfo("ServiceAccount", True, "serviceaccount", ("sa",)),
    ("", "endpoints"): ResourceInfo("Endpoints", True, "endpoints", ("ep",)),
    ("", "persistentvolumeclaims"): ResourceInfo(
        "PersistentVolumeClaim", True, "persistentvolumeclaim", ("pvc",)
    ),
    ("", "persistentvolumes"): ResourceInfo("PersistentVolume", False, "persistentvolume", ("pv",)),
    ("", "resourcequotas"): ResourceInfo("ResourceQuota", True, "resourcequota", ("quota",)),
    ("", "limitranges"): ResourceInfo("LimitRange", True, "limitrange", ("limits",)),
    ("events.k8s.io", "events"): ResourceInfo("Event", True, "event", ("ev",)),
    ("batch", "jobs"): ResourceInfo("Job", True, "job"),
    ("batch", "cronjobs"): ResourceInfo("CronJob", True, "cronjob", ("cj",)),
    ("apps", "deployments"): ResourceInfo("Deployment", True, "deployment", ("deploy",)),
    ("apps", "statefulsets"): ResourceInfo("StatefulSet", True, "statefulset", ("sts",)),
    ("apps", "daemonsets"): ResourceInfo("DaemonSet", True, "daemonset", ("ds",)),
    ("apps", "replicasets"): ResourceInfo("ReplicaSet", True, "replicaset", ("rs",)),
    ("autoscaling", "horizontalpodautoscalers"): ResourceInfo(
        "HorizontalPodAutoscaler", True, "horizontalpodautoscaler", ("hpa",)
    ),
    ("coordination.k8s.io", "leases"): ResourceInfo("Lease", True, "lease"),
    ("scheduling.k8s.io", "priorityclasses"): ResourceInfo(
        "PriorityClass", False, "priorityclass", ("pc",)
    ),
    ("policy", "poddisruptionbudgets"): ResourceInfo(
        "PodDisruptionBudget", True, "poddisruptionbudget", ("pdb",)
    ),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"): ResourceInfo(
        "MutatingWebhookConfiguration", False, "mutatingwebhookconfiguration"
    ),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"): ResourceInfo(
        "ValidatingWebhookConfiguration", False, "validatingwebhookconfiguration"
    ),
    ("apiextensions.k8s.io", "customresourcedefinitions"): ResourceInfo(
        "CustomResourceDefinition", False, "customresourcedefinition", ("crd", "crds")
    ),
    ("rbac.authorization.k8s.io", "roles"): ResourceInfo("Role", True, "role"),
    ("rbac.authorization.k8s.io", "rolebindings"): ResourceInfo(
        "RoleBinding", True, "rolebinding"
    ),
    ("rbac.authorization.k8s.io", "clusterroles"): ResourceInfo(
        "ClusterRole", False, "clusterrole"
    ),
    ("rbac.authorization.k8s.io", "clusterrolebindings"): ResourceInfo(
        "ClusterRoleBinding", False, "clusterrolebinding"
    ),
    ("authorization.k8s.io", "subjectaccessreviews"): ResourceInfo(
        "SubjectAccessReview", False, "subjectaccessreview", verbs=REVIEW_VERBS
    ),
    ("authorization.k8s.io", "selfsubjectaccessreviews"): ResourceInfo(
        "SelfSubjectAccessReview", False, "selfsubjectaccessreview", verbs=REVIEW_VERBS
    ),
    ("authorization.k8s.io", "selfsubjectrulesreviews"): ResourceInfo(
        "SelfSubjectRulesReview", False, "selfsubjectrulesreview", verbs=REVIEW_VERBS
    ),
    ("authorization.k8s.io", "localsubjectaccessreviews"): ResourceInfo(
        "LocalSubjectAccessReview", True, "localsubjectaccessreview", verbs=REVIEW_VERBS
    ),
}

# Groups served by kube-apiserver itself (not CRDs). Their delete reply is a
# ``Status`` unless the type is registered with ReturnDeletedObject (pods).
_BUILTIN_GROUPS = frozenset(
    {
        "",
        "apps",
        "batch",
        "events.k8s.io",
        "coordination.k8s.io",
        "scheduling.k8s.io",
        "policy",
        "apiextensions.k8s.io",
        "rbac.authorization.k8s.io",
        "authorization.k8s.io",
        "networking.k8s.io",
        "storage.k8s.io",
        "autoscaling",
        "discovery.k8s.io",
        "node.k8s.io",
        "admissionregistration.k8s.io",
    }
)

# Field selector labels each type accepts besides metadata.name/namespace.
_EXTRA_FIELD_LABELS: dict[tuple[str, str], frozenset[str]] = {
    ("", "pods"): frozenset(
        {
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        }
    ),
    ("", "nodes"): frozenset({"spec.unschedulable"}),
    ("", "namespaces"): frozenset({"status.phase"}),
    ("", "secrets"): frozenset({"type"}),
    ("", "events"): frozenset(
        {
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        }
    ),
    ("batch", "jobs"): frozenset({"status.successful"}),
}

_BASE_FIELD_LABELS = frozenset({"metadata.name", "metadata.namespace"})


def known(group: str, resource: str) -> ResourceInfo | None:
    """The table entry for ``(group, resource)``, if any."""
    return _KNOWN.get((group, resource))


def known_resources(group: str) -> dict[str, ResourceInfo]:
    """All tabled resources of one group (for discovery documents)."""
    return {res: info for (grp, res), info in _KNOWN.items() if grp == group}


def is_builtin(group: str) -> bool:
    """Whether kube-apiserver serves the group itself (as opposed to a CRD)."""
    return group in _BUILTIN_GROUPS


def known_groups() -> set[str]:
    """All groups with a tabled resource, core group excluded."""
    return {grp for grp, _ in _KNOWN if grp}


def singularize(resource: str) -> str:
    """Best-effort English singular of a lowercase plural resource name."""
    if resource.endswith("ies") and len(resource) > 3:
        return resource[:-3] + "y"
    if resource.endswith(("sses", "xes", "ches", "shes")):
        return resource[:-2]
    if resource.endswith("s") and not resource.endswith("ss"):
        return resource[:-1]
    return resource


def guess_kind(resource: str) -> str:
    """``fooflavors`` -> ``Fooflavor``: the fallback when nothing better is known."""
    singular = singularize(resource)
    return singular[:1].upper() + singular[1:]


def returns_deleted_object(group: str, resource: str) -> bool:
    """Whether DELETE answers with the object (pods, namespaces, custom resources) or a Status."""
    if group == "" and resource in ("pods", "namespaces"):
        return True
    return group not in _BUILTIN_GROUPS


def allows_unconditional_update(group: str, resource: str) -> bool:
    """Built-in kinds accept a PUT without resourceVersion; custom resources refuse it."""
    return group in _BUILTIN_GROUPS


def supported_field_labels(group: str, resource: str) -> frozenset[str]:
    """Field selector labels the real API accepts for this type."""
    return _BASE_FIELD_LABELS | _EXTRA_FIELD_LABELS.get((group, resource), frozenset())


# Version advertised by discovery for groups nothing has been stored in yet.
_PREFERRED_VERSIONS: dict[str, str] = {
    "": "v1",
    "apps": "v1",
    "batch": "v1",
    "events.k8s.io": "v1",
    "coordination.k8s.io": "v1",
    "scheduling.k8s.io": "v1",
    "policy": "v1",
    "apiextensions.k8s.io": "v1",
    "rbac.authorization.k8s.io": "v1",
    "authorization.k8s.io": "v1",
    "admissionregistration.k8s.io": "v1",
    "autoscaling": "v2",
}


def preferred_version(group: str) -> str:
    """The version discovery advertises for a group (v1 when unknown)."""
    return _PREFERRED_VERSIONS.get(group, "v1")
