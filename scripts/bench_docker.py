"""Docker task start latency through drover against the engine alone, and the agent's memory
per docker task. Run by scripts/bench-docker, which starts the engine and imports the image.

Usage: python3 scripts/bench_docker.py DROVER N WORKDIR   (DOCKER_HOST=unix://… set)

N rounds, each starting one container each way in turn (so each way starts with the same
containers already running, whatever the machine's load does meanwhile), then medians
printed with min and max:
  - `docker run -d IMAGE sleep 1000` (the CLI: a process, an image inspect, create, start);
  - the engine API alone: create + start of the same image and command, timed in-process;
  - the engine API alone with the options drover gave its container in the same round (its
    Config and HostConfig read back: mounts, limits, env, log config; not its labels);
  - drover: one job of one docker task, registered over the HTTP API and polled every 5 ms.
The container's own times (Created, State.StartedAt) split each start. For the engine API
alone: the create request sent -> Created, and StartedAt -> the start request answered, are
the engine's time outside Created -> StartedAt. For drover: Task Setup -> Created is the
task's hooks, the image check and the create request; StartedAt -> Started is the engine
answering the start, then the client's inspect, log follower, handle persisted and event
recorded. drover's own time is what these two exceed the engine's by.
Then the agent's RSS growth per running docker task, and register -> N running for one job
of count N.
"""
import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from datetime import datetime, timezone

DROVER, N, WORK = sys.argv[1], int(sys.argv[2]), sys.argv[3]
SOCKET = os.environ["DOCKER_HOST"].removeprefix("unix://")
IMAGE = "local/busybox:1"


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost")
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


ENGINE = UnixConnection(SOCKET)


def engine(method, path, body=None):
    payload = None if body is None else json.dumps(body)
    headers = {"Content-Type": "application/json"} if body is not None else {}
    ENGINE.request(method, "/v1.41" + path, body=payload, headers=headers)
    response = ENGINE.getresponse()
    data = response.read()
    if response.status >= 300:
        raise RuntimeError(f"{method} {path}: {response.status} {data[:300]!r}")
    return json.loads(data) if data else None


def rfc3339_ns(text):
    """The engine's RFC 3339 time (nanoseconds, Z) as Unix nanoseconds."""
    match = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?Z", text)
    seconds = datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
    fraction = (match.group(2) or "").ljust(9, "0")[:9]
    return int(seconds.timestamp()) * 1_000_000_000 + int(fraction)


def summary(name, values):
    values = sorted(values)
    print(
        f"{name}: {values[0]:.1f} / {statistics.median(values):.1f} / {values[-1]:.1f} ms "
        f"(min / median / max of {len(values)})",
        flush=True,
    )


def remove_all():
    for container in engine("GET", "/containers/json?all=1"):
        engine("DELETE", f"/containers/{container['Id']}?force=1&v=1")


