# drover's restart extension: exponential backoff between restarts, capped.
job "flaky" {
  group "workers" {
    restart {
      attempts       = 10
      interval       = "30m"
      delay          = "5s"
      mode           = "delay"
      backoff_factor = 2
      max_delay      = "5m"
    }

    task "worker" {
      driver = "raw_exec"

      restart {
        backoff_factor = 1.5
      }

      config {
        command = "/usr/local/bin/worker"
      }
    }
  }
}
