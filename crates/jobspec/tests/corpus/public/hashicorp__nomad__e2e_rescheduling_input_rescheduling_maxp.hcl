job "demo2" {

  datacenters = ["dc1", "dc2"]

  constraint {
    attribute = "${attr.kernel.name}"
    value     = "linux"
  }

  type = "service"

  group "t2" {
    count = 3

    task "t2" {
      driver = "raw_exec"

      config {
        command = "bash"
        args    = ["-c", "sleep 170000"]
      }
    }

    update {
      max_parallel      = 1
      min_healthy_time  = "1s"
      auto_revert       = false
      healthy_deadline  = "2s"
      progress_deadline = "10s"
    }

    restart {
      attempts = 0
      mode     = "fail"
    }

    reschedule {
      unlimited = "true"
      delay     = "5s"
    }
  }
}
