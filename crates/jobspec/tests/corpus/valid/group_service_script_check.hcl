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
        type     = "script"
        command  = "/usr/bin/pg_isready"
        args     = ["-q"]
        interval = "30s"
        timeout  = "5s"
        task     = "postgres"
        on_update = "ignore_warnings"
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
