#!/usr/bin/env python3
"""EPP's pipeline grouping charged by the recompute solve, before and after: `infinipipe plan`
of the twelve paper settings (examples/llama{7b,13b,30b}-{48k,96k}.yaml x github / commoncrawl,
ITERATIONS global batches each), run by a base build ($INFINIPIPE_BASE_BIN) and by this build in
turns, so both see the same load. Per setting: the predicted step time summed over the batches,
the plans' settings, the planner's own time ("searched in", wall) and the process's CPU seconds
(getrusage of the child). Markdown.
Env: MODELS, LENGTHS, DISTS, ITERATIONS (default 3), REPEATS (default 1: runs per binary, the
least CPU kept)."""

import os
import re
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common as bc  # noqa: E402


def run_plan(exe, args, out_json):
    cmd = [exe, "plan", "--out", out_json] + args
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, cwd=bc.ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"error: {' '.join(cmd)} failed:\n{out[-3000:]}")
    step = re.search(r"predicted step ([0-9.]+) s", out)
    searched = re.search(r"searched in ([0-9.]+) s", out)
    setting = re.search(r"setting: ([^(]*)\(", out)
    if not step:
        sys.exit(f"error: no predicted step in the output of {' '.join(cmd)}:\n{out[-2000:]}")
    return {"step": float(step.group(1)),
            "plan_s": float(searched.group(1)) if searched else float("nan"),
            "cpu_s": ru.ru_utime + ru.ru_stime, "wall_s": time.monotonic() - t0,
            "setting": setting.group(1).strip() if setting else "?"}


def main():
    e = os.environ.get
    base = e("INFINIPIPE_BASE_BIN", "")
    if not base:
        sys.exit("error: set INFINIPIPE_BASE_BIN to the infinipipe of the base build")
    exe = bc.binary("infinipipe")
    iterations = bc.env_int("ITERATIONS", 3)
    repeats = bc.env_int("REPEATS", 1)
    print("# Pipeline grouping charged by the recompute solve: before and after\n")
    print("\n".join(bc.machine_lines()))
    tmp = tempfile.mkdtemp(prefix="grouping_solve_")
    rows, totals = [], {"base": [0.0, 0.0], "new": [0.0, 0.0]}
    with bc.LoadSampler() as load:
        for model in e("MODELS", "7b 13b 30b").split():
            for length in e("LENGTHS", "48k 96k").split():
                cfg = f"examples/llama{model}-{length}.yaml"
                for dist in e("DISTS", "github commoncrawl").split():
                    acc = {k: {"step": 0.0, "plan_s": 0.0, "cpu_s": 0.0, "settings": []}
                           for k in ("base", "new")}
                    for it in range(iterations):
                        args = ["--config", cfg, "--distribution", dist, "--iteration", str(it)]
                        for key, binary in (("base", base), ("new", exe)):
                            runs = [run_plan(binary, args, os.path.join(tmp, f"{key}.json"))
                                    for _ in range(repeats)]
                            r = min(runs, key=lambda x: x["cpu_s"])
                            a = acc[key]
                            a["step"] += r["step"]
                            a["plan_s"] += r["plan_s"]
                            a["cpu_s"] += r["cpu_s"]
                            a["settings"].append(r["setting"])
                    b, n = acc["base"], acc["new"]
                    for key in ("base", "new"):
                        totals[key][0] += acc[key]["plan_s"]
                        totals[key][1] += acc[key]["cpu_s"]
                    rows.append([f"{model.upper()} {length.upper()}", dist,
                                 f"{b['step']:.2f} s", f"{n['step']:.2f} s",
                                 f"{(b['step'] / n['step'] - 1) * 100:+.2f}%",
                                 f"{b['plan_s'] / iterations:.3f} s",
                                 f"{n['plan_s'] / iterations:.3f} s",
                                 f"{b['cpu_s'] / iterations:.2f} s",
                                 f"{n['cpu_s'] / iterations:.2f} s",
                                 "; ".join(b["settings"]), "; ".join(n["settings"])])
    print(f"- {load.describe()}")
    print(f"- base: `{base}`; this build: `{exe}`; {iterations} global batches per setting, "
          f"OMP_NUM_THREADS=1\n")
    print(bc.md_table(["setting", "lengths", f"base: step (sum of {iterations})",
                       "this: step", "faster by", "base: plan (mean)", "this: plan",
                       "base: CPU (mean)", "this: CPU", "base: settings", "this: settings"],
                      rows, "llrrrrrrrll"))


if __name__ == "__main__":
    main()
