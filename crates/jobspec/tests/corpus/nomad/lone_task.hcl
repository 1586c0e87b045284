# A task outside any group runs in a group of its own, named after it, before the written
# groups.
job "lone" {
  task "solo" {
    driver = "raw_exec"
    config {
      command = "/bin/sleep"
      args    = ["60"]
    }
  }

  group "pair" {
    count = 2
    task "one" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}
