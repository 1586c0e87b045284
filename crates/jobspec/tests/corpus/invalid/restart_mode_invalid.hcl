job "restarts" {
  group "app" {
    restart {
      attempts = 2
      interval = "1s"
      delay    = "15s"
      mode     = "retry"
    }
    task "app" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}
