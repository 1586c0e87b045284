job "flaky" {
  group "workers" {
    restart {
      delay          = "1m"
      backoff_factor = 0.5
      max_delay      = "30s"
    }

    task "worker" {
      driver = "raw_exec"

      config {
        command = "/usr/local/bin/worker"
      }
    }
  }
}
