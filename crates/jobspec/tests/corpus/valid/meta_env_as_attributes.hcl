job "attrs" {
  meta = {
    owner   = "team-a"
    version = 3
  }

  group "app" {
    meta = {
      group_level = "yes"
    }
    task "app" {
      driver = "raw_exec"
      config = {
        command = "/bin/env"
      }
      env = {
        GREETING = "hello"
        PORT     = 8080
        ENABLED  = true
      }
      meta = {
        task_level = "yes"
      }
    }
  }
}
