# Nomad 1.8's disconnect rules: a client-side stop only for service and batch jobs, never
# together with lost_after, and one of the four reconcile choices.
job "agents" {
  type = "system"

  group "agent" {
    disconnect {
      stop_on_client_after = "1m"
    }

    task "agent" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}
