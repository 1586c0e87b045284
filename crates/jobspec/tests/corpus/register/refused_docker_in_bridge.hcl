# A docker task cannot join its group's bridge namespace yet; the raw_exec task beside it can.
job "mixed" {
  group "app" {
    network {
      mode = "bridge"
      port "http" {
        to = 8080
      }
    }
    task "web" {
      driver = "docker"
      config {
        image = "busybox:1"
        ports = ["http"]
      }
    }
    task "sidecar" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["600"]
      }
    }
  }
}
