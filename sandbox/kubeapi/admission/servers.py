"""The webhook servers of the controllers the sandbox stands in for, by Service and path.

On a cluster, kube-apiserver reaches a webhook through the Service named in the
webhook configuration's ``clientConfig.service``; whatever runs behind it answers
the paths the controller registered. The sandbox calls these Python handlers
instead, found by ``(namespace, service name)`` and path exactly as the pinned
release manifests name them (``sandbox/cluster/controllers/``):

========================================  ==================================================
``jobset-system/jobset-webhook-service``  JobSet v0.7.2 (:mod:`~sandbox.kubeapi.admission.jobset`)
``kueue-system/kueue-webhook-service``    Kueue v0.10.1 (:mod:`~sandbox.kubeapi.admission.kueue`)
========================================  ==================================================

Whether a call gets through (the Service exists, its Endpoints have a ready
address) is decided by the dispatcher (:mod:`~sandbox.kubeapi.admission.dispatch`);
a path not listed here is answered like a controller-runtime webhook server answers
an unregistered path: 404.
"""

from __future__ import annotations

from collections.abc import Mapping

from sandbox.kubeapi.admission import jobset, kueue
from sandbox.kubeapi.admission.review import Handler, Review
from sandbox.kubeapi.errors import JsonObject

__all__ = ["JOBSET_SERVICE", "KUEUE_SERVICE", "SERVERS", "handler_for"]

JOBSET_SERVICE = ("jobset-system", "jobset-webhook-service")
KUEUE_SERVICE = ("kueue-system", "kueue-webhook-service")


def _unchanged(review: Review) -> JsonObject:
    return review.object


def _allowed(review: Review) -> None:
    return None


def _noop_pair(path_suffix: str) -> dict[str, Handler]:
    """A kind whose webhooks the sandbox does not port: admitted unchanged."""
    return {f"/mutate-{path_suffix}": _unchanged, f"/validate-{path_suffix}": _allowed}


_JOBSET: dict[str, Handler] = {
    "/mutate-jobset-x-k8s-io-v1alpha2-jobset": jobset.default,
    "/validate-jobset-x-k8s-io-v1alpha2-jobset": jobset.validate,
    # Exclusive placement of JobSet pods: the sandbox's controller creates pods itself.
    **_noop_pair("-v1-pod"),
}

_KUEUE: dict[str, Handler] = {
    "/mutate-kueue-x-k8s-io-v1beta1-clusterqueue": kueue.default_with_finalizer,
    "/validate-kueue-x-k8s-io-v1beta1-clusterqueue": kueue.validate_cluster_queue,
    "/mutate-kueue-x-k8s-io-v1beta1-resourceflavor": kueue.default_with_finalizer,
    "/validate-kueue-x-k8s-io-v1beta1-resourceflavor": kueue.validate_resource_flavor,
    "/mutate-kueue-x-k8s-io-v1beta1-workload": _unchanged,  # PartialAdmission on: no-op
    "/validate-kueue-x-k8s-io-v1beta1-workload": kueue.validate_workload,
    "/mutate-jobset-x-k8s-io-v1alpha2-jobset": kueue.default_jobset,
    "/validate-jobset-x-k8s-io-v1alpha2-jobset": kueue.validate_jobset,
    "/validate-kueue-x-k8s-io-v1alpha1-cohort": _allowed,
    **_noop_pair("-v1-pod"),
    **_noop_pair("apps-v1-deployment"),
    **_noop_pair("apps-v1-statefulset"),
    **_noop_pair("batch-v1-job"),
    **_noop_pair("kubeflow-org-v1-mxjob"),
    **_noop_pair("kubeflow-org-v1-paddlejob"),
    **_noop_pair("kubeflow-org-v1-pytorchjob"),
    **_noop_pair("kubeflow-org-v1-tfjob"),
    **_noop_pair("kubeflow-org-v1-xgboostjob"),
    **_noop_pair("kubeflow-org-v2beta1-mpijob"),
    **_noop_pair("ray-io-v1-raycluster"),
    **_noop_pair("ray-io-v1-rayjob"),
}

SERVERS: Mapping[tuple[str, str], Mapping[str, Handler]] = {
    JOBSET_SERVICE: _JOBSET,
    KUEUE_SERVICE: _KUEUE,
}


def handler_for(namespace: str, service: str, path: str) -> Handler | None:
    """The handler behind a Service's path, None when nothing answers it."""
    return SERVERS.get((namespace, service), {}).get(path)
