job "reports" {
  type = "batch"

  periodic {
    crons     = ["0 9 * * 1-5", "0 12 * * 6"]
    time_zone = "Europe/Paris"
    enabled   = true
  }

  group "report" {
    task "report" {
      driver = "raw_exec"
      config {
        command = "/bin/date"
      }
    }
  }
}
