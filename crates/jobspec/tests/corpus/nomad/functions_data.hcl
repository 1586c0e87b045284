# Nomad's HCL2 data functions (YAML, CIDR, dates, type conversion, RSA), each result kept in
# meta so Nomad's answer can be compared. The RSA key is a throwaway made for this file.
locals {
  rsa_key = <<EOK
-----BEGIN RSA PRIVATE KEY-----
MIICXAIBAAKBgQDUL9FiVD4ifLboHjDECpqP0N6Tcq5IbyyD1V7OWlaVvmwk6R2y
N64U8cw7XKOla2Z3d5wM/dwU6PBO1ZoQyo0exP4gwXVVvpJqQ6j6qRC+RzCWAR0d
RPhArsUUq2mnuiKHMOfroqrc7Ss2JlrC7TMJyZsJwDoSAzeregEeWy+08wIDAQAB
AoGASXdA9N2cIc6yeY2ybr4JI9A6sCydwUCU1hRzXdkTb4dd5C2+dW0n3eKWRttd
YbHc6XJFWo4uvCKmyXTVggjPcP1SLc0jBAART6FXeMBJhIIuaTixzQa+nw0wFtBX
YIiGDrLLvaKzmZxHjxZzen+kJ9DSceDXK91H/Y/EnT9kVdkCQQDzcKipw5snTb7M
iOwYmz1FjPaDXRevTwgesyoelavAaAZyz3glnVq1HkVybZ+Z/R1JW1Z94iMuMHTI
Gm91AGsvAkEA3yJeHikxRtLzWM8vuY5qulOVe54WtF0DZ3QDY2MZEqqXv4vCeASx
o3nUfIZ46LN8xohkwXf0YLZbdziuPqbRfQJAL2EGwnuab8zWzJH9eVCFXUrxE2ID
4Q+9odP255rzoW/diWzNkmyMoeFxXLLvNBYqJAPN0pQ3ip7Nq8BRXvEk6wJAL3Rt
s9hq5HckzfRyX/JL/IieOAYtKfrGKJBh0BdZU8D4OQKOP1wwM2ZLrJgkysixdr+3
PfY3AQKHfVmOpUBxOQJBAIASnpdHnc3CcsAhsbvDHPNvj8ddu13CUv2gJ0ZynJpy
LRe97pZ+ABCAksk8GyFclBotlznHQq7knEHAO8FaiBQ=
-----END RSA PRIVATE KEY-----
EOK
}

job "functions_data" {
  meta {
    yaml_map        = yamlencode({a = "b", c = [1, 2.5, true, null], "d e" = {x = "multi\nline", y = "trailing\n"}, n = 12345678901})
    yaml_string     = yamlencode("plain")
    yaml_quoted     = yamlencode("tab\there \"q\" ünï")
    yaml_empty_list = yamlencode([])
    yaml_empty_map  = yamlencode({})
    yaml_list       = yamlencode(["x", {k = "v", l = ["a", "b"]}, [1, [2]], {}])
    yaml_spaces     = yamlencode(" lead\nand trail ")
    yaml_decode     = jsonencode(yamldecode("a: 1\nb: [x, yes, No, on]\nc: {d: true}\ne: ~\nf: '2'\ng: 1.5\nh: 0x1F\ni: -7\nk: |\n  text\n  more\nl: >\n  folded\n  line\nm: &anchor\n  p: q\nn: *anchor\no: 2001-12-14\n"))
    yaml_decode_doc = jsonencode(yamldecode("---\n- 1\n- two\n- null\n- \"3\"\n"))
    cidr_subnets    = jsonencode(cidrsubnets("10.1.0.0/16", 4, 4, 8, 4))
    cidr_subnets6   = jsonencode(cidrsubnets("fd00:fd12:3456:7890::/56", 16, 16, 16, 32))
    cidr_subnets0   = jsonencode(cidrsubnets("10.0.0.0/8"))
    date_a          = formatdate("DD MMM YYYY hh:mm ZZZ", "2018-01-02T23:12:01Z")
    date_b          = formatdate("EEEE, DD-MMM-YY hh:mm:ss ZZZZZ", "2018-01-02T23:12:01-08:00")
    date_c          = formatdate("h:mm AA 'o''clock' EEE M/D/YY ZZZZ Z aa", "2018-01-02T03:04:05+05:30")
    date_d          = formatdate("HH:m:s H MMMM YYYY-MM-DD'T'hh:mm:ssZ", "2021-12-31T12:00:09.123Z")
    date_e          = formatdate("''", "2021-12-31T00:00:00Z")
    convert_map     = jsonencode(convert({a = 1, b = true}, map(string)))
    convert_list    = jsonencode(convert([1, 2], list(string)))
    convert_string  = convert(5, string)
    convert_number  = convert("12.5", number) + 1
    convert_bool    = convert("true", bool)
    convert_set     = jsonencode(convert(["b", "a", "b"], set(string)))
    convert_object  = jsonencode(convert({a = "1", b = "x"}, object({a = number, b = string})))
    convert_tuple   = jsonencode(convert(["1", 2], tuple([number, string])))
    convert_any     = jsonencode(convert([1, "a"], list(any)))
    yaml_long       = yamlencode({k = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam,  quis nostrud exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat."})
    yaml_top_block  = yamlencode("one\ntwo")
    yaml_lead_block = yamlencode(["  indented\nnext", "\nstarts with a break\n", "keep\n\n"])
    yaml_key_break  = yamlencode({"a\nb" = 1, "" = "", "tab\tkey" = [{}]})
    yaml_special    = yamlencode(["back\\slash", "bell\u0007", "line\u2028sep", "a\r\nb", "trailing \nspace"])
    yaml_nested     = yamlencode({a = {b = {c = ["x\ny", {d = []}]}}})
    yaml_decode_more = jsonencode(yamldecode("base: &b\n  x: 1\n  y: 2\nderived:\n  <<: *b\n  y: 3\nq: !!str 123\nr: !!int \"42\"\ns: 0o17\nt: 017\nu: 1_000\nv: 2001-12-14t21:59:43.10-05:00\nw: 2001-12-14 21:59:43.10\nx: +12\ny: -.5e3\nz: 0b101\n"))
    yaml_decode_empty = can(yamldecode(""))
    rsa_decrypt     = rsadecrypt("BC6Cq4bxIkMXi/a6cbowjv8jA1hvGkcesBJR6ItgB4TizUSzmmlAP4IdnIbFWYs5I7u4rW9pwBaRDPcF+2G2UroG5jiFaKeyJYn0yHBDq+OS+FvHFiaNTp4qwzgG+gaNHy9W4lcu/+0GaujbI8AvnpNmFp25I09HWiKTTI3LLug=", local.rsa_key)
  }
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "true"
      }
    }
  }
}
