job "elastic" {
  group "group" {
    scaling {
      max = 10
    }
  }
}
