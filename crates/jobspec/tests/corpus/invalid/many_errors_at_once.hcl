job "many" {
  group "web" {
    count = -1
    network {
      port "http" {
        static = 8080
      }
      port "http" {
        static = 8080
      }
    }
    service {
      name     = "bad_name!"
      port     = "nope"
      provider = "etcd"
      check {
        type     = "http"
        interval = "500ms"
        timeout  = "1s"
      }
    }
    ephemeral_disk {
      size = 5
    }
    task "a" {
      driver = "raw_exec"
      kill_timeout = "2m"
      resources {
        cores  = 2
        cpu    = 500
        memory = 300
        memory_max = 100
        disk   = 100
      }
      logs {
        max_files     = 0
        max_file_size = 10
      }
    }
  }
}
