"""ConfigMap records written over the version read, against the Kubernetes API stand-in
over sockets with the real client."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.kubeapi import KubeApiServer
from shared import configmaps, kube
from shared.errors import AlreadyExistsError, ConflictError, MissingTargetError, NotFoundError
from shared.kube import CONFIG_MAPS, NAMESPACES

NAMESPACE = "accelops-system"
LABELS = {"app.kubernetes.io/managed-by": "accelops"}


@pytest.fixture
def client(kube_api: KubeApiServer, tmp_path: Path,
           monkeypatch: pytest.MonkeyPatch) -> Iterator[kube.KubeClient]:
    monkeypatch.setenv("KUBECONFIG", str(kube_api.write_kubeconfig(tmp_path / "kubeconfig")))
    kube.reset_client()
    client = kube.get_client()
    client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                               "metadata": {"name": NAMESPACE}})
    yield client
    kube.reset_client()


def test_a_record_not_written_yet_is_not_found(client):
    assert configmaps.find(client, "accelops-record", NAMESPACE) is None
    with pytest.raises(NotFoundError):
        configmaps.get(client, "accelops-record", NAMESPACE)


def test_a_first_write_creates_the_config_map_with_its_data_labels_and_annotations(client):
    written = configmaps.write(client, "accelops-record", NAMESPACE, {"state.json": "{}"},
                               version=None, labels=LABELS,
                               annotations={"accelops.dev/updated": "12.500"})

    stored = client.get(CONFIG_MAPS, "accelops-record", NAMESPACE)
    assert stored["data"] == {"state.json": "{}"}
    assert stored["metadata"]["labels"] == LABELS
    assert stored["metadata"]["annotations"]["accelops.dev/updated"] == "12.500"
    assert written.version == stored["metadata"]["resourceVersion"]
    assert configmaps.find(client, "accelops-record", NAMESPACE) == written


def test_a_write_over_the_version_read_replaces_the_data_and_gives_the_new_version(client):
    first = configmaps.write(client, "accelops-record", NAMESPACE, {"a": "1", "b": "2"},
                             version=None, labels=LABELS)

    second = configmaps.write(client, "accelops-record", NAMESPACE, {"a": "3"},
                              version=first.version, labels=LABELS)

    read = configmaps.get(client, "accelops-record", NAMESPACE)
    assert read.data == {"a": "3"}
    assert read.version == second.version != first.version


def test_a_write_over_a_version_someone_else_changed_fails_and_keeps_their_data(client):
    first = configmaps.write(client, "accelops-record", NAMESPACE, {"who": "nobody"},
                             version=None, labels=LABELS)
    configmaps.write(client, "accelops-record", NAMESPACE, {"who": "the other run"},
                     version=first.version, labels=LABELS)

    with pytest.raises(ConflictError) as raised:
        configmaps.write(client, "accelops-record", NAMESPACE, {"who": "this run"},
                         version=first.version, labels=LABELS)

    assert not isinstance(raised.value, AlreadyExistsError)
    assert configmaps.get(client, "accelops-record", NAMESPACE).data == {"who": "the other run"}


def test_two_first_writes_keep_the_first_and_tell_the_second_it_exists(client):
    configmaps.write(client, "accelops-record", NAMESPACE, {"who": "first"}, version=None,
                     labels=LABELS)

    with pytest.raises(AlreadyExistsError):
        configmaps.write(client, "accelops-record", NAMESPACE, {"who": "second"},
                         version=None, labels=LABELS)

    assert configmaps.get(client, "accelops-record", NAMESPACE).data == {"who": "first"}


def test_a_write_over_a_config_map_deleted_since_it_was_read_is_not_found(client):
    first = configmaps.write(client, "accelops-record", NAMESPACE, {"a": "1"}, version=None,
                             labels=LABELS)
    client.delete(CONFIG_MAPS, "accelops-record", NAMESPACE)

    with pytest.raises(NotFoundError):
        configmaps.write(client, "accelops-record", NAMESPACE, {"a": "2"},
                         version=first.version, labels=LABELS)

    assert configmaps.find(client, "accelops-record", NAMESPACE) is None


def test_a_first_write_in_a_namespace_that_does_not_exist_is_the_deployments_fault(client):
    with pytest.raises(MissingTargetError):
        configmaps.write(client, "accelops-record", "no-such-namespace", {"a": "1"},
                         version=None, labels=LABELS)


def test_select_reads_only_the_config_maps_the_selector_picks(client):
    for pool in ("a", "b"):
        configmaps.write(client, f"accelops-pool-{pool}", NAMESPACE, {"saved.json": pool},
                         version=None, labels={"accelops.dev/pool-schedule": "saved"})
    configmaps.write(client, "accelops-record", NAMESPACE, {"a": "1"}, version=None,
                     labels=LABELS)

    picked = configmaps.select(client, NAMESPACE, "accelops.dev/pool-schedule=saved")

    assert sorted((c.name, c.data["saved.json"]) for c in picked) == [
        ("accelops-pool-a", "a"), ("accelops-pool-b", "b")]
    assert all(c.namespace == NAMESPACE and c.version for c in picked)