def direct_cli(i):
    start = time.perf_counter()
    subprocess.run(
        ["docker", "run", "-d", "--name", f"cli-{i}", IMAGE, "sleep", "1000"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return (time.perf_counter() - start) * 1000


def direct_api(body, name):
    """create + start over the API (ms); and, from the container's own times, the engine's
    Created -> StartedAt, the create request sent -> Created, and StartedAt -> the start
    request answered (ms)."""
    sent_ns = time.time_ns()
    start = time.perf_counter()
    created = engine("POST", f"/containers/create?name={name}", body)
    engine("POST", f"/containers/{created['Id']}/start")
    elapsed = (time.perf_counter() - start) * 1000
    answered_ns = time.time_ns()
    inspect = engine("GET", f"/containers/{created['Id']}/json")
    created_ns = rfc3339_ns(inspect["Created"])
    started_ns = rfc3339_ns(inspect["State"]["StartedAt"])
    return {
        "create + start": elapsed,
        "container Created -> StartedAt": (started_ns - created_ns) / 1e6,
        "create sent -> container Created": (created_ns - sent_ns) / 1e6,
        "container StartedAt -> start answered": (answered_ns - started_ns) / 1e6,
    }


class Agent:
    def __init__(self):
        config = os.path.join(WORK, "bench-agent.hcl")
        with open(config, "w") as file:
            file.write(f'plugin "docker" {{\n  config {{\n    endpoint = "unix://{SOCKET}"\n  }}\n}}\n')
        self.log = open(os.path.join(WORK, "bench-agent.log"), "w")
        self.process = subprocess.Popen(
            [DROVER, "agent", "-dev", "-data-dir", os.path.join(WORK, "drover"),
             "-config", config, "-http-port=0"],
            stdout=subprocess.PIPE, stderr=self.log, text=True,
        )
        found = threading.Event()
        self.base = None

        def read():
            for line in self.process.stdout:
                match = re.search(r"http://([\d.]+:\d+)", line)
                if match and not found.is_set():
                    self.base = "http://" + match.group(1)
                    found.set()

        with open(os.path.join(WORK, "agent.pid"), "w") as pid_file:
            pid_file.write(str(self.process.pid))
        threading.Thread(target=read, daemon=True).start()
        if not found.wait(60):
            raise RuntimeError("the agent did not start")
        while not any(node["Status"] == "ready" for node in self.get("/v1/nodes")):
            time.sleep(0.1)

    def get(self, path):
        with urllib.request.urlopen(self.base + path) as response:
            return json.loads(response.read())

    def put(self, path, body):
        request = urllib.request.Request(
            self.base + path, data=json.dumps(body).encode(), method="PUT"
        )
        with urllib.request.urlopen(request) as response:
            return json.loads(response.read())

    def rss_kb(self):
        with open(f"/proc/{self.process.pid}/status") as status:
            return int(re.search(r"VmRSS:\s+(\d+)", status.read()).group(1))

    def stop(self):
        self.process.terminate()
        self.process.wait(30)


def job(job_id, count):
    return {"Job": {
        "ID": job_id, "Name": job_id, "Type": "service", "Datacenters": ["dc1"],
        "TaskGroups": [{"Name": "g", "Count": count, "Tasks": [{
            "Name": "t", "Driver": "docker",
            "Config": {"image": IMAGE, "command": "sleep", "args": ["1000"]},
            "Resources": {"CPU": 20, "MemoryMB": 16},
        }]}],
    }}


def running(agent, job_id, count):
    allocs = agent.get(f"/v1/job/{job_id}/allocations")
    return [a for a in allocs if a["ClientStatus"] == "running"] if len(allocs) >= count else []


def drover_start(agent, i, figures):
    """One job of one docker task, registered and polled until running; returns its container."""
    job_id = f"bench-{i}"
    start = time.perf_counter()
    agent.put("/v1/jobs", job(job_id, 1))
    while not (allocs := running(agent, job_id, 1)):
        time.sleep(0.005)
    figures["register -> running seen"].append((time.perf_counter() - start) * 1000)
    alloc = agent.get(f"/v1/allocation/{allocs[0]['ID']}")
    events = {event["Type"]: event["Time"] for event in alloc["TaskStates"]["t"]["Events"]}
    label = json.dumps({"label": [f"com.hashicorp.nomad.alloc_id={alloc['ID']}"]})
    containers = engine("GET", "/containers/json?filters=" + urllib.request.quote(label))
    inspect = engine("GET", f"/containers/{containers[0]['Id']}/json")
    created = rfc3339_ns(inspect["Created"])
    started_at = rfc3339_ns(inspect["State"]["StartedAt"])
    ms = lambda nanos: nanos / 1e6
    figures["alloc CreateTime -> Started"].append(ms(events["Started"] - alloc["CreateTime"]))
    figures["Received -> Started"].append(ms(events["Started"] - events["Received"]))
    figures["Task Setup -> Started"].append(ms(events["Started"] - events["Task Setup"]))
    figures["Task Setup -> container Created"].append(ms(created - events["Task Setup"]))
    figures["container Created -> StartedAt"].append(ms(started_at - created))
    figures["container StartedAt -> Started"].append(ms(events["Started"] - started_at))
    return inspect


def main():
    remove_all()
    agent = Agent()
    try:
        measure_with(agent)
    finally:
        agent.stop()


def measure_with(agent):
    """N rounds of: the CLI, the API, drover, the API with drover's options, so that each
    way starts with the same containers already running (load on the machine varies)."""
    api_parts = ("create + start", "container Created -> StartedAt",
                 "create sent -> container Created", "container StartedAt -> start answered")
    figures = {key: [] for key in (
        "docker run -d (CLI)",
        *(f"engine API: {part}" for part in api_parts),
        *(f"engine API, drover's container options: {part}" for part in api_parts),
        "drover register -> running seen", "drover alloc CreateTime -> Started",
        "drover Received -> Started", "drover Task Setup -> Started",
        "drover Task Setup -> container Created", "drover container Created -> StartedAt",
        "drover container StartedAt -> Started")}
    drover = {key.removeprefix("drover "): figures[key] for key in figures if key.startswith("drover ")}
    rss_before = agent.rss_kb()
    for i in range(N):
        figures["docker run -d (CLI)"].append(direct_cli(i))
        for part, value in direct_api({"Image": IMAGE, "Cmd": ["sleep", "1000"]}, f"api-{i}").items():
            figures[f"engine API: {part}"].append(value)
        container = drover_start(agent, i, drover)
        body = dict(container["Config"])
        # Without drover's labels: a container of this node's allocations that no task
        # tracks would be removed as dangling.
        body["Labels"] = {
            key: value for key, value in body["Labels"].items()
            if not key.startswith(("com.hashicorp.nomad.", "drover."))
        }
        body["HostConfig"] = container["HostConfig"]
        for part, value in direct_api(body, f"same-{i}").items():
            figures[f"engine API, drover's container options: {part}"].append(value)
    time.sleep(2)
    rss_after = agent.rss_kb()
    for name, values in figures.items():
        summary(name, values)
    print(
        f"agent RSS: {rss_before} kB idle, {rss_after} kB with {N} docker tasks: "
        f"{(rss_after - rss_before) / N:.0f} kB per task",
        flush=True,
    )
    for i in range(N):
        request = urllib.request.Request(agent.base + f"/v1/job/bench-{i}", method="DELETE")
        urllib.request.urlopen(request).read()
    while any(c["Labels"].get("com.hashicorp.nomad.alloc_id") for c in engine("GET", "/containers/json?all=1")):
        time.sleep(0.1)
    remove_all()

    start = time.perf_counter()
    agent.put("/v1/jobs", job("many", N))
    while len(running(agent, "many", N)) < N:
        time.sleep(0.02)
    print(f"drover register -> {N} docker tasks running (one job, count {N}): "
          f"{(time.perf_counter() - start) * 1000:.0f} ms", flush=True)
    request = urllib.request.Request(agent.base + "/v1/job/many", method="DELETE")
    urllib.request.urlopen(request).read()
    while engine("GET", "/containers/json?all=1"):
        time.sleep(0.1)


main()
