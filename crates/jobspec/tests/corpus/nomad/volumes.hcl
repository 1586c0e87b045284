# Host and CSI volumes with their mounts.
job "postgres" {
  group "db" {
    count = 2

    volume "certs" {
      type      = "host"
      source    = "ca-certificates"
      read_only = true
    }

    volume "data" {
      type            = "csi"
      source          = "pgdata"
      per_alloc       = true
      access_mode     = "single-node-writer"
      attachment_mode = "file-system"
      mount_options {
        fs_type     = "ext4"
        mount_flags = ["noatime"]
      }
    }

    task "postgres" {
      driver = "docker"

      volume_mount {
        volume      = "data"
        destination = "/var/lib/postgresql/data"
      }

      volume_mount {
        volume           = "certs"
        destination      = "/etc/ssl/certs"
        read_only        = true
        propagation_mode = "host-to-task"
      }

      config {
        image = "postgres:16"
      }
    }
  }
}
