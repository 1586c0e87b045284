job "ports" {
  group "edge" {
    network {
      mode     = "host"
      hostname = "edge"
      port "http" {
        static = 8080
      }
      port "https" {
        static       = 8443
        to           = 443
        host_network = "public"
      }
      port "metrics" {}
      port "admin" {
        to = 9000
      }
    }
    task "edge" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
    }
  }
}
