variable "image" {
  type = string
}

variable "replicas" {
  type    = number
  default = "three"
}

job "vars" {
  group "app" {
    task "app" {
      driver = "raw_exec"
      config {
        command = var.image
      }
    }
  }
}
