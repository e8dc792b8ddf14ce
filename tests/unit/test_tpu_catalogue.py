"""The TPU catalogue matches the reference table of GKE TPU shapes and its derivation rule."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.errors import PermanentError
from shared.jobspec.tpu import TpuShape, UnknownTpuTypeError, _cubic_topology, catalogue, lookup

REFERENCE_TABLE = Path(__file__).parent / "data" / "tpu_shapes.md"
FAMILY_OF_PREFIX = {"v5litepod": "v5e", "v4": "v4", "v5p": "v5p", "v6e": "v6e"}


def _reference_rows() -> list[dict[str, str]]:
    lines = [
        line.strip()
        for line in REFERENCE_TABLE.read_text(encoding="utf-8").splitlines()
        if line.strip().startswith("|")
    ]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    rows = []
    for line in lines[2:]:  # skip the header and the |---| separator
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows.append(dict(zip(header, cells, strict=True)))
    return rows


REFERENCE_ROWS = _reference_rows()


def _dims(shape: TpuShape) -> list[int]:
    return [int(dim) for dim in shape.topology.split("x")]


def test_the_reference_table_has_every_row_of_the_facts_file() -> None:
    assert len(REFERENCE_ROWS) == 30


@pytest.mark.parametrize("row", REFERENCE_ROWS, ids=[row["type"] for row in REFERENCE_ROWS])
def test_lookup_returns_each_reference_row_field_by_field(row: dict[str, str]) -> None:
    shape = lookup(row["type"])

    assert shape.type == row["type"]
    assert shape.family == FAMILY_OF_PREFIX[row["type"].rsplit("-", 1)[0]]
    assert shape.accelerator == row["accelerator label"]
    assert shape.topology == row["topology"]
    assert shape.machine_type == row["machine type"]
    assert shape.vms == int(row["VMs"])
    assert shape.chips_per_vm == int(row["chips/VM"])
    assert shape.chips == math.prod(_dims(shape))
    assert shape.multi_host is (shape.vms > 1)
    assert shape.node_selector() == {
        "cloud.google.com/gke-tpu-accelerator": row["accelerator label"],
        "cloud.google.com/gke-tpu-topology": row["topology"],
    }


def test_catalogue_holds_exactly_the_reference_rows_in_table_order() -> None:
    assert [shape.type for shape in catalogue()] == [row["type"] for row in REFERENCE_ROWS]
    assert list(catalogue()) == [lookup(row["type"]) for row in REFERENCE_ROWS]


def test_names_of_v4_and_v5p_count_two_tensorcores_per_chip() -> None:
    assert lookup("v5p-128").chips == 64
    assert lookup("v4-8").chips == 4
    assert lookup("v5litepod-16").chips == 16


def test_shapes_are_immutable() -> None:
    shape = lookup("v5p-8")
    with pytest.raises(AttributeError):
        shape.vms = 2  # type: ignore[misc]


@pytest.mark.parametrize(
    ("tpu_type", "topology", "vms"),
    [
        ("v5p-2048", "8x8x16", 256),
        ("v5p-17920", "16x20x28", 2240),
        ("v4-512", "4x8x8", 64),
        ("v4-8192", "16x16x16", 1024),
    ],
)
def test_larger_v4_and_v5p_shapes_are_derived_consistently(
    tpu_type: str, topology: str, vms: int
) -> None:
    shape = lookup(tpu_type)
    dims = _dims(shape)
    family = tpu_type.split("-")[0]

    assert shape.type == tpu_type
    assert shape.family == family
    assert shape.topology == topology
    assert shape.vms == vms
    assert shape.chips_per_vm == 4
    assert shape.chips == math.prod(dims) == shape.vms * 4 == int(tpu_type.split("-")[1]) // 2
    assert len(dims) == 3
    assert dims == sorted(dims)
    assert all(dim % 4 == 0 for dim in dims)
    assert (shape.accelerator, shape.machine_type) == {
        "v4": ("tpu-v4-podslice", "ct4p-hightpu-4t"),
        "v5p": ("tpu-v5p-slice", "ct5p-hightpu-4t"),
    }[family]
    assert shape.multi_host


@pytest.mark.parametrize(
    "tpu_type", ["v4-128", "v4-256", "v5p-128", "v5p-256", "v5p-512", "v5p-1024"]
)
def test_the_derivation_rule_reproduces_the_large_rows_of_the_table(tpu_type: str) -> None:
    shape = lookup(tpu_type)

    assert _cubic_topology(shape.chips) == shape.topology


def test_derived_shapes_are_not_listed_in_the_catalogue() -> None:
    assert lookup("v5p-2048") not in catalogue()


def test_v5p_accepts_exactly_the_table_sizes_and_larger_multiples_of_128_up_to_17920() -> None:
    accepted = set()
    for cores in range(1, 20_000):
        try:
            lookup(f"v5p-{cores}")
        except UnknownTpuTypeError:
            continue
        accepted.add(cores)

    table = {8, 16, 32, 64, 128, 256, 512, 1024}
    assert accepted == table | set(range(1024 + 128, 17920 + 1, 128))


@pytest.mark.parametrize(
    "tpu_type", ["v5p-7", "v5p-100", "v4-16384", "v5litepod-2", "v7-8", "", "tpu"]
)
def test_invalid_names_are_refused_on_the_tpu_type_field(tpu_type: str) -> None:
    with pytest.raises(UnknownTpuTypeError) as caught:
        lookup(tpu_type)

    assert isinstance(caught.value, PermanentError)
    assert caught.value.field == "tpu.type"
    assert repr(tpu_type) in caught.value.message


@pytest.mark.parametrize(
    "tpu_type", ["v5p-0128", "v5p-+128", "v5p--8", "v5p-8-8", "v5p 8", "v5p-2048.0", "v5p-٢٠٤٨"]
)
def test_malformed_sizes_are_refused(tpu_type: str) -> None:
    with pytest.raises(UnknownTpuTypeError):
        lookup(tpu_type)


def test_the_error_message_lists_the_valid_sizes_of_the_family() -> None:
    with pytest.raises(UnknownTpuTypeError, match=r"'v5p-100': v5p sizes .*v5p-8, v5p-16"):
        lookup("v5p-100")


def test_the_error_message_for_an_unknown_family_lists_the_families() -> None:
    with pytest.raises(UnknownTpuTypeError, match=r"'v7-8': .*v5e.*v4.*v5p.*v6e"):
        lookup("v7-8")


@pytest.mark.parametrize("tpu_type", ["V5P-8", "  v5p-8\n", "\tV5p-8 "])
def test_case_and_surrounding_whitespace_are_ignored(tpu_type: str) -> None:
    assert lookup(tpu_type) == lookup("v5p-8")


def test_derived_names_are_normalised_too() -> None:
    assert lookup(" V5P-2048 ").type == "v5p-2048"


@given(
    st.one_of(
        st.integers(min_value=1, max_value=10_000).map(lambda k: 2 * k),
        st.integers(min_value=9, max_value=140).map(lambda k: 128 * k),
    )
)
def test_every_accepted_v5p_core_count_has_half_as_many_chips_as_its_topology(
    cores: int,
) -> None:
    try:
        shape = lookup(f"v5p-{cores}")
    except UnknownTpuTypeError:
        return
    assert shape.chips * 2 == cores
    assert math.prod(_dims(shape)) == shape.chips
