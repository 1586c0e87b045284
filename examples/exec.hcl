# The exec driver: the task runs isolated (its own mount, pid, ipc and uts namespaces, chrooted
# into its task directory, with cgroup limits), as an unprivileged user.

job "isolated" {
  datacenters = ["*"]
  type        = "service"

  group "sandbox" {
    count = 1

    ephemeral_disk {
      size = 150
    }

    task "probe" {
      driver = "exec"
      user   = "nobody"

      config {
        command = "/bin/sh"
        args    = ["-c", "echo pid $$ on $(hostname); id; while true; do sleep 30; done"]
      }

      resources {
        cpu        = 100
        memory     = 64
        memory_max = 128
      }

      kill_signal  = "SIGTERM"
      kill_timeout = "5s"
    }
  }
}
