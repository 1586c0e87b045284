job "rescheduled" {
  reschedule {
    delay          = "30s"
    delay_function = "exponential"
    max_delay      = "10m"
    unlimited      = true
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

  group "overrides" {
    reschedule {
      attempts       = 3
      interval       = "1h"
      delay          = "10s"
      delay_function = "constant"
      unlimited      = false
    }
    task "app" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
    }
  }
}
