job "idents" {
  group "app" {
    task "app" {
      driver = "raw_exec"
      identity {
        name     = "vault_default"
        aud      = ["vault.io"]
        filepath = "secrets/token"
      }
      identity {
        name = "empty"
      }
      template {
        data        = "x"
        destination = "local/x"
        once        = true
      }
      config {
        command = "/bin/true"
      }
    }
  }
}
