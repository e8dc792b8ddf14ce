/**
 * An optional cluster for users without one: VPC-native on its own network,
 * Workload Identity, shielded nodes, REGULAR release channel, private nodes
 * (with Cloud NAT for image pulls) unless turned off, and one small CPU node pool
 * for the system workloads (Kueue, JobSet). TPU node pools are not declared here:
 * reconcile_slices creates and deletes them as JobSets come and go, running as
 * the node service account the team config names (slices.node_service_account;
 * this module's node_service_account_email is the natural one).
 */

locals {
  workload_pool = "${var.project_id}.svc.id.goog"
}

resource "google_compute_network" "network" {
  project                 = var.project_id
  name                    = var.network_name
  auto_create_subnetworks = false
  routing_mode            = "REGIONAL"
}

# Explicit and logged: nothing reaches the nodes from outside unless a rule of
# higher priority (GKE's own, for the control plane and the pods) allows it.
resource "google_compute_firewall" "deny_ingress" {
  project     = var.project_id
  name        = "${var.network_name}-deny-ingress"
  network     = google_compute_network.network.id
  description = "Deny all ingress not allowed by a higher-priority rule."
  direction   = "INGRESS"
  priority    = 65534

  deny {
    protocol = "all"
  }
  source_ranges = ["0.0.0.0/0"]

  log_config {
    metadata = "INCLUDE_ALL_METADATA"
  }
}

# With private nodes the control plane reaches the nodes only on what GKE's own
# rules open (443, 10250). Kueue and JobSet serve their admission webhooks on 9443
# (containerPort and the webhook Service's targetPort: kubernetes-sigs/kueue v0.10.1
# config/default/manager_webhook_patch.yaml, config/components/webhook/service.yaml;
# kubernetes-sigs/jobset v0.7.2, the same files): without this rule every create of
# a JobSet or a Kueue object times out in the webhook. Only from the control
# plane's range, only to the nodes' service account, only that port.
resource "google_compute_firewall" "control_plane_webhooks" {
  count = var.enable_private_nodes ? 1 : 0

  project     = var.project_id
  name        = "${var.network_name}-control-plane-webhooks"
  network     = google_compute_network.network.id
  description = "Admission webhooks (Kueue, JobSet: tcp 9443) from the control plane of ${var.name}."
  direction   = "INGRESS"
  priority    = 1000

  allow {
    protocol = "tcp"
    ports    = var.webhook_ports
  }
  source_ranges           = [var.master_ipv4_cidr_block]
  target_service_accounts = [google_service_account.nodes.email]

  log_config {
    metadata = "INCLUDE_ALL_METADATA"
  }
}

resource "google_compute_subnetwork" "subnet" {
  project                  = var.project_id
  name                     = "${var.network_name}-${var.region}"
  region                   = var.region
  network                  = google_compute_network.network.id
  ip_cidr_range            = var.subnet_cidr
  private_ip_google_access = true

  secondary_ip_range {
    range_name    = "pods"
    ip_cidr_range = var.pods_cidr
  }

  secondary_ip_range {
    range_name    = "services"
    ip_cidr_range = var.services_cidr
  }

  log_config {
    aggregation_interval = "INTERVAL_10_MIN"
    flow_sampling        = 0.5
    metadata             = "INCLUDE_ALL_METADATA"
  }
}

# The serving Gateway (class gke-l7-rilb, shared/serving/gateway.py) is a regional
# internal Application Load Balancer: its Envoy proxies run in a proxy-only subnet of
# the region, one per network and region, which must exist before the Gateway is
# programmed. No flow logs: the API refuses log_config on a REGIONAL_MANAGED_PROXY
# subnet.
resource "google_compute_subnetwork" "proxy_only" {
  project       = var.project_id
  name          = "${var.network_name}-${var.region}-proxy-only"
  region        = var.region
  network       = google_compute_network.network.id
  ip_cidr_range = var.proxy_only_cidr
  purpose       = "REGIONAL_MANAGED_PROXY"
  role          = "ACTIVE"
}

