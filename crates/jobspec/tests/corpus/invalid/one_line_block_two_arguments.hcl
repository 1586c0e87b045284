job "oneline" {
  group "app" {
    restart { attempts = 2  delay = "15s" }
    task "app" {
      driver = "raw_exec"
    }
  }
}
