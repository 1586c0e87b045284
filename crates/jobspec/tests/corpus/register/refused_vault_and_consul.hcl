job "secrets" {
  vault {
    policies = ["read"]
  }
  group "app" {
    consul {
      namespace = "x"
    }
    task "app" {
      driver = "raw_exec"
      vault {
        policies = ["read"]
      }
      config {
        command = "/bin/true"
      }
    }
  }
}
