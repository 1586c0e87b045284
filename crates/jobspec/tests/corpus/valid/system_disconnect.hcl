# A system job whose group waits for disconnected clients: its allocation on a node that stops
# heartbeating turns unknown and stays on the node for up to an hour, then is lost; a client
# back before then keeps it.

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
