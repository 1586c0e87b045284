job "mesh" {
  group "api" {
    network {
      mode = "bridge"
      port "http" {
        to = 9001
      }
    }

    service {
      name = "count-api"
      port = "http"

      connect {
        sidecar_service {
          proxy {
            upstreams {
              destination_name = "db"
              destination_peer = "other-cluster"
              local_bind_port  = 5432
            }
            expose {
              path {
                path            = "/health"
                protocol        = "http"
                local_path_port = 9001
                listener_port   = "http"
              }
            }
            transparent_proxy {}
          }
        }

        sidecar_task {
          driver = "docker"
          user   = "envoy"
          config {
            image = "envoyproxy/envoy:v1.29"
          }
        }
      }
    }

    service {
      name = "ingress"
      port = "8080"

      connect {
        gateway {
          ingress {
            listener {
              port     = 8080
              protocol = "tcp"
              service {
                name = "count-api"
              }
            }
          }
        }
      }
    }

    task "api" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["600"]
      }

      service {
        name = "task-level"
        connect {
          native = true
        }
      }
    }
  }
}
