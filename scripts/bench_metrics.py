"""Measures /v1/metrics: scrape time and size (Prometheus text and JSON) and the agent's CPU
while it publishes per-task gauges, on a dev agent running COUNT sleeping raw_exec tasks.

Usage: python3 scripts/bench_metrics.py PATH/TO/drover COUNT
"""
import os, re, subprocess, sys, threading, time, urllib.request, json
binary = sys.argv[1]
count = int(sys.argv[2])
p = subprocess.Popen([binary, "agent", "-dev", "-http-port=0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
addr = {}
ev = threading.Event()
def rd():
    for line in p.stdout:
        m = re.search(r"http://([\d.]+:\d+)", line)
        if m and not ev.is_set():
            addr["a"] = m.group(1); ev.set()
threading.Thread(target=rd, daemon=True).start()
ev.wait(60)
base = "http://" + addr["a"]
def get(path):
    with urllib.request.urlopen(base + path) as r: return r.read()
def put(path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="PUT")
    with urllib.request.urlopen(req) as r: return r.read()
while not json.loads(get("/v1/nodes")): time.sleep(0.1)
job = {"Job": {"ID": "b", "Name": "b", "Type": "service", "Datacenters": ["dc1"], "TaskGroups": [{"Name": "g", "Count": count, "Tasks": [{"Name": "t", "Driver": "raw_exec", "Config": {"command": "/bin/sleep", "args": ["3600"]}, "Resources": {"CPU": 10, "MemoryMB": 10}}]}]}}
put("/v1/jobs", job)
while sum(1 for a in json.loads(get("/v1/job/b/allocations")) if a["ClientStatus"] == "running") < count: time.sleep(0.2)
time.sleep(2)
for fmt in ("?format=prometheus", ""):
    t = time.perf_counter(); n = 100
    for _ in range(n): body = get("/v1/metrics" + fmt)
    dt = (time.perf_counter() - t) / n
    print(f"/v1/metrics{fmt}: {dt*1000:.2f} ms per scrape, {len(body)} bytes")
def cpu():
    f = open(f"/proc/{p.pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
c0 = cpu(); time.sleep(20); c1 = cpu()
print(f"agent cpu over 20 s idle with {count} running tasks, 1 s collection: {(c1-c0)/20*100:.2f}%")
put_del = urllib.request.Request(base + "/v1/job/b?purge=true", method="DELETE")
urllib.request.urlopen(put_del).read()
time.sleep(3)
p.terminate(); p.wait(60)
