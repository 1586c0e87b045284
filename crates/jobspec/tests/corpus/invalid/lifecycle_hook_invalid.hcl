job "hooks" {
  group "app" {
    task "init" {
      driver = "raw_exec"
      lifecycle {
        hook = "prestop"
      }
      config {
        command = "/bin/true"
      }
    }
    task "side" {
      driver = "raw_exec"
      lifecycle {
        sidecar = true
      }
      config {
        command = "/bin/true"
      }
    }
    task "main" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}
