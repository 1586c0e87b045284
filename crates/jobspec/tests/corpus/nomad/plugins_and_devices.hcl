# Multiregion, a CSI node plugin, devices, custom DNS, host networks and a task-level network.
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

  group "nodes" {
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
        type         = "grpc"
        port         = "metrics"
        interval     = "10s"
        timeout      = "2s"
        grpc_service = "health"
        grpc_use_tls = true
      }
    }

    task "plugin" {
      driver = "docker"

      csi_plugin {
        id        = "aws-ebs0"
        type      = "node"
        mount_dir = "/csi"
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

        network {
          mbits = 10
          port "legacy" {}
        }
      }

      config {
        image      = "amazon/aws-ebs-csi-driver:v1.5.1"
        privileged = true
        logging {
          type = "journald"
          config {
            tag = "csi"
          }
        }
      }
    }
  }
}
