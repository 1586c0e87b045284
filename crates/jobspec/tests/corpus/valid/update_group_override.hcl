job "rolling" {
  update {
    max_parallel = 3
    canary       = 0
  }

  group "inherits" {
    task "app" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
    }
  }

  group "own" {
    update {
      max_parallel     = 1
      canary           = 2
      min_healthy_time = "30s"
      health_check     = "task_states"
    }
    shutdown_delay = "10s"
    max_client_disconnect = "1h"
    task "app" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
    }
  }
}
