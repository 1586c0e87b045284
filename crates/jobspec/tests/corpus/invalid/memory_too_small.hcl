job "tiny" {
  group "app" {
    task "server" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
      resources {
        cpu    = 0
        memory = 5
      }
    }
  }
}
