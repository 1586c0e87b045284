# A periodic batch job: every fifteen minutes, never two runs at once.
# Validated but refused at register: `drover job validate` parses it as Nomad does and reports
# that drover does not launch periodic jobs yet; `drover job run` refuses it for that reason.

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
