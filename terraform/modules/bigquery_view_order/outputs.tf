output "levels" {
  description = "Creation level (0 to 3) of each view, by view name."
  value       = local.levels

  precondition {
    condition     = jsonencode(local.pass_4) == jsonencode(local.pass_3)
    error_message = "Views nest more than 4 levels deep, or read each other in a cycle: ${jsonencode({ for name, level in local.pass_4 : name => local.reads[name] if level > 3 })}. modules/bigquery creates levels 0 to 3 only."
  }
}

output "reads" {
  description = "The other views each view reads, by view name."
  value       = local.reads
}
