job "typo" {
  group "app" {
    task "server" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
      resources {
        cpu    = 100
        memroy = 256
      }
    }
  }
}
