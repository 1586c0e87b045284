job "ping" {
  type = "batch"
  parameterized {
    payload = "forbidden"
  }
  group "ping" {
    task "ping" {
      driver = "raw_exec"
      config {
        command = "/bin/echo"
        args    = ["pong"]
      }
    }
  }
}
