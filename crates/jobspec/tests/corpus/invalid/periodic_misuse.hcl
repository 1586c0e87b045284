job "periodic-service" {
  type = "service"
  periodic {
    prohibit_overlap = true
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
