#!/usr/bin/env python3
# Start latency of a task under drover-shim with and without exec isolation: the time from
# launching the shim to its "ready" report (the task has exec'd by then), alternating the two
# kinds, 15 of each. Needs root and cgroups. Build first:
#   cargo build --release -p drover-shim --example shim-dev
import json, os, subprocess, time, socket, statistics, shutil, sys
SHIM = sys.argv[1] if len(sys.argv) > 1 else "target/release/examples/shim-dev"
base = "/tmp/drover-exec-start-bench"
caps = ["CAP_AUDIT_WRITE","CAP_CHOWN","CAP_DAC_OVERRIDE","CAP_FOWNER","CAP_FSETID","CAP_KILL","CAP_MKNOD","CAP_NET_BIND_SERVICE","CAP_NET_RAW","CAP_SETFCAP","CAP_SETGID","CAP_SETPCAP","CAP_SETUID","CAP_SYS_CHROOT"]
def spec(i, isolated):
    d = f"{base}/{i}"
    for s in ["task/local","task/secrets","task/tmp","alloc/logs"]:
        os.makedirs(f"{d}/{s}", exist_ok=True)
    sp = {"version":1,"task_id":f"b{i}","command":"/bin/true" if not isolated else "true","args":[],
          "env":[["PATH","/usr/bin:/bin"]],"cwd":"/" ,"user":"nobody","state_dir":f"{d}/state",
          "logs":{"dir":f"{d}/alloc/logs","task_name":"t","max_files":2,"max_file_size_bytes":100000},
          "cgroup":{"root":"/sys/fs/cgroup","name":f"drover-bench/b{i}","memory_hard_bytes":67108864}}
    if isolated:
        sp["isolation"] = {"root":f"{d}/task","binds":[{"source":p,"target":p,"read_only":True} for p in ["/bin","/etc","/lib","/lib64","/sbin","/usr"]]+[{"source":f"{d}/alloc","target":"/alloc","read_only":False}],
            "capabilities":caps,"owned_by_task_user":[f"{d}/task/local"]}
    path = f"{d}/spec.json"
    json.dump(sp, open(path,"w"))
    return path, f"{d}/state/shim.sock"
def cleanup(sock):
    s = socket.socket(socket.AF_UNIX); s.connect(sock); s.sendall(b'{"op":"cleanup"}\n'); s.recv(4096); s.close()
res = {False: [], True: []}
i = 0
for rnd in range(15):
    for iso in (False, True):
        i += 1
        path, sock = spec(i, iso)
        t = time.perf_counter()
        out = subprocess.run([SHIM, path], capture_output=True, text=True)
        dt = (time.perf_counter() - t) * 1000
        assert '"ready"' in out.stdout, out.stdout
        res[iso].append(dt)
        cleanup(sock)
for iso in (False, True):
    v = sorted(res[iso])
    print("exec" if iso else "raw_exec", "median %.1f ms  p90 %.1f ms  min %.1f ms" % (statistics.median(v), v[int(len(v)*0.9)-1], v[0]))
shutil.rmtree(base)
