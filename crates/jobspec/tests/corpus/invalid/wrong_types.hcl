job "types" {
  datacenters = "dc1"
  priority    = "high"
  group "app" {
    count = 1.5
    task "app" {
      driver = ["raw_exec"]
      leader = "yes"
      config {
        command = "/bin/true"
      }
      env {
        LIST = ["a", "b"]
      }
    }
  }
}
