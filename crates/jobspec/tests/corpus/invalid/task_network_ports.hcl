job "legacy" {
  group "web" {
    network {
      port "http" {
        static = 8080
      }
    }

    task "a" {
      driver = "raw_exec"

      config {
        command = "/bin/sleep"
      }

      resources {
        network {
          port "http" {}
          port "admin" {
            static = 8080
          }
          port "metrics" {
            static = 9100
          }
        }
      }
    }

    task "b" {
      driver = "raw_exec"

      config {
        command = "/bin/sleep"
      }

      resources {
        network {
          port "metrics" {
            static = 9100
          }
        }
      }
    }
  }
}
