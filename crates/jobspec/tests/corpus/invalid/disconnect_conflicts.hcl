# A group cannot both wait for a disconnected client (lost_after) and have the client stop
# its allocations (stop_on_client_after); reconcile names one of Nomad's four choices.
job "web" {
  group "app" {
    max_client_disconnect = "5m"

    disconnect {
      lost_after           = "10m"
      stop_on_client_after = "1m"
      reconcile            = "newest"
    }

    task "app" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}
