"""The order of a first deployment, as a plan: ``accelops deploy up``.

Each stage makes what the next one uses, so nothing is pushed into a repository or
bucket that does not exist yet, and nothing is applied before the controllers that
admit it answer:

1. Terraform's state bucket (created when missing), ``terraform init``, and a first
   targeted apply of what later steps push into: the project's APIs and service agents
   (``module.project_services``), the Artifact Registry repository and the buckets
   (Terraform updates the outputs that depend only on targeted resources, so ``images``
   and ``buckets`` are readable after it);
2. the service images, built from ``services/<name>/Dockerfile`` by Cloud Build
   (``services/cloudbuild.yaml``; Cloud Shell and CI runners rarely have Docker) or by a
   local Docker; an image already pushed is kept (tags are immutable);
3. the full ``terraform apply``, which also builds the functions' source archive from
   the repository and uploads it under its content hash (``modules/function_source``);
4. cluster credentials, in a kubeconfig of this deployment's own (``--work-dir``), so
   a resumed run never acts on whatever cluster kubectl's current context names;
5. the Kueue and JobSet controllers, then a wait until their Deployments are
   Available and until their admission webhooks answer: both are ``failurePolicy:
   Fail``, so until then every ClusterQueue, ResourceFlavor or JobSet is refused with
   "failed calling webhook" (a server-side dry run of the overlay, repeated);
6. the rendered overlay, applied;
7. the definition's retry policy on the subscriptions Eventarc creates;
8. ``accelops doctor``.

``shared/deployment/down.py`` undoes it.

Pure: the CLI reads files and the environment, this module only decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from shared.deployment import system
from shared.deployment.steps import Arg, Join, Output, Plan, Probe, Repeat, Step

__all__ = ["CONTROLLERS", "CONTROLLERS_DIR", "WEBHOOKS_NOT_READY", "Kubernetes", "Site",
           "approval", "credentials_step", "init_step", "kube_env", "render_step", "sandbox_plan",
           "terraform", "terraform_vars", "up_plan"]

CONTROLLERS_DIR = "manifests/controllers"
# The name the load generator's image has on a laptop (services/loadgen/Dockerfile).
SANDBOX_LOCUST_IMAGE = "loadgen"
# The controllers' Deployments as the pinned release manifests name them
# (kueue v0.10.1 config/default: namespace kueue-system, namePrefix kueue-, and
# config/components/manager/manager.yaml's controller-manager; jobset v0.7.2 likewise
# with jobset-system / jobset-).
CONTROLLERS = (("kueue", "kueue-system", "kueue-controller-manager"),
               ("jobset", "jobset-system", "jobset-controller-manager"))
# What the API server and kubectl say while the controllers cannot admit yet: the
# webhook call fails (k8s.io/apiserver pkg/util/webhook/error.go "failed calling
# webhook %q: %v", e.g. no endpoints, a connection refused, a CA not injected yet), or
# the CRDs are not established (kubectl: "ensure CRDs are installed first").
WEBHOOKS_NOT_READY = ("failed calling webhook|no endpoints available for service"
                      "|ensure CRDs are installed first")


@dataclass(frozen=True, slots=True)
class Kubernetes:
    """Where and how the Kubernetes half runs."""

    kubeconfig: str
    overlay: str
    controllers_timeout_seconds: int = 300
    webhook_attempts: int = 60
    webhook_interval_seconds: float = 5.0


@dataclass(frozen=True, slots=True)
class Site:
    """A Google Cloud project to deploy to, and how. Paths are as printed: relative
    to the repository root (where the steps run) when inside it."""

    project: str
    config: str
    # The same file as Terraform reads it: relative to terraform_dir (-chdir).
    terraform_config: str
    terraform_dir: str
    work_dir: str
    state_bucket: str
    state_location: str
    kubernetes: Kubernetes
    builder: Literal["cloudbuild", "docker"] = "cloudbuild"
    revision: str = ""
    auto_approve: bool = False

    @property
    def target(self) -> str:
        return f"project {self.project}, config {self.config}"


# ------------------------------------------------------------------------ pieces
def terraform(site: Site, *args: str) -> tuple[str, ...]:
    return ("terraform", f"-chdir={site.terraform_dir}", *args)


def terraform_vars(site: Site) -> tuple[str, ...]:
    """The values every apply and destroy passes, so the command line, not a stale
    terraform.tfvars, says which project and config are deployed."""
    return (f"-var=project_id={site.project}", f"-var=config_file={site.terraform_config}")


def approval(site: Site) -> tuple[str, ...]:
    # Without it Terraform shows its plan and asks on the terminal (the runner passes
    # stdin through); -input=false alone would make it refuse to apply.
    return ("-input=false", "-auto-approve") if site.auto_approve else ()


def kube_env(kubernetes: Kubernetes) -> tuple[tuple[str, Arg], ...]:
    return (("KUBECONFIG", kubernetes.kubeconfig),)


def _state_steps(site: Site) -> list[Step]:
    bucket = f"gs://{site.state_bucket}"
    return [
        Step("state-bucket", "the bucket for Terraform's state (created when missing)",
             ("gcloud", "storage", "buckets", "create", bucket, f"--project={site.project}",
              f"--location={site.state_location}", "--uniform-bucket-level-access",
              "--public-access-prevention"),
             skip=Probe(("gcloud", "storage", "buckets", "describe", bucket,
                         f"--project={site.project}"), "succeeds", "the bucket exists"),
             timeout_seconds=300),
        Step("state-versioning", "keep every version of the state",
             ("gcloud", "storage", "buckets", "update", bucket, "--versioning"),
             timeout_seconds=300),
        init_step(site),
    ]


def init_step(site: Site) -> Step:
    return Step("init", "terraform init, the state in that bucket",
                terraform(site, "init", "-input=false",
                          f"-backend-config=bucket={site.state_bucket}"),
                timeout_seconds=900)


def _foundation(site: Site) -> Step:
    targets = ("-target=module.project_services", "-target=module.artifact_registry",
               "-target=module.buckets")
    return Step("foundation", "the APIs and service agents, the image repository and the "
                "buckets: what the next steps push into (a targeted apply)",
                terraform(site, "apply", *approval(site), *targets, *terraform_vars(site)),
                timeout_seconds=3600)


def _images(site: Site) -> list[Step]:
    steps: list[Step] = []
    if site.builder == "docker":
        steps.append(Step("registry-auth", "let docker push to the image repository",
                          ("gcloud", "auth", "configure-docker",
                           Output("image_repository", host=True), "--quiet"),
                          timeout_seconds=300))
    for service in system.SERVICES:
        # Terraform's image for the service: <repository>/<service>:<image_tags[service]>.
        image = Output("images", (service.name,))
        pushed = Probe(("gcloud", "artifacts", "docker", "images", "describe", image),
                       "succeeds", "the image is pushed (tags are immutable: set a new "
                       "image_tags entry to ship another)")
        if site.builder == "cloudbuild":
            steps.append(Step(
                f"image-{service.name}", f"build and push the {service.name} image "
                "with Cloud Build",
                ("gcloud", "builds", "submit", f"--project={site.project}",
                 "--config=services/cloudbuild.yaml", "--substitutions",
                 Join((f"_SERVICE={service.name},_REVISION={site.revision},_IMAGE=", image)),
                 "."),
                skip=pushed, timeout_seconds=3600))
            continue
        steps += [
            Step(f"image-{service.name}", f"build the {service.name} image with docker",
                 ("docker", "build", "-f", f"services/{service.name}/Dockerfile",
                  "--build-arg", f"ACCELOPS_LOADGEN_REVISION={site.revision}", "-t", image,
                  "."),
                 skip=pushed, timeout_seconds=3600),
            Step(f"push-{service.name}", f"push the {service.name} image",
                 ("docker", "push", image), skip=pushed, timeout_seconds=1800)]
    return steps


def credentials_step(site: Site) -> Step:
    return Step("credentials", "credentials for the cluster, in this deployment's own "
                "kubeconfig",
                ("gcloud", "container", "clusters", "get-credentials",
                 Output("cluster", ("name",)), "--location", Output("cluster", ("location",)),
                 f"--project={site.project}"),
                env=kube_env(site.kubernetes), timeout_seconds=300)


def render_step(k: Kubernetes, config: str, project: str, sax_bucket: Arg | None,
                title: str = "render the overlay from the team config",
                locust_image: Arg | None = None) -> Step:
    """``accelops manifests render`` of the team config into ``k.overlay``; with
    ``locust_image``, the load generator's master and workers too."""
    render: tuple[Arg, ...] = ("accelops", "manifests", "render", "--config", config,
                               "--project", project)
    if sax_bucket is not None:
        render += ("--sax-bucket", sax_bucket)
    if locust_image is not None:
        render += ("--locust-image", locust_image)
    return Step("overlay-render", title, (*render, "--out", k.overlay), timeout_seconds=120)


