# Parses as Nomad parses it; every integration below is refused at register, each with
# what it needs (the ui block and iops only get a warning).
job "integrations" {
  vault {
    policies = ["read"]
  }
  multiregion {
    strategy {
      max_parallel = 1
    }
    region "west" {
      count = 1
    }
  }
  ui {
    description = "Every integration drover does not run"
    link {
      label = "Runbook"
      url   = "https://example.com/runbook"
    }
  }
  group "app" {
    consul {
      namespace = "x"
    }
    disconnect {
      lost_after = "1h"
    }
    volume "data" {
      type            = "csi"
      source          = "pgdata"
      per_alloc       = true
      access_mode     = "single-node-writer"
      attachment_mode = "file-system"
      mount_options {
        fs_type = "ext4"
      }
    }
    scaling {
      max = 3
      policy {
        cooldown = "1m"
      }
    }
    network {
      mode   = "bridge"
      device = "eth0"
      cidr   = "10.0.0.0/8"
      ip     = "10.0.0.1"
      dns {
        servers = ["1.1.1.1"]
      }
      cni {
        args = { a = "b" }
      }
      port "http" {
        static = 8080
      }
    }
    service {
      name     = "web"
      port     = "http"
      provider = "nomad"
      kind     = "connect-proxy:web"
      cluster  = "east"
      weights {
        passing = 2
      }
      identity {
        aud = ["consul.io"]
      }
      connect {
        sidecar_service {
          proxy {
            upstreams {
              destination_name = "db"
              local_bind_port  = 5432
            }
          }
        }
      }
      check {
        type         = "tcp"
        interval     = "10s"
        timeout      = "2s"
        grpc_service = "health"
        grpc_use_tls = true
        advertise    = "x"
      }
    }
    task "app" {
      driver = "raw_exec"
      consul {
        cluster = "east"
      }
      volume_mount {
        volume      = "data"
        destination = "/data"
      }
      csi_plugin {
        id   = "ebs"
        type = "node"
      }
      scaling "cpu" {
        max = 1000
      }
      action "hello" {
        command = "/bin/echo"
        args    = ["hi"]
      }
      identity {
        name         = "extra"
        aud          = ["x"]
        service_name = "web"
        extra_claims = { team = "a" }
      }
      template {
        data        = "x"
        destination = "local/x"
        vault_grace = "5s"
      }
      resources {
        iops    = 10
        secrets = 10
        device "nvidia/gpu" {
          count = 2
        }
        numa {
          affinity = "require"
        }
        network {
          mbits = 10
        }
      }
      config {
        command = "/bin/true"
      }
    }
  }
}
