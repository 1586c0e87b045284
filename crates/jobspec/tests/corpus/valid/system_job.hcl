job "node-exporter" {
  type        = "system"
  datacenters = ["*"]

  constraint {
    attribute = "${attr.kernel.name}"
    value     = "linux"
  }

  group "exporter" {
    task "exporter" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "while true; do cat /proc/loadavg; sleep 10; done"]
      }
      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
