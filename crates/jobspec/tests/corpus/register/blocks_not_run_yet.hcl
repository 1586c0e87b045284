# Parses as Nomad parses it, but every block below is refused at register: drover does not
# run it yet. Each refusal is located.
job "later" {
  type = "service"

  group "web" {
    count                  = 2
    max_client_disconnect  = "1h"

    ephemeral_disk {
      migrate = true
    }

    network {
      port "http" {}
    }

    service {
      name     = "web"
      port     = "http"
      provider = "nomad"

      check {
        type     = "http"
        path     = "/health"
        interval = "10s"
        timeout  = "2s"
      }

    }

    service {
      name     = "web-grpc"
      port     = "http"
      provider = "consul"

      check {
        type     = "grpc"
        interval = "10s"
        timeout  = "2s"
      }
    }

    task "server" {
      driver = "raw_exec"

      config {
        command = "/bin/sleep"
        args    = ["600"]
      }

      artifact {
        source = "https://example.com/app.tar.gz"
      }

      template {
        data        = "port={{ env \"NOMAD_PORT_http\" }}"
        destination = "local/app.conf"
      }

      identity {
        env = true
      }
    }
  }
}
