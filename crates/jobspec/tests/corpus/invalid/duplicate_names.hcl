job "dupes" {
  group "app" {
    task "same" {
      driver = "raw_exec"
    }
    task "same" {
      driver = "raw_exec"
    }
  }
  group "app" {
    task "other" {
      driver = "raw_exec"
    }
  }
}
