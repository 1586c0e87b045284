job "confused" {
  group "app" {
    count {
      value = 2
    }
    task "app" {
      driver    = "raw_exec"
      resources = {
        cpu = 100
      }
      lifecycle = "prestart"
      config {
        command = "/bin/true"
      }
    }
  }
}
