job "chatty" {
  group "app" {
    ephemeral_disk {
      size    = 1024
      sticky  = true
      migrate = true
    }
    task "app" {
      driver = "raw_exec"
      logs {
        max_files     = 5
        max_file_size = 20
      }
      config {
        command = "/bin/sh"
        args    = ["-c", "yes | head -n 100000"]
      }
    }
  }
}
