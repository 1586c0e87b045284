job "lone" {
  task "solo" {
    config {
      command = "/bin/true"
    }
  }
  group "pair" {
    task "one" {
      driver = "raw_exec"
      resources {
        memory = 1
      }
    }
  }
}
