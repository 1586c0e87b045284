variable "name" {
  default = "Search API"
}

variable "ports" {
  type    = list(number)
  default = [80, 443]
}

locals {
  slug = lower(replace(var.name, " ", "-"))
}

job "functions" {
  name = upper(local.slug)
  meta {
    joined  = join(",", var.ports)
    count   = length(var.ports)
    label   = format("%s-%d", local.slug, 7)
    trimmed = trimspace("  padded  ")
    merged  = lookup(merge({ a = "1" }, { b = "2" }), "b", "none")
    first   = coalesce("", "fallback")
    biggest = max(3, 9, 4)
    parts   = split("-", local.slug)[1]
  }
  group "app" {
    task "app" {
      driver = "raw_exec"
      config {
        command = "/bin/echo"
        args    = concat(["hello"], [for port in var.ports : tostring(port)])
      }
    }
  }
}
