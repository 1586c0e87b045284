# Only a task's services have a driver network; a group service with address_mode "driver" is
# refused as Nomad refuses it.
job "web" {
  group "g" {
    network {
      mode = "bridge"
      port "http" {
        to = 8080
      }
    }
    service {
      name         = "web"
      provider     = "nomad"
      port         = "http"
      address_mode = "driver"
    }
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["600"]
      }
    }
  }
}
