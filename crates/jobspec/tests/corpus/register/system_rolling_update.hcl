# A system job rolled two nodes at a time: refused at register, as drover replaces a changed
# system job on every node at once. The refusal is located.

job "node-agent" {
  datacenters = ["*"]
  type        = "system"

  update {
    max_parallel = 2
    stagger      = "30s"
  }

  group "agent" {
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
