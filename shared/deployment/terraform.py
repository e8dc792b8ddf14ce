"""What Terraform reads from the one definition: ``terraform/generated/``.

``system.json`` (functions, their storage triggers, services, topics, scheduler
jobs, log sinks, custom roles, the serving identities, the dataset), one BigQuery
JSON schema per table, one SQL template per view, the ``requirements.txt`` of
the functions' source archive (``function_requirements.txt``: the distributions of
``system.FUNCTION_REQUIREMENTS`` and everything they need, at the versions and with
the hashes ``uv.lock`` pins, so a deploy installs what the tests ran against), and
the same for each service's image (``services/<name>_requirements.txt``, from its
``requirements``; its Dockerfile installs it, not Terraform). The files are
committed; ``accelops deploy generate`` rewrites them and ``accelops deploy generate
--check`` (run by the test suite) fails when they are stale.
Returns file contents and writes nothing; it reads only the repository's
``pyproject.toml`` and ``uv.lock``.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import asdict
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement

from shared.config import MetricsConfig
from shared.deployment import lock, system
from shared.deployment.model import Function, Grant, Service, WorkloadIdentity
from shared.metrics.names import Names
from shared.metrics.schema import TABLES, VIEWS

__all__ = [
    "GENERATED_DIR",
    "REQUIREMENTS_FILE",
    "function_requirements",
    "generated_files",
    "pinned_requirements",
    "service_requirements",
    "service_requirements_file",
]

GENERATED_DIR = "terraform/generated"
# The source archive's requirements.txt (modules/function_source puts it at the root).
REQUIREMENTS_FILE = "function_requirements.txt"
_PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
_LOCK = _PYPROJECT.with_name("uv.lock")

# BigQuery JSON schema files use the legacy type names; the API answers with them,
# so writing them keeps `terraform plan` free of spurious diffs.
_JSON_TYPES = {"INT64": "INTEGER", "FLOAT64": "FLOAT", "BOOL": "BOOLEAN"}

# Placeholders Terraform fills with templatefile() (views) or replace() (filters).
PROJECT_PLACEHOLDER = "${project_id}"
DATASET_PLACEHOLDER = "${dataset_id}"


def _grants(grants: tuple[Grant, ...], publishes_to: tuple[str, ...]) -> list[dict[str, str]]:
    listed = [asdict(g) for g in grants]
    listed += [asdict(Grant("roles/pubsub.publisher", "topic", f"publish to {topic}", topic))
               for topic in publishes_to]
    return listed


def _function(spec: Function) -> dict[str, Any]:
    return {
        "entry_point": spec.name,
        "description": spec.description,
        "service_account_id": spec.service_account,
        "trigger_topic": spec.trigger_topic,
        "subscription": spec.subscription,
        "dead_letter_topic": spec.dead_letter_topic,
        **asdict(spec.retry),
        "memory": spec.memory,
        "cpu": spec.cpu,
        "timeout_seconds": spec.timeout_seconds,
        "concurrency": spec.concurrency,
        "max_instances": spec.max_instances,
        "env": list(spec.env),
        "vpc_egress": spec.vpc_egress,
        "grants": _grants(spec.grants, spec.publishes_to),
    }


def _storage_triggers() -> dict[str, Any]:
    """Per function fed by bucket events: the bucket, the object prefix the Pub/Sub
    notification route filters on, the event of each route, and the topic the
    notifications go to (the function's trigger topic)."""
    return {f.name: {"bucket": t.bucket, "object_prefix": t.object_prefix,
                     "event_type": t.event_type,
                     "notification_event": t.notification_event,
                     "topic": f.trigger_topic}
            for f in system.FUNCTIONS if (t := f.storage_trigger) is not None}


def _identity(spec: WorkloadIdentity) -> dict[str, Any]:
    return {
        "description": spec.description,
        "service_account_id": spec.service_account,
        "kubernetes_service_account": spec.kubernetes_service_account,
        "scopes": list(spec.scopes),
        "grants": _grants(spec.grants, ()),
    }


def _service(spec: Service) -> dict[str, Any]:
    return {
        "description": spec.description,
        "service_account_id": spec.service_account,
        "port": spec.port,
        "memory": spec.memory,
        "cpu": spec.cpu,
        "concurrency": spec.concurrency,
        "max_instances": spec.max_instances,
        "env": list(spec.env),
        "ingress": spec.ingress,
        "grants": _grants(spec.grants, spec.publishes_to),
    }


def system_document() -> dict[str, Any]:
    """The definition as the JSON document the Terraform modules read."""
    metrics = MetricsConfig()
    return {
        "_generated": "by `accelops deploy generate` from shared/deployment/system.py; "
                      "do not edit",
        "topics": list(system.TOPICS),
        "push_invoker_account_id": system.PUSH_INVOKER,
        "eventarc_invoker_account_id": system.EVENTARC_INVOKER,
        "function_build_account_id": system.FUNCTION_BUILDER,
        "functions": {f.name: _function(f) for f in system.FUNCTIONS},
        "storage_triggers": _storage_triggers(),
        "services": {s.name: _service(s) for s in system.SERVICES},
        "scheduler_jobs": {j.name: {"schedule": j.schedule, "time_zone": j.time_zone,
                                    "topic": j.topic, "data": j.data,
                                    "attributes": j.attributes,
                                    "description": j.description}
                           for j in system.SCHEDULER_JOBS},
        "log_sinks": {s.name: {"topic": s.topic, "filter": s.filter,
                               "description": s.description} for s in system.LOG_SINKS},
        "custom_roles": {r.role_id: {"title": r.title, "description": r.description,
                                     "permissions": list(r.permissions)}
                         for r in system.CUSTOM_ROLES},
        "serving": {
            "namespace": system.SERVING_NAMESPACE,
            "workload_identities": {i.name: _identity(i) for i in system.WORKLOAD_IDENTITIES},
        },
        "bigquery": {
            "dataset_id": metrics.dataset,
            "tables": {spec.name(metrics): {"schema_file": f"schemas/{spec.name(metrics)}.json",
                                            "partition_field": spec.partition_field,
                                            "clustering": list(spec.clustering),
                                            "expires": spec.expires,
                                            "description": spec.description}
                       for spec in TABLES},
            # In dependency order: Terraform creates each after the ones before it.
            "views": [{"name": v.name, "query_file": f"views/{v.name}.sql",
                       "description": v.description} for v in VIEWS],
        },
    }


def _distribution(requirement: str) -> str:
    """The normalized distribution name of a PEP 508 requirement (PEP 503)."""
    name = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    if name is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return re.sub(r"[-_.]+", "-", name.group(0)).lower()


def pinned_requirements(roots: tuple[str, ...], pythons: tuple[str, ...], source: str,
                        pyproject: Path = _PYPROJECT, lock_file: Path = _LOCK) -> str:
    """requirements.txt of a deployable: each distribution of ``roots`` and what it
    needs on each Python of ``pythons`` (Linux x86_64), pinned with hashes as
    ``uv.lock`` pins them; ``source`` says in the header where the roots come from.

    A root must be one the project declares, in [project].dependencies or in an extra
    (``uv lock`` resolves every extra, so the lock pins it within pyproject.toml's
    bounds), by a requirement whose marker holds on every target. Raises ValueError
    naming a root that is not, or one the lock does not hold."""
    project = tomllib.loads(pyproject.read_text("utf-8"))["project"]
    declared = [(spec, "") for spec in project["dependencies"]]
    declared += [(spec, extra) for extra, specs in project.get("optional-dependencies", {}).items()
                 for spec in specs]
    targets = tuple(lock.Target(python_full_version=f"{version}.0") for version in pythons)
    missing = [name for name in roots if not any(
        _distribution(spec) == _distribution(name)
        and all(_declared_for(spec, target, extra) for target in targets)
        for spec, extra in declared)]
    if missing:
        raise ValueError(f"{source} names {missing}, which pyproject.toml declares for no "
                         f"Python of {pythons} on Linux (in [project].dependencies or an extra)")
    pinned = lock.requirements_text(lock_file.read_text("utf-8"), roots, targets)
    return ("# Generated by `accelops deploy generate` from shared/deployment/system.py\n"
            f"# ({source}) and uv.lock (`make lock`):\n"
            "# those distributions and all they need, pinned with hashes; do not edit.\n"
            + pinned)


def _declared_for(spec: str, target: lock.Target, extra: str) -> bool:
    """Whether pyproject.toml's requirement applies on the target (its marker, read
    with the extra it is declared in)."""
    marker = Requirement(spec).marker
    return marker is None or marker.evaluate(target.environment(extra))


def function_requirements(pyproject: Path = _PYPROJECT, lock_file: Path = _LOCK) -> str:
    """requirements.txt of the functions' source archive: ``system.FUNCTION_REQUIREMENTS``
    on each of ``system.FUNCTION_PYTHONS`` (see pinned_requirements)."""
    return pinned_requirements(system.FUNCTION_REQUIREMENTS, system.FUNCTION_PYTHONS,
                               "FUNCTION_REQUIREMENTS: what the functions import",
                               pyproject, lock_file)


def service_requirements_file(service: Service) -> str:
    """Where under GENERATED_DIR the service's image requirements are written (its
    Dockerfile copies and installs that file)."""
    return f"services/{service.name}_requirements.txt"


def service_requirements(service: Service, pyproject: Path = _PYPROJECT,
                         lock_file: Path = _LOCK) -> str:
    """requirements.txt of the service's image: its ``requirements`` on
    ``system.SERVICE_PYTHONS``, the image's Python (see pinned_requirements)."""
    return pinned_requirements(service.requirements, system.SERVICE_PYTHONS,
                               f"the {service.name} service's requirements: what its image runs",
                               pyproject, lock_file)


def _dump(document: Any) -> str:
    return json.dumps(document, indent=2, sort_keys=False, ensure_ascii=False) + "\n"


def generated_files() -> dict[str, str]:
    """Every generated file: path under GENERATED_DIR → content."""
    metrics = MetricsConfig()
    files = {"system.json": _dump(system_document()), REQUIREMENTS_FILE: function_requirements()}
    for service in system.SERVICES:
        files[service_requirements_file(service)] = service_requirements(service)
    for spec in TABLES:
        files[f"schemas/{spec.name(metrics)}.json"] = _dump([
            {"name": f.name, "type": _JSON_TYPES.get(f.type, f.type), "mode": f.mode,
             **({"description": f.description} if f.description else {})}
            for f in spec.fields])
    # Names.of validates a real project id; the template's placeholders are not one.
    names = Names(PROJECT_PLACEHOLDER, DATASET_PLACEHOLDER, metrics.table,
                  metrics.rejections_table, metrics.runs_table, metrics.pool_actions_table,
                  metrics.job_events_table)
    for view in VIEWS:
        files[f"views/{view.name}.sql"] = view.sql(names) + "\n"
    return files
