# A docker task runs with the config Nomad users write, but the docker config keys drover does
# not implement are refused at register, each by name.
job "containers" {
  group "web" {
    network {
      port "http" {
        to = 8080
      }
    }

    task "server" {
      driver = "docker"

      config {
        image = "registry.example.com/web:1.4"
        ports = ["http"]

        userns_mode = "host"

        port_map {
          http = 8080
        }
      }
    }
  }
}
