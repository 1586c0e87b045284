# Nomad's default update strategy (what its API gives every service job) and all_at_once are
# registered, with a warning each saying how drover runs them. max_parallel = 0 is exactly
# what drover does, so it needs no warning.
job "defaults" {
  type        = "service"
  all_at_once = true

  update {
    max_parallel     = 1
    health_check     = "checks"
    min_healthy_time = "10s"
  }

  group "a" {
    task "t" {
      driver = "raw_exec"

      config {
        command = "/bin/sleep"
        args    = ["600"]
      }
    }
  }

  group "b" {
    update {
      max_parallel = 0
    }

    task "t" {
      driver = "raw_exec"

      config {
        command = "/bin/sleep"
        args    = ["600"]
      }
    }
  }
}
