# Nomad 1.8's rule: a batch group (one reschedule attempt by default) may not both wait for a
# disconnected client and refuse to be rescheduled when lost.
job "report" {
  type = "batch"

  group "build" {
    max_client_disconnect      = "1h"
    prevent_reschedule_on_lost = true

    task "build" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}
