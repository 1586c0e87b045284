# Shapes Nomad's decoder gives: blocks inside driver config are lists of objects (repeated
# blocks add items, nesting keeps the shape), `distinct_hosts = true` leaves RTarget empty and
# `false` keeps it "false", and a spread without a weight gets 50.
job "shapes" {
  constraint {
    distinct_hosts = true
  }

  spread {
    attribute = "${node.datacenter}"
  }

  group "g" {
    constraint {
      distinct_hosts = false
    }

    task "t" {
      driver = "mock"

      config {
        command = "/bin/true"

        port_map {
          http = 8080
        }

        logging {
          type = "syslog"

          config {
            tag = "web"
          }
        }

        mount {
          target = "/a"
        }

        mount {
          target = "/b"
        }
      }
    }
  }
}
