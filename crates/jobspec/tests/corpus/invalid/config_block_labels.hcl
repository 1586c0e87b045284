# Nomad reads blocks inside driver config without their labels; drover refuses a label rather
# than drop it, and refuses a name used both as an argument and as a block.
job "labels" {
  group "g" {
    task "t" {
      driver = "raw_exec"

      config {
        command = "/bin/true"
        args    = []

        mount "data" {
          target = "/data"
        }

        args {
          value = "x"
        }
      }
    }
  }
}
