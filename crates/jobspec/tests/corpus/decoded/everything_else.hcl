# Multiregion, the UI block, consul, csi_plugin, actions, devices, NUMA, DNS, host networks,
# a task-level network and the remaining check and identity arguments.
job "plugins" {
  type = "system"

  multiregion {
    strategy {
      max_parallel = 1
      on_failure   = "fail_all"
    }
    region "west" {
      count       = 2
      datacenters = ["west-1"]
      meta {
        my-key = "my-value-west"
      }
    }
    region "east" {
      datacenters = ["east-1"]
    }
  }

  ui {
    description = "The CSI node plugin"
    link {
      label = "Runbook"
      url   = "https://example.com/runbook"
    }
  }

  group "nodes" {
    consul {
      namespace = "infra"
    }

    network {
      dns {
        servers  = ["10.0.0.2"]
        searches = ["service.consul"]
        options  = ["ndots:2"]
      }
      port "metrics" {
        host_network = "private"
      }
    }

    service {
      name = "plugin-metrics"
      port = "metrics"
      check {
        type            = "grpc"
        port            = "metrics"
        interval        = "10s"
        timeout         = "2s"
        grpc_service    = "health"
        grpc_use_tls    = true
      }
    }

    task "plugin" {
      driver = "docker"

      consul {
        cluster = "infra"
      }

      csi_plugin {
        id             = "aws-ebs0"
        type           = "node"
        mount_dir      = "/csi"
        health_timeout = "1m"
      }

      action "flush-cache" {
        command = "/bin/sh"
        args    = ["-c", "rm -rf /tmp/cache"]
      }

      identity {
        name = "vault_default"
        aud  = ["vault.io"]
        ttl  = "1h"
      }

      resources {
        cpu    = 500
        memory = 256

        device "nvidia/gpu" {
          count = 2
          constraint {
            attribute = "${device.attr.memory}"
            operator  = ">="
            value     = "2 GiB"
          }
          affinity {
            attribute = "${device.model}"
            value     = "Tesla K80"
            weight    = 50
          }
        }

        numa {
          affinity = "prefer"
          devices  = ["nvidia/gpu"]
        }

        network {
          mbits = 10
          port "legacy" {}
        }
      }

      config {
        image      = "amazon/aws-ebs-csi-driver:v1.5.1"
        privileged = true
      }
    }
  }
}
