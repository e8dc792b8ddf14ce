"""The sandbox's stand-in release manifests of the Kueue and JobSet controllers
(``sandbox/cluster/controllers``), written straight into an in-process store: what
``kubectl apply -k manifests/controllers`` creates, less the CRDs. Used by the
admission tests' cluster and the controller managers' unit tests.
"""

from __future__ import annotations

from typing import Any

import yaml

from sandbox.kubeapi import ObjectStore
from sandbox.supervisor.provision import CONTROLLERS_DIR

# (group, plural) of every kind in the manifests.
PLURALS = {"Namespace": ("", "namespaces"), "ServiceAccount": ("", "serviceaccounts"),
           "ConfigMap": ("", "configmaps"), "Secret": ("", "secrets"),
           "Service": ("", "services"), "Deployment": ("apps", "deployments"),
           "MutatingWebhookConfiguration": ("admissionregistration.k8s.io",
                                            "mutatingwebhookconfigurations"),
           "ValidatingWebhookConfiguration": ("admissionregistration.k8s.io",
                                              "validatingwebhookconfigurations")}


def controller_manifests() -> list[dict[str, Any]]:
    """The stand-in release manifests (without the CRDs)."""
    return [doc for path in sorted(CONTROLLERS_DIR.glob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text()) if doc]


def store_controller_manifests(store: ObjectStore) -> None:
    """Create every object of the manifests in ``store``, in the files' order."""
    for doc in controller_manifests():
        store.create(*PLURALS[doc["kind"]], doc)
