# Nomad's HCL2 functions, each result kept in meta so Nomad's answer can be compared.
locals {
  nets = ["10.0.0.0/8", "fd00:fd12:3456:7890::/56"]
}

job "functions" {
  meta {
    abs          = abs(-12.4)
    ceil         = ceil(5.1)
    floor        = floor(-4.9)
    signum       = signum(-13)
    log          = log(16, 2)
    pow          = pow(3, 2)
    parseint     = parseint("FF", 16)
    parseint_neg = parseint("-10", 2)
    chomp        = chomp("hello\n\n")
    strrev       = strrev("hello")
    title        = title("hello world-wide web")
    trim         = trim("?!hello?!", "!?")
    trimprefix   = trimprefix("helloworld", "hello")
    trimsuffix   = trimsuffix("helloworld", "world")
    indent       = indent(2, "[\n  foo,\n]")
    substr       = substr("hello world", 1, 4)
    substr_neg   = substr("hello", -3, -1)
    regex        = regex_replace("hello", "l+", "L")
    urlencode    = urlencode("a b&c/d?e=f")
    chunklist    = jsonencode(chunklist(["a", "b", "c", "d", "e"], 2))
    coalescelist = jsonencode(coalescelist([], ["b"]))
    compact      = jsonencode(compact(["a", "", "b"]))
    distinct     = jsonencode(distinct(["a", "b", "a"]))
    element      = element(["a", "b", "c"], 3)
    flatten      = jsonencode(flatten([["a"], [], ["b", ["c"]]]))
    index        = index(["a", "b"], 1)
    keys         = jsonencode(keys({ b = 1, a = 2 }))
    values       = jsonencode(values({ b = 1, a = 2 }))
    range1       = jsonencode(range(3))
    range2       = jsonencode(range(1, 4))
    range3       = jsonencode(range(0, 10, 5))
    reverse      = reverse("abc")
    slice        = jsonencode(slice(["a", "b", "c", "d"], 1, 3))
    sort         = jsonencode(sort(["e", "d", "a"]))
    zipmap       = jsonencode(zipmap(["a", "b"], [1, 2]))
    setunion     = jsonencode(setunion(["a"], ["b", "a"]))
    setinter     = jsonencode(setintersection(["a", "b"], ["b", "c"]))
    setproduct   = jsonencode(setproduct(["a", "b"], ["1", "2"]))
    b64          = base64encode("Hello World")
    b64d         = base64decode("SGVsbG8gV29ybGQ=")
    json         = jsonencode({ b = 1, a = "<x>", c = [true, null] })
    jsond        = jsondecode("{\"a\": [1, true]}").a[0]
    can_no       = can(local.missing)
    can_yes      = can(upper("x"))
    try          = try(local.missing, "fallback")
    cidrhost     = cidrhost("10.12.112.0/20", 16)
    cidrhost_neg = cidrhost("10.12.112.0/20", -2)
    cidrhost6    = cidrhost(local.nets[1], 16)
    cidrnetmask  = cidrnetmask("172.16.0.0/12")
    cidrsubnet   = cidrsubnet("172.16.0.0/12", 4, 2)
    cidrsubnet6  = cidrsubnet(local.nets[1], 16, 162)
    formatlist   = jsonencode(formatlist("Hello, %s!", ["Valentina", "Ander"]))
  }

  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}
