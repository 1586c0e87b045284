variable "image" {
  default = "busybox"
}

job "interp" {
  group "app" {
    network {
      port "http" {}
    }
    task "app" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args = [
          "-c",
          "echo ${NOMAD_ALLOC_ID} ${var.image} on ${attr.unique.hostname} port ${NOMAD_PORT_http} rack ${meta.rack} env $${HOME}",
        ]
      }
      env {
        NODE      = "${node.unique.name}"
        DC        = "${node.datacenter}"
        UPSTREAM  = "${NOMAD_UPSTREAM_ADDR_db}"
        REGION    = "${NOMAD_REGION}"
        LITERAL   = "$${NOT_INTERPOLATED}"
        COMBINED  = "${var.image}-${NOMAD_ALLOC_INDEX}"
        FROM_ENV  = "${env["PATH"]}"
      }
    }
  }
}