# The load balancer's proxies connect to the Triton pods themselves (container-native
# load balancing: the pods are its endpoints), from the proxy-only subnet; Google's
# health checkers probe the same port (HealthCheckPolicy /v2/health/ready) from
# Google's documented probe ranges. Without these the deny-all rule below keeps
# every backend unhealthy. Only to the nodes' service account, only Triton's HTTP port.
resource "google_compute_firewall" "gateway_proxies" {
  project     = var.project_id
  name        = "${var.network_name}-gateway-proxies"
  network     = google_compute_network.network.id
  description = "The serving Gateway's proxies (proxy-only subnet) to Triton's HTTP port on the pods of ${var.name}."
  direction   = "INGRESS"
  priority    = 1000

  allow {
    protocol = "tcp"
    ports    = var.gateway_backend_ports
  }
  source_ranges           = [var.proxy_only_cidr]
  target_service_accounts = [google_service_account.nodes.email]

  log_config {
    metadata = "INCLUDE_ALL_METADATA"
  }
}

resource "google_compute_firewall" "gateway_health_checks" {
  project     = var.project_id
  name        = "${var.network_name}-gateway-health-checks"
  network     = google_compute_network.network.id
  description = "Google Cloud health checks of the serving Gateway's backends (Triton's HTTP port) on ${var.name}."
  direction   = "INGRESS"
  priority    = 1000

  allow {
    protocol = "tcp"
    ports    = var.gateway_backend_ports
  }
  source_ranges           = var.health_check_ranges
  target_service_accounts = [google_service_account.nodes.email]

  log_config {
    metadata = "INCLUDE_ALL_METADATA"
  }
}

# Private nodes have no external address: NAT lets them pull public images.
resource "google_compute_router" "router" {
  count = var.enable_private_nodes ? 1 : 0

  project = var.project_id
  name    = "${var.network_name}-router"
  region  = var.region
  network = google_compute_network.network.id
}

resource "google_compute_router_nat" "nat" {
  count = var.enable_private_nodes ? 1 : 0

  project                            = var.project_id
  name                               = "${var.network_name}-nat"
  region                             = var.region
  router                             = google_compute_router.router[0].name
  nat_ip_allocate_option             = "AUTO_ONLY"
  source_subnetwork_ip_ranges_to_nat = "ALL_SUBNETWORKS_ALL_IP_RANGES"

  log_config {
    enable = true
    filter = "ERRORS_ONLY"
  }
}

# The nodes' identity, holding the one role GKE documents as the minimum for a
# node service account ("Configure GKE node service accounts":
# roles/container.defaultNodeServiceAccount on the project; it carries the log,
# metric and metadata writes GKE's system agents make).
resource "google_service_account" "nodes" {
  project      = var.project_id
  account_id   = var.node_service_account_id
  display_name = "accelops GKE nodes"
  description  = "Node service account of ${var.name} (the CPU pool, and TPU pools when the team config names it): GKE's minimum node role only."
}

resource "google_project_iam_member" "nodes" {
  project = var.project_id
  role    = "roles/container.defaultNodeServiceAccount"
  member  = "serviceAccount:${google_service_account.nodes.email}"
}

