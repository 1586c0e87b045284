job "foo" {}
