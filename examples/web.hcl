# A small web service: python3's built-in HTTP server on a dynamic port, run with raw_exec so it
# works on a plain Debian machine, registered as the service "web-frontend" with a health check.
# Try: drover job run examples/web.hcl, then drover service info web-frontend

variable "replicas" {
  type        = number
  default     = 2
  description = "How many copies of the server to run."
}

job "web" {
  datacenters = ["*"]
  type        = "service"

  meta {
    team = "platform"
  }

  # No update block: Nomad's default applies, so a changed group is replaced one instance at a
  # time through a deployment (each new one healthy for 10 s before the next); see
  # examples/rolling-update.hcl for an update block of its own.

  group "frontend" {
    count = var.replicas

    network {
      port "http" {}
    }

    restart {
      attempts = 3
      interval = "5m"
      delay    = "10s"
      mode     = "delay"
    }

    # Each instance registers in the built-in catalog (`drover service info web-frontend`, or
    # GET /v1/service/web-frontend) with its address and port, and its page is checked every
    # 10 s (`drover alloc checks <alloc>`); a server stuck failing the check is restarted.
    service {
      name     = "web-frontend"
      provider = "nomad"
      port     = "http"
      tags     = ["web", "team-${NOMAD_META_team}"]

      check {
        name     = "index"
        type     = "http"
        path     = "/"
        interval = "10s"
        timeout  = "2s"

        check_restart {
          limit = 3
          grace = "10s"
        }
      }
    }

    task "server" {
      driver = "raw_exec"

      # The page is written by the task itself, then the server takes over the process.
      config {
        command = "/bin/sh"
        args = ["-c", <<-EOS
          mkdir -p "$NOMAD_TASK_DIR/site"
          printf '<html><body><h1>Hello from %s</h1><p>Serving on port %s.</p></body></html>\n' \
            "$NOMAD_ALLOC_NAME" "$NOMAD_PORT_http" > "$NOMAD_TASK_DIR/site/index.html"
          exec /usr/bin/python3 -m http.server "$NOMAD_PORT_http" --directory "$NOMAD_TASK_DIR/site"
        EOS
        ]
      }

      env {
        PYTHONUNBUFFERED = "1"
      }

      resources {
        cpu    = 100
        memory = 64
      }

      kill_timeout = "10s"
    }
  }
}
