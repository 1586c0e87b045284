# A batch job that fetches a file into its task directory before the task starts, then prints
# it. The source is a file every Linux machine has, so it runs without a network; an http URL
# works the same way, with `options { checksum = "sha256:…" }` checked before the download is
# used, and archives (.tar.gz, .zip, …) unpacked into the destination.
#
#   drover job run examples/artifact.hcl
#   drover alloc logs <alloc> show      # prints the machine's os-release

job "fetch" {
  datacenters = ["*"]
  type        = "batch"

  group "fetch" {
    task "show" {
      driver = "raw_exec"

      artifact {
        source      = "/etc/os-release"
        destination = "local/os-release"
        mode        = "file"
      }

      config {
        command = "/bin/cat"
        args    = ["local/os-release"]
      }

      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
