# A bridge network: each allocation gets a network namespace of its own on the node's "nomad"
# bridge (172.26.64.0/20), and its port "http" is mapped from a dynamic host port to 8080
# inside. Run it as root on a node with the CNI plugins and iptables
# (apt-get install containernetworking-plugins iptables):
#
#   drover agent -dev &
#   drover job run examples/bridge.hcl
#   drover alloc status <alloc>      # Network Address, and the host port under Allocation Addresses
#   curl http://127.0.0.1:<host port>/
#
# Both allocations listen on 8080 in their own namespaces; the host reaches them through the
# mapped ports, and they reach each other on their bridge addresses.

job "bridge" {
  datacenters = ["*"]
  type        = "service"

  group "web" {
    count = 2

    network {
      mode = "bridge"

      port "http" {
        to = 8080
      }
    }

    task "server" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "mkdir -p $NOMAD_TASK_DIR/www && cd $NOMAD_TASK_DIR/www && echo \"alloc $NOMAD_ALLOC_INDEX at $NOMAD_ALLOC_ADDR_http\" > index.html && exec python3 -m http.server 8080"]
      }

      resources {
        cpu    = 50
        memory = 64
      }
    }
  }
}
