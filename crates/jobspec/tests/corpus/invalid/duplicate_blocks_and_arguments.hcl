job "dup" {
  type = "batch"
  type = "service"
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
        cpu = 200
      }
    }
  }
}
job "second" {
}
