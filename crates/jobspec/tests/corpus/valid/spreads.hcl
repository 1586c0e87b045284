job "spread-out" {
  datacenters = ["dc1", "dc2", "dc3"]

  spread {
    attribute = "${node.datacenter}"
    weight    = 100
    target "dc1" {
      percent = 50
    }
    target "dc2" {
      percent = 30
    }
  }

  group "app" {
    count = 10
    spread {
      attribute = "${meta.rack}"
      weight    = 50
    }
    task "app" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["600"]
      }
    }
  }
}
