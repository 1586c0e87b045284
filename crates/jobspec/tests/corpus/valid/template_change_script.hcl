job "reloader" {
  group "app" {
    task "app" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
      template {
        source      = "local/in.tpl"
        destination = "local/out.conf"
        change_mode = "script"
        perms       = "0600"
        uid         = 1000
        gid         = 1000
        splay       = "10s"
        error_on_missing_key = true
        change_script {
          command       = "/bin/sh"
          args          = ["-c", "kill -HUP $(cat local/pid)"]
          timeout       = "20s"
          fail_on_error = true
        }
      }
    }
  }
}
