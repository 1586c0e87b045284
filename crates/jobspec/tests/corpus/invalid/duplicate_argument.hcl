job "dup" {
  group "app" {
    count = 1
    count = 2
    task "app" {
      driver = "raw_exec"
    }
  }
}
