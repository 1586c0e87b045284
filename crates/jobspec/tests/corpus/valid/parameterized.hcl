job "transcode" {
  type = "batch"

  parameterized {
    payload       = "optional"
    meta_required = ["input"]
    meta_optional = ["quality", "format"]
  }

  meta {
    format = "mp4"
  }

  group "work" {
    task "transcode" {
      driver = "raw_exec"
      dispatch_payload {
        file = "payload.bin"
      }
      config {
        command = "/bin/sh"
        args    = ["-c", "echo ${NOMAD_META_input} ${NOMAD_META_format}; wc -c local/payload.bin"]
      }
    }
  }
}
