"""Shared helpers of the bench/ scripts: where the binaries are, what machine this is, how
loaded it was while a benchmark ran, and markdown tables. Standard library only."""

import datetime
import os
import re
import shlex
import subprocess
import sys
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build_dir():
    """The CMake build folder holding the binaries: $INFINIPIPE_BUILD_DIR, else build/."""
    d = os.environ.get("INFINIPIPE_BUILD_DIR", "build")
    return d if os.path.isabs(d) else os.path.join(ROOT, d)


def binary(name="infinipipe"):
    """Path of a built program; exits with a message saying how to build it when missing."""
    if name == "infinipipe" and os.environ.get("INFINIPIPE_BIN"):
        path = os.environ["INFINIPIPE_BIN"]
    else:
        path = os.path.join(build_dir(), name)
    if os.path.abspath(path).startswith(ROOT + os.sep):
        path = os.path.relpath(os.path.abspath(path), ROOT)  # shorter commands in the docs
    if not os.access(os.path.join(ROOT, path), os.X_OK):
        sys.exit(
            f"error: {path} not found; build it first (cmake --preset release && "
            f"cmake --build --preset release --target {name}) or point INFINIPIPE_BUILD_DIR "
            f"at the build folder that has it")
    return path


def env_int(name, default):
    v = os.environ.get(name, str(default))
    try:
        return int(v)
    except ValueError:
        sys.exit(f"error: {name}={v!r} must be an integer")


def run(cmd, check=True, env=None, cwd=ROOT):
    """Runs a command, returns (returncode, stdout, stderr). On failure with check=True, exits
    printing the command and its stderr."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    p = subprocess.run(cmd, capture_output=True, text=True, env=full_env, cwd=cwd)
    if check and p.returncode != 0:
        sys.exit(f"error: `{shlex.join(cmd)}` failed (exit {p.returncode}):\n"
                 f"{p.stdout[-2000:]}{p.stderr[-4000:]}")
    return p.returncode, p.stdout, p.stderr


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


class LoadSampler:
    """Samples the 1-minute load average every few seconds while a benchmark runs (the VM is
    shared: the numbers mean little without it)."""

    def __init__(self, period_s=5.0):
        self.samples = [loadavg()]
        self._stop = threading.Event()
        self._period = period_s
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        while not self._stop.wait(self._period):
            self.samples.append(loadavg())

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.samples.append(loadavg())

    def describe(self):
        s = self.samples
        return f"load average (1 min) during the run: min {min(s):.2f}, max {max(s):.2f}"


def machine_lines():
    """Markdown bullet lines: date, CPU model and count, memory, load, commit."""
    fields = {}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            key, _, val = line.partition(":")
            fields.setdefault(key.strip(), val.strip())
    except OSError:
        pass
    model = fields.get("Model name", "unknown")
    if "CPU family" in fields:
        model += f" (family {fields['CPU family']}, model {fields.get('Model', '?')})"
    if "Hypervisor vendor" in fields:
        model += f", {fields['Hypervisor vendor']} VM"
    cpus = fields.get("CPU(s)", str(os.cpu_count()))
    have = [x for x in ("avx2", "avx512f", "avx512_bf16")
            if re.search(rf"\b{x}\b", fields.get("Flags", ""))]
    flags = f", {' '.join(have)}" if have else ""
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
        mem = f", {kb / 2**20:.0f} GiB memory"
    except (OSError, ValueError, IndexError):
        pass
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return [
        f"- date: {now}",
        f"- machine: {model}, {cpus} CPUs{flags}{mem}",
        f"- load average (1 min) at the start: {loadavg():.2f}",
        f"- tree: commit {commit}{' + uncommitted changes' if dirty else ''}",
    ]


def report_benchmark(title, exe_name, env=None, command_note=""):
    """Runs a C++ benchmark program with this script's arguments (QUICK=1 adds --quick) and
    prints its markdown after the machine, the load while it ran and the command."""
    args = sys.argv[1:]
    if os.environ.get("QUICK") == "1" and "--quick" not in args:
        args.append("--quick")
    cmd = [binary(exe_name)] + args
    print(f"# {title}\n")
    print("\n".join(machine_lines()))
    with LoadSampler() as load:
        _, out, _ = run(cmd, env=env)
    print(f"- {load.describe()}")
    print(f"- command: `{' '.join(cmd)}`{command_note}\n")
    print(out.rstrip())


def md_table(headers, rows, align=None):
    """A markdown table; align is a string of 'l'/'r' per column (default: first l, rest r)."""
    align = align or "l" + "r" * (len(headers) - 1)
    out = ["| " + " | ".join(headers) + " |",
           "|" + "|".join("---" if a == "l" else "---:" for a in align) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out)


def mib(nbytes):
    return f"{nbytes / 2**20:.1f}"


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    if n == 0:
        return float("nan")
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])
