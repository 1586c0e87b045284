variable "x" {
  default = 1
}

jobs "typo" {
}
