job "constrained" {
  constraint {
    attribute = "${attr.kernel.name}"
    operator  = "="
    value     = "linux"
  }
  constraint {
    attribute = "${attr.kernel.version}"
    version   = ">= 5.10"
  }
  constraint {
    attribute = "${attr.os.version}"
    semver    = ">= 12.0.0"
  }
  constraint {
    attribute = "${node.unique.name}"
    regexp    = "^web-[0-9]+$"
  }
  constraint {
    attribute    = "${meta.roles}"
    set_contains = "web,edge"
  }
  constraint {
    attribute        = "${meta.zones}"
    operator         = "set_contains_any"
    value            = "a,b"
  }
  constraint {
    distinct_hosts = true
  }
  constraint {
    distinct_property = "${meta.rack}"
    value             = "2"
  }
  constraint {
    attribute = "${meta.gpu}"
    operator  = "is_not_set"
  }

  group "app" {
    constraint {
      attribute = "${attr.cpu.numcores}"
      operator  = ">="
      value     = "2"
    }
    task "app" {
      driver = "raw_exec"
      constraint {
        attribute = "${attr.unique.storage.volume}"
        operator  = "!="
        value     = "/dev/sda1"
      }
      config {
        command = "/bin/true"
      }
    }
  }
}
