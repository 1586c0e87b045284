# A system job rolled across the nodes two at a time: after a change, two nodes get the new
# version, and every 30 seconds a rolling-update evaluation replaces the next two, as Nomad's
# system scheduler does with a job-level update block (in-place changes apply everywhere at
# once).

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
