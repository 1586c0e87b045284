variable "datacenters" {
  type    = list(string)
  default = ["dc1"]
}

variable "count" {
  type    = number
  default = 2
}

variable "debug" {
  type    = bool
  default = false
}

variable "labels" {
  type = map(string)
  default = {
    team = "search"
    tier = "backend"
  }
}

variables {
  command = "/bin/sleep"
}

job "typed" {
  datacenters = var.datacenters
  meta        = var.labels

  group "app" {
    count = var.count
    task "app" {
      driver = "raw_exec"
      config {
        command = var.command
        args    = [var.debug ? "1" : "600"]
      }
      env {
        DEBUG = var.debug
      }
    }
  }
}
