job "dup" {
  type = "batch"
  group "app" {
    restart {
      attempts = 1
    }
    restart {
      attempts = 2
    }
    task "app" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
      resources {
        cpu = 100
      }
    }
  }
}
job "second" {
}
