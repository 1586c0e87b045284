# A labelled block inside driver config keeps its label as one more nested list, as Nomad
# 1.1.2's /v1/jobs/parse answers (`mount "data" { ... }` → `"mount": [{"data": [{...}]}]`);
# a name used both as an argument and as a block is refused.
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
