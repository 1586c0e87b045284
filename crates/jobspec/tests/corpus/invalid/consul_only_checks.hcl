job "checks" {
  group "db" {
    network {
      port "db" {}
    }
    service {
      name = "db"
      port = "db"
      provider = "nomad"
      check {
        type     = "script"
        command  = "/usr/bin/pg_isready"
        interval = "10s"
        timeout  = "2s"
      }
      check {
        type                   = "http"
        path                   = "/health"
        method                 = "FETCH"
        interval               = "10s"
        timeout                = "2s"
        on_update              = "ignore_warnings"
        success_before_passing = 2
        address_mode           = "driver"
      }
    }
    task "db" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}
