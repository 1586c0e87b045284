job "nocount" {
  datacenters = ["dc1"]
  group "g" {
    task "busy" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "while :; do :; done"]
      }
    }
  }
}
