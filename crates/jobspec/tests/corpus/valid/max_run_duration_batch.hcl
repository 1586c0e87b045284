# A batch group with a run time limit (it runs: docs/jobspec.md).
job "report" {
  type = "batch"

  group "build" {
    max_run_duration = "30m"

    task "build" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["60"]
      }
    }
  }
}
