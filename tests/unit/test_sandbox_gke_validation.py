"""Node pool validation of the sandbox GKE API, derived from the TPU catalogue."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sandbox.gke.errors import GkeError
from sandbox.gke.validation import (
    is_multi_host,
    is_valid_topology,
    known_machine_types,
    slice_vms,
    tpu_machine,
    validate_autoscaling,
    validate_node_count,
    validate_node_pool,
)
from shared.jobspec.tpu import catalogue


def pool(name: str = "slice-a", *, machine_type: str | None = "ct5lp-hightpu-4t",
         topology: str | None = "4x4", nodes: int | None = 4,
         placement: Any = "COMPACT", **extra: Any) -> dict[str, Any]:
    """A node pool in proto3 JSON form, as the REST client sends it."""
    body: dict[str, Any] = {"name": name, **extra}
    if machine_type is not None:
        body["config"] = {"machineType": machine_type}
    if nodes is not None:
        body["initialNodeCount"] = nodes
    if topology is not None:
        body["placementPolicy"] = {"tpuTopology": topology}
        if placement is not None:
            body["placementPolicy"]["type"] = placement
    return body


def refusal(body: dict[str, Any]) -> GkeError:
    with pytest.raises(GkeError) as excinfo:
        validate_node_pool(body)
    assert excinfo.value.status == "INVALID_ARGUMENT"
    assert excinfo.value.http_code == 400
    return excinfo.value


@pytest.mark.parametrize("shape", catalogue(), ids=lambda shape: shape.type)
def test_every_catalogue_shape_is_accepted_as_a_node_pool(shape):
    body = pool(machine_type=shape.machine_type, topology=shape.topology, nodes=shape.vms)

    validate_node_pool(body)

    assert slice_vms(body) == shape.vms
    assert is_multi_host(body) == shape.multi_host


def test_larger_v5p_and_v4_topologies_derived_by_the_catalogue_are_accepted():
    assert is_valid_topology("ct5p-hightpu-4t", "8x8x16")  # v5p-2048
    assert is_valid_topology("ct5p-hightpu-4t", "16x20x28")  # v5p-17920
    assert is_valid_topology("ct4p-hightpu-4t", "8x8x8")  # v4-1024
    validate_node_pool(pool(machine_type="ct5p-hightpu-4t", topology="8x8x16", nodes=256))


def test_topologies_of_another_family_or_shape_are_not_valid():
    assert not is_valid_topology("ct5lp-hightpu-4t", "2x2x2")
    assert not is_valid_topology("ct5lp-hightpu-8t", "4x4")  # 4x4 uses the 4-chip VM
    assert not is_valid_topology("ct5p-hightpu-4t", "4x4")
    assert not is_valid_topology("ct5p-hightpu-4t", "8x4x4")  # not the catalogue's order
    assert not is_valid_topology("e2-standard-4", "2x2")


def test_a_single_host_tpu_pool_needs_no_placement_policy_and_may_autoscale():
    body = pool(machine_type="ct6e-standard-8t", topology=None, nodes=3,
                autoscaling={"enabled": True, "minNodeCount": 0, "maxNodeCount": 5})

    validate_node_pool(body)

    assert not is_multi_host(body)
    assert slice_vms(body) == 1


def test_a_cpu_pool_with_the_default_machine_type_is_accepted():
    validate_node_pool({"name": "default-pool", "initialNodeCount": 3})
    validate_node_pool(pool(machine_type="n2-standard-8", topology=None, nodes=1))


def test_the_known_machine_types_are_the_catalogue_tpus_and_a_few_cpu_types():
    machines = known_machine_types()

    assert {shape.machine_type for shape in catalogue()} <= machines
    assert {"e2-standard-4", "n2-standard-8"} <= machines
    tpu = tpu_machine("ct5lp-hightpu-4t")
    assert tpu is not None
    assert (tpu.family, tpu.chips_per_vm, tpu.accelerator) == ("v5e", 4, "tpu-v5-lite-podslice")
    assert "16x16" in tpu.topologies
    assert tpu_machine("e2-standard-4") is None


def test_an_unknown_machine_type_is_refused_naming_the_field():
    error = refusal(pool(machine_type="ct9-imaginary-4t"))

    assert "'nodePool.config.machineType'" in error.message
    assert "ct9-imaginary-4t" in error.message


def test_a_topology_not_matching_the_machine_type_is_refused_naming_the_field():
    error = refusal(pool(machine_type="ct5lp-hightpu-4t", topology="2x2x2"))

    assert "'nodePool.placementPolicy.tpuTopology'" in error.message
    assert "4x4" in error.message  # lists the valid ones


def test_a_topology_on_a_cpu_machine_type_is_refused():
    error = refusal(pool(machine_type="e2-standard-4", topology="2x2", nodes=1))

    assert "'nodePool.placementPolicy.tpuTopology'" in error.message


@pytest.mark.parametrize("nodes", [None, 0, 3, 5, 16])
def test_a_multi_host_pool_needs_exactly_its_vm_count_of_nodes(nodes):
    error = refusal(pool(topology="4x4", nodes=nodes))

    assert "'nodePool.initialNodeCount'" in error.message
    assert "exactly 4 nodes" in error.message


@pytest.mark.parametrize("placement", [None, "TYPE_UNSPECIFIED", 0])
def test_a_multi_host_pool_needs_compact_placement(placement):
    error = refusal(pool(placement=placement))

    assert "'nodePool.placementPolicy.type'" in error.message


def test_compact_placement_may_be_given_as_its_enum_number():
    validate_node_pool(pool(placement=1))


def test_autoscaling_on_a_multi_host_pool_is_refused():
    error = refusal(pool(autoscaling={"enabled": True, "maxNodeCount": 4}))

    assert "'nodePool.autoscaling.enabled'" in error.message


def test_disabled_or_empty_autoscaling_on_a_multi_host_pool_is_accepted():
    validate_node_pool(pool(autoscaling={}))
    validate_node_pool(pool(autoscaling={"enabled": False}))


def test_autoscaling_bounds_must_be_ordered_and_positive():
    single = pool(topology=None, nodes=1)

    with pytest.raises(GkeError, match=r"'autoscaling\.maxNodeCount'"):
        validate_autoscaling(single, {"enabled": True, "minNodeCount": 3, "maxNodeCount": 2})
    with pytest.raises(GkeError, match=r"'autoscaling\.maxNodeCount'"):
        validate_autoscaling(single, {"enabled": True})
    validate_autoscaling(single, {"enabled": True, "minNodeCount": 0, "maxNodeCount": 2})


def test_a_negative_node_count_is_refused():
    error = refusal(pool(topology=None, nodes=-1))

    assert "'nodePool.initialNodeCount'" in error.message


@pytest.mark.parametrize(
    "name", ["p" * 41, "Slice-a", "1slice", "slice-", "slice_a", "", "sl ice"],
    ids=["41-chars", "uppercase", "leading-digit", "trailing-hyphen", "underscore", "empty",
         "space"])
def test_a_pool_name_that_is_not_rfc1035_or_too_long_is_refused(name):
    error = refusal(pool(name))

    assert "'nodePool.name'" in error.message


def test_a_pool_name_of_exactly_40_characters_is_accepted():
    validate_node_pool(pool("p" * 40))


@given(st.from_regex(r"[a-z]([-a-z0-9]{0,38}[a-z0-9])?", fullmatch=True))
def test_any_rfc1035_name_up_to_40_characters_is_accepted(name):
    validate_node_pool(pool(name))


@given(st.from_regex(r"[a-z][-a-z0-9]{39,60}[a-z0-9]", fullmatch=True))
def test_any_name_longer_than_40_characters_is_refused(name):
    assert "'nodePool.name'" in refusal(pool(name)).message


@pytest.mark.parametrize("count", [0, 4])
def test_a_multi_host_pool_may_be_resized_to_zero_or_its_full_size(count):
    validate_node_count(pool(), count)


@pytest.mark.parametrize("count", [1, 2, 3, 5, 8])
def test_a_partial_resize_of_a_multi_host_pool_is_refused(count):
    with pytest.raises(GkeError, match=r"'nodeCount'.*0 or 4 nodes") as excinfo:
        validate_node_count(pool(), count)

    assert excinfo.value.status == "INVALID_ARGUMENT"


def test_a_single_host_pool_may_be_resized_to_any_count_but_not_below_zero():
    single = pool(topology="2x2", nodes=1)

    for count in (0, 1, 7):
        validate_node_count(single, count)
    with pytest.raises(GkeError, match="'nodeCount'"):
        validate_node_count(single, -1)
