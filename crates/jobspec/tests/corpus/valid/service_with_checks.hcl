job "api" {
  datacenters = ["dc1", "dc2"]
  type        = "service"
  priority    = 70
  region      = "europe"
  namespace   = "prod"
  node_pool   = "default"

  update {
    max_parallel      = 2
    health_check      = "checks"
    min_healthy_time  = "10s"
    healthy_deadline  = "3m"
    progress_deadline = "10m"
    auto_revert       = true
    canary            = 1
    auto_promote      = false
    stagger           = "30s"
  }

  group "api" {
    count = 3

    network {
      mode = "host"
      port "http" {
        to = 8080
      }
    }

    service {
      name         = "api"
      port         = "http"
      provider     = "nomad"
      tags         = ["v1", "public"]
      canary_tags  = ["canary"]
      address_mode = "auto"
      on_update    = "require_healthy"

      meta {
        version = "1.2.3"
      }

      check {
        name     = "alive"
        type     = "tcp"
        interval = "10s"
        timeout  = "2s"
      }

      check {
        name     = "ready"
        type     = "http"
        path     = "/health"
        method   = "GET"
        interval = "15s"
        timeout  = "3s"
        header {
          Authorization = ["Bearer x"]
        }
        check_restart {
          limit = 3
          grace = "30s"
        }
      }
    }

    task "api" {
      driver = "raw_exec"
      config {
        command = "/usr/bin/python3"
        args    = ["-m", "http.server", "${NOMAD_PORT_http}"]
      }
      resources {
        cpu    = 250
        memory = 128
      }
    }
  }
}
