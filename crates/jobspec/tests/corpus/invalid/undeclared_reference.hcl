variable "image" {
  default = "busybox"
}

locals {
  tag = "${var.imag}:latest"
}

job "refs" {
  group "app" {
    task "app" {
      driver = "raw_exec"
      config {
        command = local.missing
        args    = [var.image, var.other]
      }
    }
  }
}
