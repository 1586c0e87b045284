# A system job rolls by its job-level update block alone (max_parallel and stagger), as Nomad
# up to 1.10 does: that block runs. A group's own rolling settings, canaries and health settings
# would not be applied, so they are refused at register. The refusals are located.

job "node-agent" {
  datacenters = ["*"]
  type        = "system"

  update {
    max_parallel = 2
    stagger      = "30s"
  }

  group "agent" {
    update {
      max_parallel     = 1
      canary           = 1
      min_healthy_time = "20s"
    }

    task "agent" {
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
