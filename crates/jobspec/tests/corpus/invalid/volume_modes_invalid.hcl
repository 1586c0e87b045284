job "volumes" {
  type = "system"
  group "g" {
    volume "reader" {
      type        = "host"
      source      = "data"
      access_mode = "single-node-reader-only"
    }
    volume "shared" {
      type        = "host"
      source      = "data"
      access_mode = "multi-node-multi-writer"
    }
    volume "each" {
      type      = "host"
      source    = "data"
      per_alloc = true
      sticky    = true
    }
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}
