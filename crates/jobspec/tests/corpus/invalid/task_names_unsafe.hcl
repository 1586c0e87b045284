job "names" {
  group "app" {
    task "../escape" {
      driver = "raw_exec"
    }
    task ".." {
      driver = "raw_exec"
    }
    task "ok" {
      driver = "raw_exec"
    }
  }
}
