# A periodic batch job: every fifteen minutes, never two runs at once.

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
