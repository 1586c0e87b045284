job "has space" {
  type     = "cron"
  priority = 500
  group "app" {
    task "alloc" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}
