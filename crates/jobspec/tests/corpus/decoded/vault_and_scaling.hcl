# A job-level vault block inherited by the tasks without one, group and task scaling
# policies, and the migrate and disconnect strategies.
job "api" {
  vault {
    policies = ["api-read"]
  }

  migrate {
    max_parallel = 2
  }

  group "api" {
    scaling {
      min     = 2
      max     = 10
      enabled = true

      policy {
        cooldown            = "1m"
        evaluation_interval = "30s"

        check "cpu" {
          source = "nomad-apm"
          query  = "avg_cpu"
          strategy "target-value" {
            target = 70
          }
        }
      }
    }

    migrate {
      health_check     = "task_states"
      healthy_deadline = "2m"
    }

    disconnect {
      lost_after = "1h"
      replace    = false
      reconcile  = "keep_original"
    }

    task "server" {
      driver = "docker"
      config {
        image = "api:1"
      }

      scaling "cpu" {
        min = 100
        max = 1000
        policy {
          cooldown = "5m"
        }
      }

      scaling "mem" {
        max = 2048
      }
    }

    task "reporter" {
      driver = "docker"
      vault {
        role        = "reporter"
        change_mode = "signal"
        change_signal = "SIGUSR1"
        env         = false
      }
      config {
        image = "reporter:1"
      }
    }
  }
}
