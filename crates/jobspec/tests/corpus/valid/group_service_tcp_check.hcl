job "db" {
  group "db" {
    network {
      port "db" {
        static = 5432
      }
    }
    service {
      name = "postgres"
      port = "db"
      task = "postgres"
      provider = "nomad"
      tagged_addresses = {
        lan = "10.0.0.5"
      }
      check {
        name      = "accepting connections"
        type      = "tcp"
        interval  = "30s"
        timeout   = "5s"
        on_update = "ignore"
      }
    }
    task "postgres" {
      driver = "raw_exec"
      shutdown_delay = "5s"
      config {
        command = "/usr/lib/postgresql/15/bin/postgres"
      }
      resources {
        cpu        = 500
        memory     = 512
        memory_max = 1024
      }
    }
  }
}
