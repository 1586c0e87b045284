job "shop" {
  datacenters = ["dc1"]

  group "web" {
    count = 2
    network {
      port "http" {}
    }
    task "web" {
      driver = "raw_exec"
      config {
        command = "/usr/bin/python3"
        args    = ["-m", "http.server", "${NOMAD_PORT_http}"]
      }
      resources {
        cpu    = 200
        memory = 128
      }
    }
  }

  group "worker" {
    count = 4
    task "worker" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "while true; do echo working; sleep 5; done"]
      }
      resources {
        cpu    = 300
        memory = 256
      }
    }
  }

  group "cache" {
    task "cache" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["infinity"]
      }
    }
  }
}
