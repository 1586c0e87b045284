"""What the interop tests share: starting a real dev agent ($DROVER_BIN) on a free port and
waiting, with a bound, for something to become true."""

import os
import re
import subprocess
import threading
import time


def wait_for(what, probe, limit=60.0):
    """Polls `probe` until it returns something true, which is returned; fails after `limit`."""
    deadline = time.monotonic() + limit
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def start_dev_agent(*extra_args):
    """Starts `drover agent -dev -http-port=0 EXTRA_ARGS`; returns (process, host, port) once it
    has printed the address it serves on."""
    binary = os.environ.get("DROVER_BIN", "target/debug/drover")
    process = subprocess.Popen(
        [binary, "agent", "-dev", "-http-port=0", *extra_args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    address = {}
    ready = threading.Event()

    def read_stdout():
        for line in process.stdout:
            match = re.search(r"http://([\d.]+):(\d+)", line)
            if match and not ready.is_set():
                address["host"], address["port"] = match.group(1), int(match.group(2))
                ready.set()

    threading.Thread(target=read_stdout, daemon=True).start()
    assert ready.wait(60), "the agent printed its HTTP address"
    return process, address["host"], address["port"]
