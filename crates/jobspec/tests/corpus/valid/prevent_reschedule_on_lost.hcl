# The older name of disconnect { replace = false } (it runs: docs/jobspec.md).
job "cache" {
  group "cache" {
    prevent_reschedule_on_lost = true

    task "redis" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["600"]
      }
    }
  }
}
