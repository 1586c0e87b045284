job "nightly-export" {
  type = "batch"

  group "export" {
    task "export" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo exporting; sleep 2"]
      }
      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
