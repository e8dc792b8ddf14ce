"""deploy.yaml: what it must say, and how a refusal names the field and the rule."""

from __future__ import annotations

import pytest
import yaml

from shared.serving.convention import parse_object_name
from shared.serving.manifest import ManifestError, read_manifest

UPLOAD = parse_object_name("models/triton/toy-lm/v2/deploy.yaml")
GOOD = {
    "server": "triton", "model": "toy-lm", "version": "v2",
    "accelerator": {"gpu": {"type": "nvidia-l4", "count": 1}},
    "replicas": {"min": 1, "max": 3},
    "files": [{"path": "config.pbtxt", "md5": "00112233445566778899aabbccddeeff"},
              {"path": "model.py", "crc32c": "AAAAAA=="}],
}


def read(document: object) -> object:
    assert UPLOAD is not None
    return read_manifest(yaml.safe_dump(document).encode(), UPLOAD)


def test_a_good_manifest_is_read_with_checksums_as_cloud_storage_reports_them():
    manifest = read(GOOD)

    assert manifest.target == "toy-lm"
    assert manifest.version_number == 2
    assert manifest.files[0].md5 == "ABEiM0RVZneImaq7zN3u/w=="


@pytest.mark.parametrize(("change", "field"), [
    ({"version": "v3"}, "version"),
    ({"model": "other"}, "model"),
    ({"server": "saxml"}, "server"),
    ({"accelerator": {"gpu": {"type": "nvidia-l4"}, "tpu": "v5litepod-4"}}, "accelerator"),
    ({"accelerator": {"gpu": {"type": "amd-mi300"}}}, "accelerator.gpu.type"),
    ({"replicas": {"min": 3, "max": 1}}, "replicas"),
    ({"files": []}, "files"),
    ({"files": [{"path": "config.pbtxt"}]}, "files.0"),
    ({"files": [{"path": "../config.pbtxt", "md5": "00" * 16}]}, "files.0.path"),
    ({"files": [{"path": "model.py", "md5": "00" * 16}]}, "files"),
    ({"files": [{"path": "config.pbtxt", "md5": "not-a-digest"}]}, "files.0.md5"),
    ({"deployment": "Bad_Name"}, "deployment"),
    ({"command": ["sh"]}, "command"),
])
def test_a_bad_manifest_is_refused_naming_the_field(change, field):
    with pytest.raises(ManifestError) as error:
        read({**GOOD, **change})

    assert (error.value.field or "").startswith(field)
    assert error.value.rule


def test_yaml_aliases_are_refused_before_they_expand():
    assert UPLOAD is not None
    bomb = b"a: &a ['x','x']\nb: &b [*a,*a]\nc: &c [*b,*b]\n"

    with pytest.raises(ManifestError, match="anchors or aliases"):
        read_manifest(bomb, UPLOAD)


def test_a_huge_manifest_is_refused_unread():
    assert UPLOAD is not None

    with pytest.raises(ManifestError) as error:
        read_manifest(b"#" * 70_000, UPLOAD)

    assert error.value.rule == "at most 65,536 bytes"


def test_a_saxml_manifest_names_a_tpu_from_the_catalogue_and_a_listed_checkpoint():
    upload = parse_object_name("models/saxml/lm2b/v1/deploy.yaml")
    assert upload is not None
    body = {"server": "saxml", "model": "lm2b", "version": 1,
            "accelerator": {"tpu": "v5litepod-4"},
            "files": [{"path": "checkpoint/params.msgpack", "md5": "00" * 16}],
            "saxml": {"model_path": "saxml.server.lm.params.lm_cloud.LmCloudSpmd2B",
                      "checkpoint": "checkpoint"}}

    manifest = read_manifest(yaml.safe_dump(body).encode(), upload)

    assert manifest.accelerator.tpu == "v5litepod-4"
    with pytest.raises(ManifestError, match=r"TPU|tpu"):
        read_manifest(yaml.safe_dump({**body, "accelerator": {"tpu": "v9-1"}}).encode(),
                      upload)
