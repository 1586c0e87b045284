job "dyn" {
  group "g" {
    network {
      dynamic "port" {
        for_each = 3
        content {}
      }
      dynamic "port" {
        for_each = ["a"]
        each     = true
      }
      dynamic {
        for_each = []
        content {}
      }
      dynamic "port" {
        for_each = ["a"]
        labels   = [port.value]
        content {
          to = "x${port.value}"
        }
      }
    }
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}
