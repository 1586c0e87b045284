job "default" {
  id   = "job1"
  name = "My Job"
}
