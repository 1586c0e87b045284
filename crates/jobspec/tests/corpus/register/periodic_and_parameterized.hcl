# A periodic job is stored but never launched, and a parameterized one can never be
# dispatched: both are refused at register.
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
