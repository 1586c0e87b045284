job "identified" {
  group "app" {
    task "app" {
      driver = "raw_exec"
      identity {
        env  = true
        file = true
      }
      identity {
        name        = "storage"
        aud         = ["storage.example.com"]
        ttl         = "1h"
        change_mode = "restart"
        file        = true
      }
      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
    }
  }
}
