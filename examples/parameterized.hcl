# A parameterized job: each dispatch carries a payload (written to local/input.txt) and metadata.
# Validated but refused at register: `drover job validate` parses it as Nomad does and reports
# that drover has no job dispatch yet; `drover job run` refuses it for that reason.

job "resize" {
  datacenters = ["*"]
  type        = "batch"

  parameterized {
    payload       = "required"
    meta_required = ["customer"]
    meta_optional = ["priority"]
  }

  group "resize" {
    task "resize" {
      driver = "raw_exec"

      dispatch_payload {
        file = "input.txt"
      }

      config {
        command = "/bin/sh"
        args    = ["-c", "echo \"resizing for ${NOMAD_META_customer}\"; wc -c < \"$NOMAD_TASK_DIR/input.txt\""]
      }

      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
