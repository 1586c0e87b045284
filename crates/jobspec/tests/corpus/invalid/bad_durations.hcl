job "durations" {
  group "app" {
    shutdown_delay = "1d"
    task "app" {
      driver       = "raw_exec"
      kill_timeout = "1h 30m"
      shutdown_delay = 30
      config {
        command = "/bin/true"
      }
      template {
        destination = "local/x"
        data        = "x"
        splay       = "five seconds"
      }
    }
  }
}
