# A task's resources.disk: Nomad parses it and drops it when it converts the job, so the job
# runs; drover registers it too, with a warning that says it is ignored and what reserves disk.
job "disk" {
  group "web" {
    task "server" {
      driver = "raw_exec"

      config {
        command = "/bin/sleep"
        args    = ["600"]
      }

      resources {
        memory = 64
        disk   = 500
      }
    }
  }
}
