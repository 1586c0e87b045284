# A small web service: python3's built-in HTTP server on a dynamic port, run with raw_exec so it
# works on a plain Debian machine. Try: drover job run examples/web.hcl

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

  # No update block: drover replaces a changed group all at once (rolling updates and
  # canaries come with deployments), and refuses an update strategy it would not follow.

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

    # A service block (and its health check) comes back here with service discovery: until
    # drover has a service catalog, a registration would go nowhere, so it is refused.

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
