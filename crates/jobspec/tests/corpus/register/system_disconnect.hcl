# A system job whose group waits for disconnected clients: refused at register, as drover's
# system scheduler marks a disconnected node's allocations lost at once (service and batch
# groups run it). The refusal is located.

job "node-agent" {
  datacenters = ["*"]
  type        = "system"

  group "agent" {
    disconnect {
      lost_after = "1h"
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
