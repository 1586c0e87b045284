job "fast" {
  all_at_once = true
  type        = "batch"

  group "app" {
    stop_after_client_disconnect = "5m"
    task "app" {
      driver       = "raw_exec"
      kill_timeout = "45s"
      kill_signal  = "SIGUSR1"
      shutdown_delay = "2s"
      config {
        command = "/bin/sleep"
        args    = ["10"]
      }
    }
  }
}
