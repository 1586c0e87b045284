job "quiet" {
  type = "batch"
  group "app" {
    task "app" {
      driver = "raw_exec"
      logs {
        disabled = true
      }
      config {
        command = "/bin/true"
      }
    }
  }
}
