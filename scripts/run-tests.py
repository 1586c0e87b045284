#!/usr/bin/env python3
"""Builds every test executable of the workspace once, then runs them several at a time.

`cargo test --workspace` runs its test executables one after the other. Most of drover's time
in them is spent waiting (agents starting, tasks running, timers), not computing, so running a
few executables side by side shortens the whole run without changing a single test. Each
executable still runs its own tests on its own threads, as under `cargo test`; it runs with
the working directory and the `CARGO_*` variables `cargo test` gives it, its output is kept
and printed whole when it ends (so the log reads one executable at a time), and a failed one
does not stop the others (`--no-fail-fast`). Doc tests run at the end through cargo.

What is not here: choosing tests inside an executable or retrying anything. A test that fails
when another executable runs beside it is a bug in that test.

    scripts/run-tests.py [--also NAME=SHELL-COMMAND ...] [cargo test arguments ...] [-- test args]

`--also` runs one more command in the same pool once the build is done (from the workspace
root, through `sh -c`), reported like an executable: the interop suite, which needs the built
agent, runs beside the Rust tests this way.

DROVER_TEST_JOBS sets how many executables run at once (default 3; 1 runs them one after the
other, as `cargo test` does).
"""

import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import threading
import time


def without_doctests():
    """The workspace packages whose library says `doctest = false`."""
    metadata = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--no-deps", "--format-version=1"],
            stdout=subprocess.PIPE,
            text=True,
            check=True,
        ).stdout
    )
    return sorted(
        package["name"]
        for package in metadata["packages"]
        for target in package["targets"]
        if "lib" in target["kind"] and not target.get("doctest", True)
    )


def build(cargo_args):
    """Builds the test executables with `cargo test --no-run`; answers one dict per executable."""
    command = [
        "cargo",
        "test",
        "--no-run",
        "--message-format=json-render-diagnostics",
        *cargo_args,
    ]
    process = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=False)
    if process.returncode != 0:
        sys.exit(process.returncode)
    packages = {}
    executables = []
    for line in process.stdout.splitlines():
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            continue
        if message.get("reason") != "compiler-artifact":
            continue
        executable = message.get("executable")
        if not executable or not message.get("profile", {}).get("test"):
            continue
        target = message["target"]
        manifest = message["manifest_path"]
        package_id = message["package_id"]
        packages.setdefault(package_id, manifest)
        executables.append(
            {
                "executable": executable,
                "manifest": manifest,
                "package": package_name(package_id, manifest),
                "version": package_version(package_id),
                "kind": target["kind"][0],
                "name": target["name"],
            }
        )
    return executables


def package_name(package_id, manifest):
    # `path+file:///…/crates/cli#drover@0.1.0` (or the older `drover 0.1.0 (path+file://…)`).
    if "#" in package_id:
        tail = package_id.rsplit("#", 1)[1]
        if "@" in tail:
            return tail.split("@", 1)[0]
        return os.path.basename(os.path.dirname(manifest))
    return package_id.split(" ", 1)[0]


def package_version(package_id):
    if "#" in package_id:
        tail = package_id.rsplit("#", 1)[1]
        return tail.split("@", 1)[1] if "@" in tail else tail
    parts = package_id.split(" ")
    return parts[1] if len(parts) > 1 else ""


def label(item):
    if "command" in item:
        return item["label"]
    if item["kind"] == "test":
        return f"{item['package']} tests/{item['name']}.rs"
    return f"{item['package']} {item['kind']} {item['name']}"


def order(executables):
    """End-to-end executables first: they take longest, so starting them early packs best."""
    return sorted(
        executables,
        key=lambda item: (not item["name"].startswith("e2e_"), item["package"], item["name"]),
    )


def run_command(command):
    started = time.monotonic()
    with tempfile.TemporaryFile() as output:
        code = subprocess.call(
            ["sh", "-c", command],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
        output.seek(0)
        text = output.read().decode("utf-8", "replace")
    return code, time.monotonic() - started, text


def run_one(item, test_args):
    if "command" in item:
        return run_command(item["command"])
    manifest_dir = os.path.dirname(item["manifest"])
    environment = dict(os.environ)
    environment.update(
        {
            "CARGO_MANIFEST_DIR": manifest_dir,
            "CARGO_MANIFEST_PATH": item["manifest"],
            "CARGO_PKG_NAME": item["package"],
            "CARGO_PKG_VERSION": item["version"],
            "CARGO_CRATE_NAME": item["name"].replace("-", "_"),
            "CARGO_PRIMARY_PACKAGE": "1",
        }
    )
    environment.setdefault("CARGO", "cargo")
    started = time.monotonic()
    with tempfile.TemporaryFile() as output:
        code = subprocess.call(
            [item["executable"], *test_args],
            cwd=manifest_dir,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
        output.seek(0)
        text = output.read().decode("utf-8", "replace")
    return code, time.monotonic() - started, text


def main():
    arguments = sys.argv[1:]
    also = []
    while len(arguments) >= 2 and arguments[0] == "--also":
        name, _, command = arguments[1].partition("=")
        also.append({"label": name, "command": command})
        arguments = arguments[2:]
    # Arguments after `--` go to the test executables, as with `cargo test`.
    if "--" in arguments:
        split = arguments.index("--")
        cargo_args, test_args = arguments[:split], arguments[split + 1 :]
    else:
        cargo_args, test_args = arguments, []
    jobs = max(1, int(os.environ.get("DROVER_TEST_JOBS", "3")))
    executables = order(build(cargo_args))
    # The extra commands are long (the interop suite is about a minute): they start first.
    executables = also + executables
    print(f"== running {len(executables)} test executables, {jobs} at a time", flush=True)
    printing = threading.Lock()
    results = []
    started = time.monotonic()

    def run_and_report(item):
        code, seconds, text = run_one(item, test_args)
        verdict = "ok" if code == 0 else f"FAILED (exit {code})"
        with printing:
            print(f"\n== {label(item)}: {verdict} in {seconds:.1f}s", flush=True)
            sys.stdout.write(text)
            sys.stdout.flush()
        results.append((seconds, code, label(item)))

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for future in [pool.submit(run_and_report, item) for item in executables]:
            future.result()
    wall = time.monotonic() - started

    print("\n== slowest test executables")
    for seconds, code, name in sorted(results, reverse=True)[:10]:
        print(f"{seconds:7.1f}s {name}{'' if code == 0 else '  FAILED'}")
    total = sum(seconds for seconds, _, _ in results)
    print(f"== {len(results)} executables in {wall:.1f}s ({total:.1f}s one after the other)")

    # Doc tests are compiled by rustdoc when they run; cargo does that, unless the arguments
    # chose targets (cargo refuses `--doc` beside them, and they did not ask for doc tests).
    selectors = ("--lib", "--bin", "--bins", "--test", "--tests", "--example", "--examples",
                 "--bench", "--benches", "--all-targets")
    doc = 0
    if not any(arg.split("=", 1)[0] in selectors for arg in cargo_args):
        doc_args = [arg for arg in cargo_args if arg != "--no-fail-fast"]
        if "--workspace" in doc_args:
            # `cargo test --doc` runs every library's doc tests, also those whose manifest
            # says `doctest = false` (which `cargo test` alone honours): leave those out.
            doc_args += [f"--exclude={name}" for name in without_doctests()]
        doc = subprocess.call(["cargo", "test", "--doc", *doc_args, "--", *test_args])

    failed = [name for _, code, name in results if code != 0]
    if doc != 0:
        failed.append("doc tests")
    if failed:
        print("\n== failed:\n" + "\n".join(f"  {name}" for name in sorted(failed)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
