variable "project_id" {
  type        = string
  description = "The project of the cluster and its network."
}

variable "name" {
  type        = string
  description = "Cluster name (ACCELOPS_CLUSTER)."
}

variable "location" {
  type        = string
  description = "Cluster location (ACCELOPS_LOCATION): a region for a regional cluster, a zone for a zonal one. TPU node pools need a zone that offers the TPU types the teams use."
}

variable "region" {
  type        = string
  description = "Region of the network's subnet (the cluster's region, or the region of its zone)."
}

variable "network_name" {
  type        = string
  description = "Name of the VPC network created for the cluster (also prefixes its subnet, router and NAT)."
  default     = "accelops"
}

variable "subnet_cidr" {
  type        = string
  description = "Primary range of the subnet (nodes)."
  default     = "10.10.0.0/20"
}

variable "pods_cidr" {
  type        = string
  description = "Secondary range for pods."
  default     = "10.16.0.0/14"
}

variable "services_cidr" {
  type        = string
  description = "Secondary range for services."
  default     = "10.20.0.0/20"
}

variable "proxy_only_cidr" {
  type        = string
  description = "Range of the proxy-only subnet the serving Gateway's regional internal Application Load Balancer needs (Google recommends a /23); it must not overlap the other ranges."
  default     = "10.10.16.0/23"
}

variable "gateway_backend_ports" {
  type        = list(string)
  description = "Pod ports the serving Gateway's proxies and health checks may reach: Triton's HTTP port (shared/serving/gateway.py ROUTE_PORT)."
  default     = ["8000"]
}

variable "health_check_ranges" {
  type        = list(string)
  description = "Google Cloud's health-check probe ranges for Application Load Balancers."
  default     = ["35.191.0.0/16", "130.211.0.0/22"]
}

variable "release_channel" {
  type        = string
  description = "GKE release channel."
  default     = "REGULAR"

  validation {
    condition     = contains(["RAPID", "REGULAR", "STABLE"], var.release_channel)
    error_message = "release_channel must be RAPID, REGULAR or STABLE."
  }
}

variable "enable_private_nodes" {
  type        = bool
  description = "Nodes without external addresses (a Cloud Router and NAT are created for egress)."
  default     = true
}

variable "master_ipv4_cidr_block" {
  type        = string
  description = "The /28 range of the control plane's private endpoint (private nodes only)."
  default     = "172.16.0.0/28"
}

variable "webhook_ports" {
  type        = list(string)
  description = "Ports the control plane may reach the nodes on besides GKE's own (private nodes): the admission webhooks of Kueue and JobSet serve on 9443."
  default     = ["9443"]
}

variable "gcp_public_cidrs_access_enabled" {
  type        = bool
  description = "Let Google Cloud addresses reach the control plane: the functions call the Kubernetes API from Cloud Run. Turn off only with a VPC connector and a private endpoint."
  default     = true
}

variable "master_authorized_networks" {
  type = list(object({
    cidr_block   = string
    display_name = string
  }))
  description = "Further networks allowed to reach the control plane (e.g. an office or a CI runner range)."
  default     = []
}

variable "security_group" {
  type        = string
  description = "Google Groups for RBAC: the gke-security-groups@<domain> group; null leaves it off."
  default     = null
}

variable "binary_authorization" {
  type        = bool
  description = "Enforce the project's Binary Authorization policy on the cluster."
  default     = false
}

variable "node_service_account_id" {
  type        = string
  description = "Account id of the node service account created for the cluster."
  default     = "accelops-gke-nodes"
}

variable "machine_type" {
  type        = string
  description = "Machine type of the CPU node pool (system workloads: Kueue, JobSet, kube-system)."
  default     = "e2-standard-4"
}

variable "min_nodes" {
  type        = number
  description = "Minimum nodes of the CPU pool (per zone for a regional cluster)."
  default     = 1
}

variable "max_nodes" {
  type        = number
  description = "Maximum nodes of the CPU pool (per zone for a regional cluster)."
  default     = 3
}

variable "disk_size_gb" {
  type        = number
  description = "Boot disk size of the CPU pool's nodes."
  default     = 50
}

variable "deletion_protection" {
  type        = bool
  description = "Refuse to destroy the cluster."
  default     = true
}

variable "labels" {
  type        = map(string)
  description = "Labels for the cluster and its nodes."
  default     = { app = "accelops" }
}
