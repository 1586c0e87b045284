# Nomad's rules for max_run_duration: above zero, and only in batch and sysbatch jobs (a
# service's allocations are meant to keep running).
job "web" {
  group "api" {
    max_run_duration = "1h"

    task "api" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["600"]
      }
    }
  }

  group "zero" {
    max_run_duration = "0s"

    task "zero" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}
