# A web server whose password comes from a Nomad Variable (what a Vault secret would be in
# Nomad; drover has no Vault, see docs/vault.md). Store the password, then run the job:
#
#   drover var put nomad/jobs/secret-web password=s3cret
#   drover job run examples/variables-secret.hcl
#   drover alloc logs <alloc> server     # "the password has 6 characters"
#
# The template reads the variable with the task's workload identity (a job may read the
# variables under nomad/jobs/<its ID>), waits until it exists, writes it to secrets/web.env
# (private to the task) and puts PASSWORD into the task's environment.

job "secret-web" {
  datacenters = ["*"]
  type        = "service"

  group "web" {
    task "server" {
      driver = "raw_exec"

      template {
        data        = "{{ with nomadVar \"nomad/jobs/secret-web\" }}PASSWORD={{ .password }}{{ end }}"
        destination = "secrets/web.env"
        env         = true
      }

      config {
        command = "/bin/sh"
        args    = ["-c", "echo \"the password has $(expr length \"$PASSWORD\") characters\"; while true; do sleep 60; done"]
      }

      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
