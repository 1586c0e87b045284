# A parameterized job: each dispatch carries a payload (written to local/input.txt) and metadata.
# Register it, then dispatch it with a customer and the payload file beside this one:
#
#   drover job run examples/parameterized.hcl
#   drover job dispatch -meta customer=acme resize examples/resize-input.txt
#
# Each dispatch runs a child `resize/dispatch-<unix seconds>-<8 hex>`, whose task prints
# "resizing for acme" and the payload's size in bytes (`drover alloc logs <alloc>`).

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
