job "broken" {
  group "app" {
    task "app" {
      driver = "raw_exec"
      config {
        command = "/bin/true
      }
    }
  }
}
