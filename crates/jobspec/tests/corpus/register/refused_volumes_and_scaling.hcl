job "stateful" {
  multiregion {
    strategy {
      max_parallel = 1
    }
  }
  group "db" {
    volume "data" {
      type   = "host"
      source = "pgdata"
    }
    volume "claimed" {
      type            = "host"
      source          = "shared"
      sticky          = true
      access_mode     = "single-node-single-writer"
      attachment_mode = "file-system"
    }
    scaling {
      min = 1
      max = 3
    }
    task "db" {
      driver = "raw_exec"
      volume_mount {
        volume      = "data"
        destination      = "/var/lib/postgresql"
        propagation_mode = "bidirectional"
      }
      csi_plugin {
        id   = "x"
        type = "node"
      }
      config {
        command = "/bin/true"
      }
    }
  }
}
