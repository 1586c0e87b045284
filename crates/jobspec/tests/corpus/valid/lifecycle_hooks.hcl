job "hooks" {
  type = "batch"
  group "g" {
    task "init" {
      driver = "raw_exec"
      lifecycle {
        hook = "prestart"
      }
      config {
        command = "/bin/true"
      }
    }
    task "proxy" {
      driver = "raw_exec"
      lifecycle {
        hook    = "prestart"
        sidecar = true
      }
      config {
        command = "/bin/sleep"
        args    = ["infinity"]
      }
    }
    task "main" {
      driver = "raw_exec"
      leader = true
      config {
        command = "/bin/sleep"
        args    = ["5"]
      }
    }
    task "notify" {
      driver = "raw_exec"
      lifecycle {
        hook = "poststart"
      }
      config {
        command = "/bin/echo"
        args    = ["started"]
      }
    }
    task "teardown" {
      driver = "raw_exec"
      lifecycle {
        hook = "poststop"
      }
      config {
        command = "/bin/echo"
        args    = ["stopped"]
      }
    }
  }
}
