job "periodic-bad" {
  type = "batch"
  periodic {
    cron  = "every day"
    crons = ["* * *", "99 * * * *", "0 0 * * 1-5 2030", "0 0 * * * 1-5"]
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
