job "labels" {
  group {
    task "a" "b" {
      driver = "raw_exec"
    }
  }
  group "ok" {
    restart "named" {
      attempts = 1
    }
    task {
      driver = "raw_exec"
    }
  }
}
