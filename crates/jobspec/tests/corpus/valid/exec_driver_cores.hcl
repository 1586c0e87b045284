job "compute" {
  type = "batch"
  group "compute" {
    task "crunch" {
      driver = "exec"
      user   = "nobody"
      config {
        command = "/usr/bin/sha256sum"
        args    = ["/bin/sh"]
      }
      resources {
        cores  = 1
        memory = 256
      }
    }
  }
}
