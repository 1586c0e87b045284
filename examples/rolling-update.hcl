# A service rolled out one allocation at a time behind a canary.
# `drover job run` places two allocations (the first version needs no canary). Change the
# task (its args, an env var) and run it again: one canary starts beside the two old
# allocations and the deployment waits ("Deployment is running but requires manual
# promotion"); `drover deployment promote <id>` (or `drover job promote rolling`) replaces the
# old ones one at a time as the new ones turn healthy.

job "rolling" {
  datacenters = ["*"]
  type        = "service"

  update {
    max_parallel = 1
    canary       = 1
  }

  group "web" {
    count = 2

    task "serve" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "while true; do sleep 60; done"]
      }

      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
