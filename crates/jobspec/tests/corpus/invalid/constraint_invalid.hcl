job "constraints" {
  constraint {
    attribute = "${attr.kernel.name}"
    operator  = "like"
    value     = "linux"
  }
  constraint {
    attribute = "${attr.kernel.name}"
    operator  = "=="
  }
  group "app" {
    affinity {
      attribute = "${node.datacenter}"
      value     = "dc1"
      weight    = 0
    }
    task "app" {
      driver = "raw_exec"
      constraint {
        distinct_hosts = true
      }
      config {
        command = "/bin/true"
      }
    }
  }
}
