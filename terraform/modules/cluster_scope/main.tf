/**
 * Which clusters the functions' GKE roles hold on, and as which service account
 * the TPU node pools they create run. Pure computation: no provider, so its tests
 * run it with the real terraform binary offline (tests/unit/test_terraform_scope.py).
 *
 * GKE permissions are granted on the project; container.clusters.update, which
 * every node-pool change needs, also allows every other change to any cluster of
 * the project. modules/iam therefore binds the definition's grants of scope
 * "cluster" and "scheduled_clusters" once per cluster, with the IAM condition
 * below. GKE recognizes resource attributes in conditions (IAM docs "Resource
 * attributes for IAM Conditions": container.googleapis.com); a request about any
 * other kind of resource (an operation: container.operations.get) carries another
 * resource type, so the condition lets those through and holds cluster and
 * node-pool requests to the named cluster. GKE's API names a cluster
 * projects/P/locations/L/clusters/C and, through its older zonal methods,
 * projects/P/zones/L/clusters/C: both are accepted, with the names below them
 * (its node pools).
 *
 * A node pool created with node_config.service_account = X needs
 * iam.serviceAccounts.actAs on X; one created without runs as the Compute Engine
 * default service account, on which the functions hold nothing, and fails 403.
 * The team config must therefore name its slices.node_service_account, and
 * modules/grants grants roles/iam.serviceAccountUser on exactly that account.
 */

locals {
  cluster = "projects/${var.project_id}/locations/${var.cluster_location}/clusters/${var.cluster_name}"

  # pool_schedule acts on pool_schedule.clusters when the config lists any, else on
  # ACCELOPS_CLUSTER. A binding in this project holds for this project's clusters only.
  listed             = distinct(var.pool_schedule_clusters)
  own_prefix         = "projects/${var.project_id}/"
  scheduled_clusters = length(local.listed) > 0 ? [for c in local.listed : c if startswith(c, local.own_prefix)] : [local.cluster]
  foreign_clusters   = [for c in local.listed : c if !startswith(c, local.own_prefix)]

  clusters = {
    cluster            = [local.cluster]
    scheduled_clusters = local.scheduled_clusters
  }

  other_resources = "(resource.type != \"container.googleapis.com/Cluster\" && resource.type != \"container.googleapis.com/NodePool\")"

  # projects/P/locations/L/clusters/C -> [P, L, C]
  parts = {
    for path in distinct(concat([local.cluster], local.scheduled_clusters)) :
    path => [split("/", path)[1], split("/", path)[3], split("/", path)[5]]
  }

  conditions = {
    for path, p in local.parts : path => {
      title       = substr("accelops cluster ${p[2]} in ${p[1]}", 0, 100)
      description = "Only on cluster ${path} and its node pools (GKE permissions are granted on the project)."
      expression = join(" || ", concat([local.other_resources], flatten([
        for name in [path, "projects/${p[0]}/zones/${p[1]}/clusters/${p[2]}"] :
        ["resource.name == \"${name}\"", "resource.name.startsWith(\"${name}/\")"]
      ])))
    }
  }
}
