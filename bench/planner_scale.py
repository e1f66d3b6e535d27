#!/usr/bin/env python3
"""The planner at scale, before and after side by side: `infinipipe plan` of one replica's batch
for 8192 sequences at pp 32 and pp 4 and for a 512-GPU cluster (sequences up to 1M tokens, dp 8:
every replica), run by a base build ($INFINIPIPE_BASE_BIN, optional) and by this build, in turns,
so both see the same load. Per run: the planner's own time ("searched in", wall), the process's
CPU seconds and peak RSS (getrusage of the child), the exact recompute solve's gap, and whether
the plan JSON is byte for byte the base build's. Markdown.
PLANNER_THREADS (default 1,2): the thread counts this build is run with."""

import filecmp
import os
import re
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common as bc  # noqa: E402

CLUSTER = ["--config", "examples/llama30b-96k.yaml", "--seq-length", "1048576",
           "--max-position-embeddings", "1048576", "--num-devices", "512",
           "--devices-per-node", "8", "--pp", "16", "--dp", "8", "--ulysses-degree", "4",
           "--global-batch-size", "4096", "--distribution", "github"]


def cases():
    out = [
        ("7B 48K, 8192 seqs, pp 32", ["--config", "examples/llama7b-48k.yaml", "--pp", "32",
                                      "--num-devices", "256", "--global-batch-size", "8192",
                                      "--distribution", "github"]),
        ("30B 96K, 8192 seqs, pp 32", ["--config", "examples/llama30b-96k.yaml", "--pp", "32",
                                       "--num-devices", "256", "--global-batch-size", "8192",
                                       "--distribution", "github"]),
        ("30B 96K, 8192 seqs, pp 4", ["--config", "examples/llama30b-96k.yaml",
                                      "--global-batch-size", "8192", "--distribution", "github"]),
    ]
    for r in range(8):
        out.append((f"512 GPUs, 1M, replica {r}", CLUSTER + ["--replica", str(r)]))
    return out


def run_plan(exe, args, threads, out_json):
    cmd = [exe, "plan", "--out", out_json] + args
    if threads is not None:
        cmd += ["--planner-threads", str(threads)]
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, cwd=bc.ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"error: {' '.join(cmd)} failed:\n{out[-3000:]}")
    searched = re.search(r"searched in ([0-9.]+) s", out)
    gap = re.search(r"\(gap ([0-9.]+)%\)", out)
    chunks = re.search(r"chunks: (\d+)", out)
    setting = re.search(r"setting: ([^(]*)\(", out)
    return {
        "plan_s": float(searched.group(1)) if searched else float("nan"),
        "cpu_s": ru.ru_utime + ru.ru_stime,
        "rss_mib": ru.ru_maxrss / 1024.0,
        "wall_s": wall,
        "gap": gap.group(1) + "%" if gap else "?",
        "what": f"{chunks.group(1) if chunks else '?'} chunks, "
                f"{setting.group(1).strip() if setting else '?'}",
        "out": out,
    }


def main():
    base = os.environ.get("INFINIPIPE_BASE_BIN", "")
    exe = bc.binary("infinipipe")
    threads = [int(t) for t in os.environ.get("PLANNER_THREADS", "1,2").split(",")]
    print("# Planner at scale: before and after\n")
    print("\n".join(bc.machine_lines()))
    rows = []
    tmp = tempfile.mkdtemp(prefix="planner_scale_")
    with bc.LoadSampler() as load:
        for name, args in cases():
            row = [name]
            ref = os.path.join(tmp, "base.json")
            if base:
                b = run_plan(base, args, None, ref)
                row += [f"{b['plan_s']:.2f} s", f"{b['cpu_s']:.2f} s", f"{b['rss_mib']:.0f}",
                        b["gap"]]
            for t in threads:
                mine = os.path.join(tmp, f"new{t}.json")
                n = run_plan(exe, args, t, mine)
                same = ""
                if base:
                    same = (", same plan" if filecmp.cmp(ref, mine, shallow=False)
                            else ", plan differs")
                row += [f"{n['plan_s']:.2f} s", f"{n['cpu_s']:.2f} s", f"{n['rss_mib']:.0f}",
                        n["gap"] + same]
            row.append(n["what"])
            rows.append(row)
    print(f"- {load.describe()}")
    print(f"- base: `{base or 'none'}`; this build: `{exe}`; OMP_NUM_THREADS=1\n")
    headers = ["case"]
    if base:
        headers += ["base: plan", "base: CPU", "base: RSS MiB", "base: gap"]
    for t in threads:
        headers += [f"{t} thr: plan", f"{t} thr: CPU", f"{t} thr: RSS MiB", f"{t} thr: gap"]
    headers.append("plan (this build)")
    print(bc.md_table(headers, rows))


if __name__ == "__main__":
    main()
