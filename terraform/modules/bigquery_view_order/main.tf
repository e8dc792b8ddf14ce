/**
 * The order BigQuery needs views created in: a view can be created only after the
 * tables and views its query reads. Each view's level is 0 when it reads no other
 * view, else one more than the deepest view it reads; views of one level are
 * created together, after every lower level.
 *
 * A query reads view V when it names it as `...V` (backquoted, as the generated
 * templates do). Levels are found by relaxation: pass k gives min(level, k), so
 * when pass 4 equals pass 3 every level is at most 3 (modules/bigquery creates
 * levels 0 to 3); a deeper chain or a cycle fails the output's precondition.
 */

locals {
  reads = {
    for v in var.views : v.name => [
      for other in var.views : other.name
      if other.name != v.name && strcontains(v.query, ".${other.name}`")
    ]
  }

  pass_1 = { for name, reads in local.reads : name => min(length(reads), 1) }
  pass_2 = { for name, reads in local.reads : name => max(concat([for r in reads : local.pass_1[r]], [-1])...) + 1 }
  pass_3 = { for name, reads in local.reads : name => max(concat([for r in reads : local.pass_2[r]], [-1])...) + 1 }
  pass_4 = { for name, reads in local.reads : name => max(concat([for r in reads : local.pass_3[r]], [-1])...) + 1 }

  levels = local.pass_4
}
