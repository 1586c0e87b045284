# Two ports of one host-mode group share a static port value, as Nomad allows when the second
# ignores collisions (it runs: docs/jobspec.md).
job "proxy" {
  group "proxy" {
    network {
      port "http" {
        static = 8080
      }
      port "http_again" {
        static           = 8080
        ignore_collision = true
      }
    }

    task "proxy" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["600"]
      }
    }
  }
}
