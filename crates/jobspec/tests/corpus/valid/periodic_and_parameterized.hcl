# A periodic parameterized job: each dispatched child is a periodic job of its own.
job "report" {
  type = "batch"

  periodic {
    crons = ["0 3 * * *"]
  }

  parameterized {
    payload = "optional"
  }

  group "report" {
    task "run" {
      driver = "raw_exec"

      config {
        command = "/bin/true"
      }
    }
  }
}
