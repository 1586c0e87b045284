# Task lifecycle: a prestart task that prepares data and exits, a prestart sidecar that runs for
# the whole allocation, the main task, a poststart task, and a poststop task that cleans up.

job "lifecycle" {
  datacenters = ["*"]
  type        = "batch"

  group "pipeline" {
    task "prepare" {
      driver = "raw_exec"

      lifecycle {
        hook    = "prestart"
        sidecar = false
      }

      config {
        command = "/bin/sh"
        args    = ["-c", "echo input > \"$NOMAD_ALLOC_DIR/data/input.txt\""]
      }

      resources {
        cpu    = 20
        memory = 16
      }
    }

    task "heartbeat" {
      driver = "raw_exec"

      lifecycle {
        hook    = "prestart"
        sidecar = true
      }

      config {
        command = "/bin/sh"
        args    = ["-c", "while true; do date >> \"$NOMAD_ALLOC_DIR/data/heartbeat.log\"; sleep 2; done"]
      }

      resources {
        cpu    = 20
        memory = 16
      }
    }

    task "main" {
      driver = "raw_exec"
      leader = true

      config {
        command = "/bin/sh"
        args    = ["-c", "tr a-z A-Z < \"$NOMAD_ALLOC_DIR/data/input.txt\"; sleep 5"]
      }

      resources {
        cpu    = 50
        memory = 32
      }
    }

    task "announce" {
      driver = "raw_exec"

      lifecycle {
        hook = "poststart"
      }

      config {
        command = "/bin/echo"
        args    = ["main task started in allocation ${NOMAD_ALLOC_ID}"]
      }

      resources {
        cpu    = 20
        memory = 16
      }
    }

    task "cleanup" {
      driver = "raw_exec"

      lifecycle {
        hook = "poststop"
      }

      config {
        command = "/bin/sh"
        args    = ["-c", "rm -f \"$NOMAD_ALLOC_DIR/data/input.txt\"; echo cleaned up"]
      }

      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
