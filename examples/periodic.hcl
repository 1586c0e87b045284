# A periodic batch job: every fifteen minutes, never two runs at once.
# `drover job run examples/periodic.hcl` registers it; the server launches a child
# `cleanup-tmp/periodic-<unix seconds>` at every quarter hour (UTC), and `drover job status
# cleanup-tmp` shows the next launch and the children. `drover job periodic force cleanup-tmp`
# launches one now.

job "cleanup-tmp" {
  datacenters = ["*"]
  type        = "batch"

  periodic {
    crons            = ["*/15 * * * *"]
    prohibit_overlap = true
    time_zone        = "UTC"
  }

  group "cleanup" {
    task "sweep" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "find \"$NOMAD_ALLOC_DIR/tmp\" -type f -mmin +60 -print -delete"]
      }

      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
