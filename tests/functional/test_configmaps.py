"""ConfigMap records written over the version read, against the Kubernetes API stand-in
over sockets with the real system_client."""

from __future__ import annotations

import pytest

from shared import configmaps
from shared.errors import AlreadyExistsError, ConflictError, MissingTargetError, NotFoundError
from shared.kube import CONFIG_MAPS
from tests.functional.conftest import STATE_NAMESPACE

NAMESPACE = STATE_NAMESPACE
LABELS = {"app.kubernetes.io/managed-by": "accelops"}


def test_a_record_not_written_yet_is_not_found(system_client):
    assert configmaps.find(system_client, "accelops-record", NAMESPACE) is None
    with pytest.raises(NotFoundError):
        configmaps.get(system_client, "accelops-record", NAMESPACE)


def test_a_first_write_creates_the_config_map_with_its_data_labels_and_annotations(system_client):
    written = configmaps.write(system_client, "accelops-record", NAMESPACE, {"state.json": "{}"},
                               version=None, labels=LABELS,
                               annotations={"accelops.dev/updated": "12.500"})

    stored = system_client.get(CONFIG_MAPS, "accelops-record", NAMESPACE)
    assert stored["data"] == {"state.json": "{}"}
    assert stored["metadata"]["labels"] == LABELS
    assert stored["metadata"]["annotations"]["accelops.dev/updated"] == "12.500"
    assert written.version == stored["metadata"]["resourceVersion"]
    assert configmaps.find(system_client, "accelops-record", NAMESPACE) == written


def test_a_write_over_the_version_read_replaces_the_data_and_gives_the_new_version(system_client):
    first = configmaps.write(system_client, "accelops-record", NAMESPACE, {"a": "1", "b": "2"},
                             version=None, labels=LABELS)

    second = configmaps.write(system_client, "accelops-record", NAMESPACE, {"a": "3"},
                              version=first.version, labels=LABELS)

    read = configmaps.get(system_client, "accelops-record", NAMESPACE)
    assert read.data == {"a": "3"}
    assert read.version == second.version != first.version


def test_a_write_over_a_version_someone_else_changed_fails_and_keeps_their_data(system_client):
    first = configmaps.write(system_client, "accelops-record", NAMESPACE, {"who": "nobody"},
                             version=None, labels=LABELS)
    configmaps.write(system_client, "accelops-record", NAMESPACE, {"who": "the other run"},
                     version=first.version, labels=LABELS)

    with pytest.raises(ConflictError) as raised:
        configmaps.write(system_client, "accelops-record", NAMESPACE, {"who": "this run"},
                         version=first.version, labels=LABELS)

    assert not isinstance(raised.value, AlreadyExistsError)
    record = configmaps.get(system_client, "accelops-record", NAMESPACE)
    assert record.data == {"who": "the other run"}


def test_two_first_writes_keep_the_first_and_tell_the_second_it_exists(system_client):
    configmaps.write(system_client, "accelops-record", NAMESPACE, {"who": "first"}, version=None,
                     labels=LABELS)

    with pytest.raises(AlreadyExistsError):
        configmaps.write(system_client, "accelops-record", NAMESPACE, {"who": "second"},
                         version=None, labels=LABELS)

    assert configmaps.get(system_client, "accelops-record", NAMESPACE).data == {"who": "first"}


def test_a_write_over_a_config_map_deleted_since_it_was_read_is_not_found(system_client):
    first = configmaps.write(system_client, "accelops-record", NAMESPACE, {"a": "1"}, version=None,
                             labels=LABELS)
    system_client.delete(CONFIG_MAPS, "accelops-record", NAMESPACE)

    with pytest.raises(NotFoundError):
        configmaps.write(system_client, "accelops-record", NAMESPACE, {"a": "2"},
                         version=first.version, labels=LABELS)

    assert configmaps.find(system_client, "accelops-record", NAMESPACE) is None


def test_a_first_write_in_a_namespace_that_does_not_exist_is_the_deployments_fault(system_client):
    with pytest.raises(MissingTargetError):
        configmaps.write(system_client, "accelops-record", "no-such-namespace", {"a": "1"},
                         version=None, labels=LABELS)


def test_select_reads_only_the_config_maps_the_selector_picks(system_client):
    for pool in ("a", "b"):
        configmaps.write(system_client, f"accelops-pool-{pool}", NAMESPACE, {"saved.json": pool},
                         version=None, labels={"accelops.dev/pool-schedule": "saved"})
    configmaps.write(system_client, "accelops-record", NAMESPACE, {"a": "1"}, version=None,
                     labels=LABELS)

    picked = configmaps.select(system_client, NAMESPACE, "accelops.dev/pool-schedule=saved")

    assert sorted((c.name, c.data["saved.json"]) for c in picked) == [
        ("accelops-pool-a", "a"), ("accelops-pool-b", "b")]
    assert all(c.namespace == NAMESPACE and c.version for c in picked)
