job "apt-clean" {
  type = "sysbatch"

  group "clean" {
    restart {
      attempts = 0
      mode     = "fail"
    }
    task "clean" {
      driver = "raw_exec"
      user   = "root"
      config {
        command = "/usr/bin/apt-get"
        args    = ["clean"]
      }
    }
  }
}
