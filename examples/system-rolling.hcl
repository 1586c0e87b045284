# A system job rolled across the nodes two at a time.
# Validated but refused at register: `drover job validate` parses it as Nomad does and reports
# that drover's system scheduler replaces a changed system job on every node at once (rolling
# it max_parallel nodes at a time with stagger is not implemented); with `max_parallel = 0` it
# runs, replaced everywhere at once.

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
