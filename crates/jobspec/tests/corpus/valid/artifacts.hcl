job "fetcher" {
  type = "batch"
  group "fetch" {
    task "fetch" {
      driver = "raw_exec"
      artifact {
        source      = "https://example.com/tool.tar.gz"
        destination = "local/tool"
        mode        = "dir"
        options {
          checksum = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
        }
        headers {
          User-Agent = "drover"
        }
      }
      artifact {
        source      = "https://example.com/config.yml"
        destination = "local/config.yml"
        mode        = "file"
        chown       = true
      }
      artifact {
        source = "https://example.com/readme.txt"
      }
      config {
        command = "local/tool/bin/tool"
      }
    }
  }
}
