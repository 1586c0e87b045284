# Nomad's deprecated task-level network runs, with Nomad's deprecation warning (one per task,
# nested in its group's), and docker's port_map maps its ports. What Nomad ignores in a task
# network (everything but the first network's ports and mbits) is refused by name.
job "legacy" {
  group "web" {
    task "server" {
      driver = "docker"

      config {
        image = "redis:7"

        port_map {
          db = 6379
        }
      }

      resources {
        network {
          mbits = 10
          port "db" {}
          port "admin" {
            static = 9090
          }
        }
      }
    }

    task "sidecar" {
      driver = "raw_exec"

      config {
        command = "/bin/sleep"
        args    = ["600"]
      }

      resources {
        network {
          mode     = "bridge"
          hostname = "side"
          port "stats" {
            to = 8080
          }
        }
      }
    }
  }
}
