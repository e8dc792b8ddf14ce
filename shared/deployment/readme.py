"""The generated tables in hand-written pages, rendered from the definition
(``accelops deploy generate`` keeps them current; ``--check`` and a test fail when one
is stale): the documentation's service accounts and permissions (:data:`PAGE`), and
terraform/README.md's least-privilege table (:data:`TERRAFORM_README`), one row per
account and role as Terraform binds them. Pure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shared.deployment import system
from shared.deployment.model import Function, Grant, Service, WorkloadIdentity
from shared.deployment.terraform import system_document

__all__ = ["BEGIN", "BLOCKS", "END", "PAGE", "TERRAFORM_README", "Block",
           "least_privilege_table", "permissions_table", "replace_block"]

# The page that holds the table, under the repository root.
PAGE = "docs/operations/permissions.md"

BEGIN = "<!-- generated: permissions (accelops deploy generate) -->"
END = "<!-- /generated: permissions -->"

_SCOPES = {
    "project": "project",
    "cluster": "project, on the accelops cluster only (IAM condition)",
    "scheduled_clusters": "project, on the clusters pool_schedule acts on only (IAM condition)",
    "topic": "topic `{target}`",
    "table": "table `{target}`",
    "dataset": "the metrics dataset",
    "config_bucket": "the config bucket",
    "models_bucket": "the models bucket",
    "releases_bucket": "the releases bucket",
    "sax_bucket": "the Sax bucket",
    "node_service_account": "the node service account",
}
_WHERE = {"cluster": "all namespaces", "state_namespace": "`accelops-system`",
          "team_namespaces": "each team namespace", "serving_namespace": "the serving namespace",
          "saxml_namespace": "the Saxml team's namespace"}


def _grant(grant: Grant) -> tuple[str, str]:
    role = f"custom role `{grant.role}`" if grant.custom else f"`{grant.role}`"
    return f"{role} on {_SCOPES[grant.scope].format(target=grant.target)}", grant.why


def _rows(part: Function | Service | WorkloadIdentity) -> list[str]:
    publishes = () if isinstance(part, WorkloadIdentity) else part.publishes_to
    publish = tuple(Grant("roles/pubsub.publisher", "topic", f"publish to {topic}", topic)
                    for topic in publishes)
    rows = [_grant(g) for g in (*part.grants, *publish)]
    if not isinstance(part, WorkloadIdentity):
        for rule in part.kube_rules:
            what = ", ".join(f"{r}.{rule.api_group}" if rule.api_group else r
                             for r in rule.resources)
            names = f" named {', '.join(rule.resource_names)}" if rule.resource_names else ""
            rows.append((f"Kubernetes: {'/'.join(rule.verbs)} {what}{names} in "
                         f"{_WHERE[rule.scope]}", rule.why))
    if isinstance(part, WorkloadIdentity):
        where = " and ".join(_WHERE[scope] for scope in part.scopes)
        rows.append((f"Workload Identity: Kubernetes service account "
                     f"`{part.kubernetes_service_account}` in {where}", part.description))
    account = f"`{part.service_account}`"
    return [f"| {account if i == 0 else ''} | {grant} | {why} |"
            for i, (grant, why) in enumerate(rows)] or [f"| {account} | (none) | |"]


def permissions_table() -> str:
    lines = ["| service account | permission | needed by |", "| --- | --- | --- |"]
    parts: list[Function | Service | WorkloadIdentity] = [
        *system.FUNCTIONS, *system.SERVICES, *system.WORKLOAD_IDENTITIES]
    for part in parts:
        lines += _rows(part)
    lines.append(f"| `{system.PUSH_INVOKER}` | `roles/run.invoker` on each function | "
                 "Pub/Sub signs its pushes as this account (OIDC) |")
    lines.append("| Terraform's `service_invokers` (and `jobs_api_invokers`) | `roles/run.invoker` "
                 "on that service | the people and CI that call a service (never `allUsers`); "
                 "the jobs API then maps each caller's e-mail to teams |")
    lines.append(f"| `{system.EVENTARC_INVOKER}` | `roles/eventarc.eventReceiver` on project, "
                 "`roles/run.invoker` on each function fed by an Eventarc trigger | "
                 "Eventarc delivers bucket events as this account (model_upload_route "
                 "`eventarc`) |")
    lines.append(f"| `{system.FUNCTION_BUILDER}` | `roles/logging.logWriter` on project, "
                 "`roles/artifactregistry.writer` on the functions' image repository, "
                 "`roles/storage.objectViewer` on the function source bucket | Cloud Build "
                 "builds each function's image as this account (read the source archive, "
                 "push the image, write the build log) |")
    return "\n".join(lines)


# terraform/README.md's table, keyed as Terraform binds the roles: by service account id,
# with the custom roles' permissions spelled out; scopes read as on the permissions page.
TERRAFORM_README = "terraform/README.md"
TERRAFORM_BEGIN = "<!-- BEGIN least-privilege: generated by `accelops deploy generate` -->"
TERRAFORM_END = "<!-- END least-privilege -->"

def least_privilege_table(document: dict[str, Any] | None = None) -> str:
    """The definition's grants as Terraform binds them (``document``: the generated
    system.json's; default: the definition's now), one row per account and role."""
    document = document or system_document()
    rows = ["| service account | runs | role | on | why |",
            "| --- | --- | --- | --- | --- |"]
    kinds = (("function", document["functions"]), ("service", document["services"]),
             ("workload identity", document["serving"]["workload_identities"]))
    for kind, items in kinds:
        for name, spec in items.items():
            for grant in spec["grants"]:
                role = grant["role"]
                custom = document["custom_roles"].get(role)
                role_text = (f"`{role}` (custom: {', '.join(custom['permissions'])})"
                             if custom else f"`{role}`")
                on = _SCOPES[grant["scope"]].format(target=grant["target"])
                why = grant["why"].replace("|", "\\|")
                rows.append(f"| `{spec['service_account_id']}` | {kind} `{name}` | {role_text} "
                            f"| {on} | {why} |")
    return "\n".join(rows)


@dataclass(frozen=True)
class Block:
    """A generated table between two markers of a hand-written page."""

    page: str  # under the repository root
    begin: str
    end: str
    render: Callable[[], str]


BLOCKS: tuple[Block, ...] = (
    Block(PAGE, BEGIN, END, permissions_table),
    Block(TERRAFORM_README, TERRAFORM_BEGIN, TERRAFORM_END, least_privilege_table),
)


def replace_block(text: str, block: Block = BLOCKS[0]) -> str:
    """``text`` with the block between its markers rendered afresh."""
    start, end = text.index(block.begin) + len(block.begin), text.index(block.end)
    return f"{text[:start]}\n{block.render()}\n{text[end:]}"
