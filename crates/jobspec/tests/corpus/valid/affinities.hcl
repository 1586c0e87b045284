job "affine" {
  affinity {
    attribute = "${node.datacenter}"
    value     = "dc1"
    weight    = 100
  }

  group "app" {
    affinity {
      attribute = "${meta.rack}"
      operator  = "set_contains_any"
      value     = "r1,r2"
      weight    = -50
    }
    task "app" {
      driver = "raw_exec"
      affinity {
        attribute = "${attr.kernel.version}"
        version   = ">= 6.0"
        weight    = 25
      }
      config {
        command = "/bin/true"
      }
    }
  }
}