def _kubernetes(k: Kubernetes, config: str, project: str,
                sax_bucket: Arg | None, locust_image: Arg) -> list[Step]:
    """Controllers Available, overlay rendered, webhooks answering, overlay applied."""
    env = kube_env(k)
    steps = [Step(f"{name}-ready", f"wait until {deployment} is Available",
                  ("kubectl", "wait", "--for=condition=Available",
                   f"--timeout={k.controllers_timeout_seconds}s",
                   f"deployment/{deployment}", "-n", namespace),
                  env=env, timeout_seconds=k.controllers_timeout_seconds + 60)
             for name, namespace, deployment in CONTROLLERS]
    return [
        *steps,
        render_step(k, config, project, sax_bucket, locust_image=locust_image),
        Step("webhooks", "wait until Kueue's and JobSet's webhooks admit the overlay "
             "(a server-side dry run, repeated)",
             ("kubectl", "apply", "--server-side", "--dry-run=server", "-k", k.overlay),
             env=env,
             repeat=Repeat(WEBHOOKS_NOT_READY, k.webhook_attempts, k.webhook_interval_seconds,
                           "Kueue's and JobSet's admission webhooks",
                           "the controllers are Available but the API server cannot call "
                           "their webhooks: on a private cluster the control plane needs a "
                           "firewall rule to the nodes on tcp 9443, both webhooks' port"),
             # The attempts' 5 minutes of pauses, plus the attempts themselves.
             timeout_seconds=k.webhook_attempts * k.webhook_interval_seconds + 300,
             note="Only webhook and CRD errors hold it; others (a namespace a dry run "
                  "cannot create) are the apply's to report."),
        Step("overlay", "apply the overlay: team namespaces, queues, RBAC, the serving "
             "namespace and Sax cell, the load generator's master and workers",
             ("kubectl", "apply", "--server-side", "-k", k.overlay), env=env,
             timeout_seconds=600),
    ]


