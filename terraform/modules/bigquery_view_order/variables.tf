variable "views" {
  type = list(object({
    name  = string
    query = string
  }))
  description = "Each view's name and query text (the template is enough: only the view names it reads matter)."

  validation {
    condition     = length(distinct([for v in var.views : v.name])) == length(var.views)
    error_message = "View names must be unique."
  }
}
