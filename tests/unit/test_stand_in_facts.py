"""The stand-ins' own facts agree with the library's.

The sandbox's GKE and cluster enforce TPU shapes from ``sandbox/gke/tpu_facts.py`` and its
Pub/Sub the publish limits in ``sandbox/pubsub/model.py``, written out from Google's
documentation apart from the library's ``shared/jobspec/tpu.py`` and ``shared/pubsub.py``:
a stand-in importing the library's facts would accept whatever wrong shape or limit the library had.
These tests are where the two copies meet; a disagreement is a wrong fact on one side."""

from __future__ import annotations

import math
from typing import get_args

import pytest

from sandbox.cluster.gateways import GKE_CLASSES
from sandbox.gke import tpu_facts
from sandbox.kubeapi.crd_schema import crds
from sandbox.pubsub import model as pubsub_standin
from shared import pubsub as pubsub_library
from shared.config import ServingConfig
from shared.jobspec.tpu import UnknownTpuTypeError, catalogue, lookup
from shared.serving.gateway import MAX_BACKENDS, MAX_WEIGHT

_LARGEST_CORES = {"v4": 8192, "v5p": 17920}


def test_every_catalogue_row_is_a_shape_the_sandbox_gke_offers_with_the_same_facts():
    for shape in catalogue():
        machine = tpu_facts.tpu_machine(shape.machine_type)
        assert machine is not None, shape
        assert (machine.family, machine.accelerator, machine.chips_per_vm) == (
            shape.family, shape.accelerator, shape.chips_per_vm), shape
        assert shape.topology in machine.topologies, shape
        assert (shape.topology in machine.single_host) == (shape.vms == 1), shape


def test_every_shape_the_sandbox_gke_lists_is_a_catalogue_row():
    rows = {(shape.machine_type, shape.topology) for shape in catalogue()}
    listed = {(machine.machine_type, topology)
              for machine in tpu_facts.tpu_machines().values()
              for topology in machine.topologies}

    assert listed == rows


@pytest.mark.parametrize(("family", "machine_type"), [
    ("v4", "ct4p-hightpu-4t"), ("v5p", "ct5p-hightpu-4t")])
def test_the_larger_slices_the_sandbox_gke_accepts_are_the_ones_the_catalogue_derives(
    family, machine_type,
):
    derived = set()
    for cores in range(2, _LARGEST_CORES[family] + 1, 2):
        try:
            shape = lookup(f"{family}-{cores}")
        except UnknownTpuTypeError:
            continue
        assert shape.machine_type == machine_type
        derived.add(shape.topology)
    machine = tpu_facts.tpu_machine(machine_type)
    assert machine is not None
    most = machine.largest_chips
    accepted = {f"{a}x{b}x{c}"
                for a in range(4, round(most ** (1 / 3)) + 1, 4)
                for b in range(a, math.isqrt(most // a) + 1, 4)
                for c in range(b, most // (a * b) + 1, 4)
                if tpu_facts.accepts_topology(machine_type, f"{a}x{b}x{c}")}

    assert set(machine.topologies) | accepted == derived
    if family == "v5p":
        assert "16x20x28" in accepted  # GKE's largest v5p slice
    assert not tpu_facts.accepts_topology(machine_type, "8x4x4")  # not GKE's order


@pytest.mark.parametrize("name", ["MAX_ATTRIBUTES", "ATTRIBUTE_KEY_MAX_BYTES",
                                  "ATTRIBUTE_MAX_BYTES", "MAX_MESSAGE_BYTES",
                                  "MAX_PUBLISH_MESSAGES"])
def test_the_sandbox_pubsub_enforces_the_publish_limit_the_library_keeps_to(name):
    assert getattr(pubsub_standin, name) == getattr(pubsub_library, name)


def test_every_gateway_class_the_config_offers_is_one_the_sandboxs_gke_provides():
    offered = get_args(ServingConfig.model_fields["gateway_class"].annotation)

    assert offered
    assert set(offered) <= set(GKE_CLASSES)
    assert ServingConfig().gateway_class in GKE_CLASSES


def test_the_route_limits_the_library_keeps_to_are_the_pinned_httproute_crds():
    [route] = [crd for crd in crds() if crd.kind == "HTTPRoute"]
    rules = route.versions["v1"].schema.properties["spec"].properties["rules"]
    refs = rules.items.properties["backendRefs"]

    assert refs.max_items == MAX_BACKENDS
    assert refs.items.properties["weight"].maximum == MAX_WEIGHT
