# Regular expressions, version and semver constraints are compiled at validation, as the
# scheduler will compile them: a bad one is a located error, not a node that never fits.
job "targets" {
  constraint {
    attribute = "${attr.kernel.name}"
    regexp    = "linux(64"
  }
  constraint {
    attribute = "${attr.kernel.version}"
    version   = ">= 1.2, <<< 2"
  }
  constraint {
    attribute = "${attr.nomad.version}"
    semver    = "~> 1.2"
  }
  constraint {
    attribute = "${attr.os.version}"
    version   = "~> 1.2, != 1.3.0-beta"
  }
  group "app" {
    affinity {
      attribute = "${node.class}"
      regexp    = "[a-"
      weight    = 50
    }
    task "app" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}
