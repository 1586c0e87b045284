job "params" {
  type = "service"
  parameterized {
    payload       = "sometimes"
    meta_required = ["a", "b"]
    meta_optional = ["b"]
  }
  group "app" {
    task "app" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}
