job "nodriver" {
  group "app" {
    task "server" {
      config {
        command = "/bin/true"
      }
    }
  }
}
