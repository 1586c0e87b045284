job "foo" {
  constraint {
    distinct_hosts = "true"
  }
}
