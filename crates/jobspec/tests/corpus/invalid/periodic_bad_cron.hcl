job "periodic-bad" {
  type = "batch"
  periodic {
    cron  = "every day"
    crons = ["* * *"]
  }
  group "app" {
    task "app" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}
