variable "env" {
  default = "staging"
}

locals {
  full_name = "${local.prefix}-${var.env}"
  prefix    = "billing"
  tags      = [local.full_name, var.env]
}

job "billing" {
  name = local.full_name

  group "app" {
    service {
      name     = local.full_name
      provider = "nomad"
      tags     = local.tags
    }
    task "app" {
      driver = "raw_exec"
      config {
        command = "/bin/echo"
        args    = [local.full_name]
      }
    }
  }
}
