# A service rolled out one allocation at a time behind a canary.
# Validated but refused at register: `drover job validate` parses it as Nomad does and reports
# that rolling updates and canaries need deployments, which drover does not have yet; `drover
# job run` refuses it for that reason (with `max_parallel = 0` it runs, replaced all at once).

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
