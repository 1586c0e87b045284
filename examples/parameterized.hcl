# A parameterized job: each dispatch carries a payload (written to local/input.txt) and metadata.
# Try: drover job dispatch -meta customer=acme resize examples/payload.txt

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
