# A web server whose password comes from Vault.
# Validated but refused at register: `drover job validate` parses it as Nomad does and reports
# that the task's vault block needs Vault, which drover does not integrate with; a password
# kept in a Nomad Variable and read with a nomadVar template runs instead.

job "secret-web" {
  datacenters = ["*"]
  type        = "service"

  group "web" {
    task "server" {
      driver = "raw_exec"

      vault {
        policies = ["web"]
      }

      template {
        data        = "{{ with secret \"secret/data/web\" }}PASSWORD={{ .Data.data.password }}{{ end }}"
        destination = "secrets/web.env"
        env         = true
      }

      config {
        command = "/bin/sh"
        args    = ["-c", "while true; do sleep 60; done"]
      }

      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
