job "heredocs" {
  group "app" {
    task "app" {
      driver = "raw_exec"
      config {
        command = "/bin/cat"
        args    = ["local/app.conf"]
      }

      template {
        destination = "local/app.conf"
        data        = <<-EOT
          # rendered for ${NOMAD_ALLOC_NAME}
          listen = {{ env "NOMAD_PORT_http" }}
            nested = true
        EOT
      }

      template {
        destination = "local/raw.txt"
        data        = <<EOT
no dedent here
  keeps leading spaces
EOT
      }

      template {
        destination   = "secrets/env"
        env           = true
        change_mode   = "noop"
        left_delimiter  = "[["
        right_delimiter = "]]"
        data          = "KEY=[[ env \"NOMAD_TASK_NAME\" ]]\n"
      }
    }
  }
}
