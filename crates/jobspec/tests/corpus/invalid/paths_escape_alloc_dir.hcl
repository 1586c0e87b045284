job "escape" {
  type = "batch"
  parameterized {}
  group "app" {
    task "app" {
      driver = "raw_exec"
      dispatch_payload {
        file = "../../../etc/cron.d/evil"
      }
      artifact {
        source      = "https://example.com/x"
        destination = "../../outside"
      }
      template {
        data        = "x"
        destination = "local/../../../etc/passwd"
      }
      template {
        data        = "y"
        destination = "local/same"
      }
      template {
        data        = "z"
        destination = "local/same"
      }
      config {
        command = "/bin/true"
      }
    }
  }
}
