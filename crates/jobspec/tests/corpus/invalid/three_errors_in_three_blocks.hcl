job "three" {
  type = "service"

  group "g" {
    count = -1
    task "t" {
      driver = "raw_exec"
      config { command = "/bin/true" }
      resources { memory = 1 }
      restat {
        attempts = 2
      }
    }
  }
}
