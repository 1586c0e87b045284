job "restarts" {
  group "app" {
    restart {
      attempts = 5
      interval = "10m"
      delay    = "20s"
      mode     = "delay"
    }
    task "flaky" {
      driver = "raw_exec"
      restart {
        attempts         = 1
        interval         = "1m"
        delay            = "5s"
        mode             = "fail"
        render_templates = true
      }
      config {
        command = "/bin/false"
      }
    }
    task "steady" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
    }
  }
}
