# Nomad's rule: only a host-mode network may ignore port collisions.
job "web" {
  group "web" {
    network {
      mode = "bridge"
      port "http" {
        static           = 8080
        ignore_collision = true
      }
    }

    task "web" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}
