# Registers with a warning: the services below are left to Consul (explicitly, or by Nomad's
# default provider), and this agent has no Consul, so they go to the built-in catalog. The
# provider = "nomad" service registers without one. The check's `notes` (Consul's free text) is
# kept with the job and named in a warning.
job "discovery" {
  group "web" {
    network {
      port "http" {}
    }

    service {
      name = "web-default-provider"
      port = "http"
      tags = ["http"]

      check {
        type     = "tcp"
        interval = "10s"
        timeout  = "2s"
        notes    = "the web port answers"
      }
    }

    service {
      name     = "web-native"
      port     = "http"
      provider = "nomad"
    }

    task "server" {
      driver = "raw_exec"

      config {
        command = "/bin/sleep"
        args    = ["60"]
      }

      service {
        name     = "web-task"
        port     = "http"
        provider = "consul"
      }
    }
  }
}
