# A batch job: counts to ten, writes a report into the shared alloc directory, and exits 0.

job "report" {
  datacenters = ["*"]
  type        = "batch"

  group "work" {
    count = 1

    restart {
      attempts = 1
      interval = "1h"
      delay    = "5s"
      mode     = "fail"
    }

    reschedule {
      attempts  = 2
      interval  = "1h"
      delay     = "10s"
      unlimited = false
    }

    task "count" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args = [
          "-c",
          "for i in $(seq 1 10); do echo \"step $i\"; sleep 1; done; date > \"$NOMAD_ALLOC_DIR/data/report.txt\"",
        ]
      }

      resources {
        cpu    = 50
        memory = 32
      }

      logs {
        max_files     = 3
        max_file_size = 5
      }
    }
  }
}