def _eventarc(site: Site) -> list[Step]:
    """Eventarc creates its trigger's subscription with Pub/Sub's retry defaults and no
    dead letters: give it the definition's policy (the pubsub route has none)."""
    steps = []
    for spec in system.FUNCTIONS:
        if spec.storage_trigger is None:
            continue
        r = spec.retry
        steps.append(Step(
            f"eventarc-{spec.name}", f"the definition's retry policy on the subscription "
            f"Eventarc created for {spec.name}",
            ("gcloud", "pubsub", "subscriptions", "update",
             Output("model_uploads", ("subscriptions", spec.name)), f"--project={site.project}",
             f"--ack-deadline={r.ack_deadline_seconds}",
             f"--min-retry-delay={r.minimum_backoff_seconds}s",
             f"--max-retry-delay={r.maximum_backoff_seconds}s",
             Join(("--dead-letter-topic=", Output("topic_ids", (spec.dead_letter_topic,)))),
             f"--max-delivery-attempts={r.max_delivery_attempts}"),
            optional=True, timeout_seconds=300,
            note="Only on the eventarc upload route (model_upload_route); skipped on "
                 "the pubsub route."))
    return steps


# ------------------------------------------------------------------------ plans
def up_plan(site: Site) -> Plan:
    """The whole first deployment (and every later one: each step is idempotent)."""
    k = site.kubernetes
    steps = [
        *_state_steps(site),
        _foundation(site),
        *_images(site),
        Step("apply", "everything else: functions (their source archive built from the "
             "repository and uploaded), topics, subscriptions, services, scheduler, "
             "BigQuery, identities, the cluster when created here",
             terraform(site, "apply", *approval(site), *terraform_vars(site)),
             timeout_seconds=5400),
        credentials_step(site),
        Step("controllers", "the Kueue and JobSet controllers (pinned releases)",
             ("kubectl", "apply", "--server-side", "-k", CONTROLLERS_DIR), env=kube_env(k),
             timeout_seconds=600),
        # The load generator's image: the loadgen service's, built by the image steps.
        *_kubernetes(k, site.config, site.project, Output("buckets", ("sax",)),
                     Output("images", ("loadgen",))),
        *_eventarc(site),
        Step("doctor", "check the deployment from outside",
             ("accelops", "doctor", "--config", site.config, "--project", site.project),
             env=kube_env(k), timeout_seconds=600),
    ]
    return Plan("up", tuple(steps), site.terraform_dir, site.target)


def sandbox_plan(state_dir: str, config: str, project: str, k: Kubernetes) -> Plan:
    """The Kubernetes half of ``up`` on the local sandbox, whose own simulated
    controllers stand where ``manifests/controllers`` would be applied."""
    # The sandbox's kubelet runs the load generator's pods as pretend servers: the
    # image is only a name there (sandbox/cluster/runtime.py).
    steps = [*_kubernetes(k, config, project, None, SANDBOX_LOCUST_IMAGE),
             Step("doctor", "check the sandbox from outside",
                  ("accelops", "doctor", "--state-dir", state_dir), timeout_seconds=600)]
    return Plan("up", tuple(steps), None, f"the sandbox in {state_dir}")
