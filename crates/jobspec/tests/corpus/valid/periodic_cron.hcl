job "backup" {
  type = "batch"

  periodic {
    cron             = "0 3 * * *"
    prohibit_overlap = true
  }

  group "backup" {
    task "backup" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "tar czf $NOMAD_ALLOC_DIR/data/backup.tgz /etc"]
      }
    }
  }
}