resource "google_container_cluster" "cluster" {
  #checkov:skip=CKV_GCP_24:PodSecurityPolicy was removed in Kubernetes 1.25; the team namespaces carry Pod Security Admission labels instead (manifests/).
  #checkov:skip=CKV_GCP_66:Binary Authorization needs an attestor policy per organisation; enable it with var.binary_authorization once one exists.
  project             = var.project_id
  name                = var.name
  location            = var.location
  description         = "accelops cluster: TPU node pools are created by reconcile_slices."
  network             = google_compute_network.network.id
  subnetwork          = google_compute_subnetwork.subnet.id
  deletion_protection = var.deletion_protection
  resource_labels     = var.labels

  # Node pools are managed separately (google_container_node_pool below).
  remove_default_node_pool = true
  initial_node_count       = 1

  # The default pool exists briefly before it is removed; it gets the same hardening.
  node_config {
    service_account = google_service_account.nodes.email
    oauth_scopes    = ["https://www.googleapis.com/auth/cloud-platform"]
    image_type      = "COS_CONTAINERD"
    metadata = {
      disable-legacy-endpoints = "true"
    }

    shielded_instance_config {
      enable_secure_boot          = true
      enable_integrity_monitoring = true
    }

    workload_metadata_config {
      mode = "GKE_METADATA"
    }
  }

  networking_mode = "VPC_NATIVE"
  ip_allocation_policy {
    cluster_secondary_range_name  = "pods"
    services_secondary_range_name = "services"
  }

  datapath_provider = "ADVANCED_DATAPATH"
  network_policy {
    enabled = false
  }

  workload_identity_config {
    workload_pool = local.workload_pool
  }

  release_channel {
    channel = var.release_channel
  }

  # GKE installs the Gateway API's standard-channel CRDs and runs its Gateway
  # controller: the serving Gateway and every model's HTTPRoute need both.
  gateway_api_config {
    channel = "CHANNEL_STANDARD"
  }

  enable_shielded_nodes       = true
  enable_legacy_abac          = false
  enable_intranode_visibility = true
  logging_service             = "logging.googleapis.com/kubernetes"
  monitoring_service          = "monitoring.googleapis.com/kubernetes"

  master_auth {
    client_certificate_config {
      issue_client_certificate = false
    }
  }

  dynamic "private_cluster_config" {
    for_each = var.enable_private_nodes ? [1] : []
    content {
      enable_private_nodes    = true
      enable_private_endpoint = false
      master_ipv4_cidr_block  = var.master_ipv4_cidr_block
    }
  }

  # The functions reach the Kubernetes API from Cloud Run (Google Cloud addresses).
  master_authorized_networks_config {
    gcp_public_cidrs_access_enabled = var.gcp_public_cidrs_access_enabled

    dynamic "cidr_blocks" {
      for_each = var.master_authorized_networks
      content {
        cidr_block   = cidr_blocks.value.cidr_block
        display_name = cidr_blocks.value.display_name
      }
    }
  }

  dynamic "authenticator_groups_config" {
    for_each = var.security_group == null ? [] : [var.security_group]
    content {
      security_group = authenticator_groups_config.value
    }
  }

  binary_authorization {
    evaluation_mode = var.binary_authorization ? "PROJECT_SINGLETON_POLICY_ENFORCE" : "DISABLED"
  }

  addons_config {
    http_load_balancing {
      disabled = false
    }
    horizontal_pod_autoscaling {
      disabled = false
    }
  }

  lifecycle {
    # The default pool's node_config only matters for the moment it exists.
    ignore_changes = [node_config]
  }
}

resource "google_container_node_pool" "system" {
  project  = var.project_id
  name     = "system"
  location = var.location
  cluster  = google_container_cluster.cluster.name

  autoscaling {
    min_node_count = var.min_nodes
    max_node_count = var.max_nodes
  }

  management {
    auto_repair  = true
    auto_upgrade = true
  }

  node_config {
    machine_type    = var.machine_type
    disk_size_gb    = var.disk_size_gb
    disk_type       = "pd-balanced"
    image_type      = "COS_CONTAINERD"
    service_account = google_service_account.nodes.email
    oauth_scopes    = ["https://www.googleapis.com/auth/cloud-platform"]
    labels          = var.labels
    metadata = {
      disable-legacy-endpoints = "true"
    }

    shielded_instance_config {
      enable_secure_boot          = true
      enable_integrity_monitoring = true
    }

    workload_metadata_config {
      mode = "GKE_METADATA"
    }
  }

  depends_on = [google_project_iam_member.nodes]
}
