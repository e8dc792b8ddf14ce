"""Removing a deployment, in the order that lets ``terraform destroy`` finish:
``accelops deploy down``.

1. The JobSets in the team namespaces. Their TPU node pools are not Terraform's:
   ``reconcile_slices`` created them, so its cleanup (run here, while the functions
   still exist) deletes them, and the run waits until no pool labelled
   ``accelops.dev/managed-by=accelops`` is left: they cost money, and on a cluster
   Terraform did not create nothing else would remove them.
2. The overlay: the team namespaces and the serving namespace with everything in
   them, the ClusterQueues and RBAC. The Kueue and JobSet controllers stay unless
   asked (``--controllers``): on an existing cluster others may use them.
3. The data, which Terraform refuses to delete: the metrics tables lose their
   deletion protection (a targeted apply), and every object version in the config,
   function source, models and Sax buckets is deleted. ``deploy down`` asks for
   ``--delete-data`` before it starts.
4. ``terraform destroy``.

Not deleted: Terraform's state bucket, a releases bucket Terraform did not create
(``releases_bucket``), node pools ``pool_schedule`` removed off-hours (they are not
restored either: restore them first if the cluster stays), Cloud Build's staging
bucket, logs, and the project's APIs.
"""

from __future__ import annotations

from collections.abc import Iterable

from shared.deployment.steps import Arg, Join, Output, Plan, Probe, Repeat, Step
from shared.deployment.up import (
    CONTROLLERS_DIR,
    Site,
    approval,
    credentials_step,
    init_step,
    kube_env,
    render_step,
    terraform,
    terraform_vars,
)
from shared.jobspec.labels import LABEL_POOL_MANAGED_BY, MANAGED_BY

__all__ = ["MANAGED_POOLS_FILTER", "down_plan"]

# Node pools reconcile_slices created carry this node label; the filter as gcloud
# reads it (a key with dots and a slash is quoted).
MANAGED_POOLS_FILTER = f'config.labels."{LABEL_POOL_MANAGED_BY}"={MANAGED_BY}'
# The buckets Terraform creates (output `buckets`): the releases bucket is the models
# bucket unless one of the team's own is named, which is not Terraform's to empty.
BUCKETS = ("config", "function_source", "models", "sax")


def down_plan(site: Site, namespaces: Iterable[str], *, controllers: bool = False) -> Plan:
    """Everything ``up`` made, in the order that lets ``terraform destroy`` finish.
    ``namespaces``: the team namespaces, whose JobSets go first."""
    k = site.kubernetes
    env = kube_env(k)
    # reconcile_slices' settings, as the function has them.
    cluster: tuple[tuple[str, Arg], ...] = (
        ("ACCELOPS_PROJECT", site.project),
        ("ACCELOPS_LOCATION", Output("cluster", ("location",))),
        ("ACCELOPS_CLUSTER", Output("cluster", ("name",))),
        ("ACCELOPS_CONFIG", site.config), *env)
    steps = [
        init_step(site),
        credentials_step(site),
        *(Step(f"jobsets-{ns}", f"delete the JobSets in {ns} (their pods stop)",
               ("kubectl", "delete", "jobsets.jobset.x-k8s.io", "--all", "-n", ns,
                "--ignore-not-found", "--wait=true", "--timeout=600s"),
               env=env, timeout_seconds=660)
          for ns in sorted(set(namespaces))),
        Step("release-slices", "delete the TPU node pools of those JobSets "
             "(reconcile_slices' cleanup, run here)",
             ("accelops", "slices", "reconcile", "--cleanup-only"), env=cluster,
             timeout_seconds=600),
        Step("slices-gone", "wait until no node pool accelops created is left",
             ("gcloud", "container", "node-pools", "list", "--cluster",
              Output("cluster", ("name",)), "--location", Output("cluster", ("location",)),
              f"--project={site.project}", f"--filter={MANAGED_POOLS_FILTER}",
              "--format=value(name,status)"),
             repeat=Repeat(r"\S", 60, 30.0, "node pools accelops created to be deleted",
                           "a pool still provisioning cannot be deleted yet: reconcile_slices "
                           "deletes it once it is up (every minute); run "
                           "`accelops slices reconcile --cleanup-only` again to hurry it"),
             timeout_seconds=60 * 30 + 600),
        render_step(k, site.config, site.project, Output("buckets", ("sax",)),
                    "render the overlay (what up applied)",
                    locust_image=Output("images", ("loadgen",))),
        Step("overlay-delete", "delete the overlay: team and serving namespaces with "
             "everything in them, queues, RBAC",
             ("kubectl", "delete", "--ignore-not-found", "--wait=true", "--timeout=600s",
              "-k", k.overlay), env=env, timeout_seconds=660),
    ]
    if controllers:
        steps.append(Step("controllers-delete", "delete the Kueue and JobSet controllers "
                          "and their CRDs",
                          ("kubectl", "delete", "--ignore-not-found", "-k", CONTROLLERS_DIR),
                          env=env, timeout_seconds=660))
    steps += [
        Step("unprotect", "lift the metrics tables' deletion protection",
             terraform(site, "apply", *approval(site), "-target=module.bigquery",
                 *terraform_vars(site), "-var=deletion_protection=false"),
             timeout_seconds=1800),
        *(Step(f"empty-{bucket}", f"delete every object version in the {bucket} bucket",
               ("gcloud", "storage", "rm", "--all-versions",
                Join(("gs://", Output("buckets", (bucket,)), "/**"))),
               skip=Probe(("gcloud", "storage", "ls", "--all-versions",
                           Join(("gs://", Output("buckets", (bucket,)), "/**"))),
                          "fails", "the bucket is empty"),
               timeout_seconds=3600)
          for bucket in BUCKETS),
        Step("destroy", "terraform destroy",
             terraform(site, "destroy", *approval(site), *terraform_vars(site),
                 "-var=deletion_protection=false"), timeout_seconds=5400),
    ]
    return Plan("down", tuple(steps), site.terraform_dir, site.target)
