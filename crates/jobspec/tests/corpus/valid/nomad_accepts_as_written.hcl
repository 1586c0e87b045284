# What Nomad's parser accepts and keeps as written: a task's resources.disk (dropped by Nomad
# when it converts the job; registered here with a warning), crons with `?` for "any" in a
# field, a parameterized block without a payload (the "optional" default is the server's, at
# register) and service names with ${TASKGROUP} and ${NOMAD_...} (the first replaced by the
# server at register, the second by the client when it registers the service).
job "as-written" {
  type = "batch"

  periodic {
    crons = ["*/5 * * * * * ?", "0 12 ? * MON-FRI", "@hourly"]
  }

  parameterized {
    meta_optional = ["run"]
  }

  group "work" {
    service {
      name     = "${TASKGROUP}-api"
      provider = "nomad"
    }

    task "run" {
      driver = "raw_exec"

      config {
        command = "/bin/true"
      }

      resources {
        cpu    = 100
        memory = 64
        disk   = 150
      }

      service {
        name     = "run-${NOMAD_ALLOC_INDEX}"
        provider = "nomad"
      }
    }
  }
}
