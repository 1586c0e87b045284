# dynamic blocks: expanded in the jobspec's own blocks (with the default and a named iterator, and
# labels), kept as written inside a driver config, as Nomad does.
variable "ports" {
  default = ["http", "admin"]
}
variable "envs" {
  default = { A = "1", B = "2" }
}
job "dyn" {
  group "g" {
    network {
      dynamic "port" {
        for_each = var.ports
        labels   = [port.value]
        content {
          to = 8000 + port.key
        }
      }
    }
    task "t" {
      driver = "docker"
      dynamic "template" {
        for_each = var.envs
        iterator = item
        content {
          data        = "${item.key}=${item.value} ${NOMAD_TASK_DIR}"
          destination = "local/${item.key}.env"
        }
      }
      config {
        image = "x"
        dynamic "mount" {
          for_each = ["a", "b"]
          content {
            type   = "bind"
            source = mount.value
          }
        }
      }
    }
  }
}
