# A group's update block takes every field it leaves out from the job's, as Nomad's API
# merges them: the group "canary" gets max_parallel 2, auto_revert and min_healthy_time 5s.
job "merged" {
  update {
    max_parallel     = 2
    auto_revert      = true
    min_healthy_time = "5s"
  }

  group "canary" {
    update {
      canary = 1
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
