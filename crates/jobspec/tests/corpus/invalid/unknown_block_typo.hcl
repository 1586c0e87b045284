job "typo" {
  grup "app" {
    task "server" {
      driver = "raw_exec"
    }
  }
  group "real" {
    tsk "server" {
      driver = "raw_exec"
    }
    task "server" {
      drivr = "raw_exec"
      resource {
        cpu = 100
      }
    }
  }
}
