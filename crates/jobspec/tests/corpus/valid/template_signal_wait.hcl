job "signals" {
  group "app" {
    task "app" {
      driver      = "raw_exec"
      kill_signal = "SIGINT"
      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
      template {
        destination   = "local/config.json"
        data          = "{\"alloc\": \"{{ env \"NOMAD_ALLOC_ID\" }}\"}"
        change_mode   = "signal"
        change_signal = "SIGHUP"
        wait {
          min = "2s"
          max = "10s"
        }
      }
    }
  }
}
