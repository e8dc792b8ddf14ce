"""Admission webhooks in the sandbox Kubernetes API, as the pinned controllers install them.

On GKE, ``kubectl apply --server-side -k manifests/controllers`` installs Kueue v0.10.1
and JobSet v0.7.2: their CRDs, their controller Deployments and, with
``failurePolicy: Fail``, Mutating/ValidatingWebhookConfigurations pointing at
``kueue-system/kueue-webhook-service`` and ``jobset-system/jobset-webhook-service``.
From then on kube-apiserver calls those webhooks on every write they intercept, and
until a controller's pod is ready the call fails:

    Internal error occurred: failed calling webhook "vclusterqueue.kb.io": failed to call
    webhook: Post "https://kueue-webhook-service.kueue-system.svc:443/validate-kueue-x-k8s-io-
    v1beta1-clusterqueue?timeout=10s": no endpoints available for service
    "kueue-webhook-service"

The sandbox does the same from the objects in its store: the webhook configurations
say what is intercepted (:mod:`~sandbox.kubeapi.admission.dispatch`), the Service's
Endpoints say whether the controller answers (the cluster simulation fills them once
the stand-in Deployments are ready: :mod:`sandbox.cluster.managers`), and the
controllers' rules for the kinds accelops writes are ported in
:mod:`~sandbox.kubeapi.admission.jobset` and :mod:`~sandbox.kubeapi.admission.kueue`,
answering behind their Services (:mod:`~sandbox.kubeapi.admission.servers`).

The webhooks and paths of the pinned manifests (``sandbox/cluster/controllers/``):

* JobSet (``jobset-webhook-service``): ``mjobset.kb.io``
  ``/mutate-jobset-x-k8s-io-v1alpha2-jobset``, ``vjobset.kb.io``
  ``/validate-jobset-x-k8s-io-v1alpha2-jobset`` (JobSets, create and update),
  ``mpod.kb.io`` ``/mutate--v1-pod``, ``vpod.kb.io`` ``/validate--v1-pod`` (pods
  labelled ``jobset.sigs.k8s.io/jobset-name``, create);
* Kueue (``kueue-webhook-service``): ``mclusterqueue.kb.io``, ``vclusterqueue.kb.io``,
  ``mresourceflavor.kb.io``, ``vresourceflavor.kb.io``, ``mworkload.kb.io``,
  ``vworkload.kb.io`` (also ``workloads/status``), ``vcohort.kb.io``,
  ``mjobset.kb.io``/``vjobset.kb.io`` (its JobSet integration), and the integrations'
  ``mjob``/``vjob`` (batch Jobs), ``mpod``/``vpod`` and ``mdeployment``/
  ``vdeployment`` (outside ``kube-system`` and ``kueue-system``), ``mstatefulset``/
  ``vstatefulset``, ``mmpijob``, ``mmxjob``, ``mpaddlejob``, ``mpytorchjob``,
  ``mtfjob``, ``mxgboostjob``, ``mraycluster``, ``mrayjob`` and their ``v…`` twins,
  at ``/mutate-<group>-<version>-<kind>`` and ``/validate-<group>-<version>-<kind>``
  (the core group empty: ``/mutate--v1-pod``).

Simulated controllers write to the store directly, so their own writes (Workloads,
Jobs, pods, status updates) are not admitted: only API requests are.
"""

from __future__ import annotations

from sandbox.kubeapi.admission.dispatch import RequestAdmission, Target, WebhookDispatcher
from sandbox.kubeapi.admission.review import Denied, Review

__all__ = ["Denied", "RequestAdmission", "Review", "Target", "WebhookDispatcher"]
