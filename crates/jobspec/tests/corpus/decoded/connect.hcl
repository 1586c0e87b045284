# Consul Connect: a sidecar with upstreams, expose paths and a tuned sidecar task, and an
# ingress and a terminating gateway.
job "countdash" {
  datacenters = ["dc1"]

  group "api" {
    network {
      mode = "bridge"
      port "healthcheck" {
        to = -1
      }
    }

    service {
      name = "count-api"
      port = "9001"

      connect {
        sidecar_service {
          tags = ["v1"]
          proxy {
            local_service_port = 9001
            upstreams {
              destination_name = "count-db"
              local_bind_port  = 5432
              datacenter       = "dc2"
              mesh_gateway {
                mode = "local"
              }
              config {
                connect_timeout_ms = 3000
              }
            }
            expose {
              path {
                path            = "/health"
                protocol        = "http"
                local_path_port = 9001
                listener_port   = "healthcheck"
              }
            }
            transparent_proxy {
              exclude_outbound_ports = [53, 8300]
              exclude_uids           = ["101"]
            }
            config {
              protocol = "http"
            }
          }
        }
        sidecar_task {
          resources {
            cpu    = 64
            memory = 64
          }
          kill_timeout = "10s"
          config {
            image = "envoyproxy/envoy:v1.29"
          }
        }
      }
    }

    task "web" {
      driver = "docker"
      config {
        image = "hashicorpdev/counter-api:v3"
      }
    }
  }

  group "ingress" {
    network {
      mode = "bridge"
      port "inbound" {
        static = 8080
        to     = 8080
      }
    }

    service {
      name = "my-ingress"
      port = "8080"
      connect {
        gateway {
          proxy {
            connect_timeout = "500ms"
            envoy_gateway_bind_addresses "inbound" {
              address = "0.0.0.0"
              port    = 8080
            }
          }
          ingress {
            tls {
              enabled = false
            }
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
  }

  group "terminating" {
    network {
      mode = "bridge"
    }
    service {
      name = "api-gateway"
      connect {
        gateway {
          terminating {
            service {
              name    = "legacy"
              ca_file = "/etc/ssl/ca.pem"
            }
          }
        }
      }
    }
  }
}
