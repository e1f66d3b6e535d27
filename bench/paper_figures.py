#!/usr/bin/env python3
"""The InfiniPipe paper's other figures on its settings, simulated: ZeRO stage inside a stage
(1 vs 3), the 13B case study's time breakdown, context scaling 64K -> 192K and global batch 128 -> 512 (Llama-13B, paper baselines),
the ablation (13B 64K: w/o wbc, w/o ckpt, full ckpt) and the planner's time
per batch. Every number is one `infinipipe simulate` run on the A800 preset (docs/cost-model.md).
Env/flags: DISTS, ITERATIONS (batches per setting), OUT, EXTRA (more flags for every run)."""

import argparse
import os
import re
import shlex
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common as bc  # noqa: E402
from paper_settings import PAPER_ROWS, compare_add  # noqa: E402

PLANNING = re.compile(r"planning took epp ([\d.]+)s")


def parse_args():
    e = os.environ.get
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dists", default=e("DISTS", "github commoncrawl"))
    ap.add_argument("--iterations", type=int, default=bc.env_int("ITERATIONS", 20))
    ap.add_argument("--out", default=e("OUT", "out/bench/paper_figures"))
    ap.add_argument("--extra", default=e("EXTRA", ""))
    return ap.parse_args()


class Runner:
    def __init__(self, exe, a):
        self.exe, self.a, self.count = exe, a, 0

    def simulate(self, cfg, dist, flags):
        """Sum over the batches of each row's step (None once one is OOM) and EPP's planning
        seconds per batch."""
        total, planning = {}, []
        for it in range(self.a.iterations):
            cmd = [self.exe, "simulate", "--config", cfg, "--distribution", dist,
                   "--iteration", str(it)] + flags + shlex.split(self.a.extra)
            _, out, _ = bc.run(cmd)
            self.count += 1
            with open(os.path.join(self.a.out, f"run-{self.count}.md"), "w") as f:
                f.write(f"$ {shlex.join(cmd)}\n\n{out}")
            m = PLANNING.search(out)
            if m:
                planning.append(float(m.group(1)))
            compare_add(total, out)
        return total, planning


def step_cell(r):
    return f"{r['step']:.2f} s" if r and r["step"] is not None else (r["note"][:40] if r else "–")


def speedups(total):
    epp = total.get("epp")
    cells = []
    for b in PAPER_ROWS:
        r = total.get(b)
        if not r or r["step"] is None or not epp or epp["step"] is None:
            cells.append(step_cell(r) if r else "–")
        else:
            cells.append(f"{r['step'] / epp['step']:.2f}x")
    return cells


def zero_stages(run, a):
    rows = []
    for model in ["7b", "13b", "30b"]:
        for length in ["48k", "96k"]:
            cfg = f"examples/llama{model}-{length}.yaml"
            for dist in a.dists.split():
                z1, _ = run.simulate(cfg, dist, ["--zero-stage", "1"])
                z3, _ = run.simulate(cfg, dist, ["--zero-stage", "3"])
                e1, e3 = z1["epp"], z3["epp"]
                ratio = (f"{e1['step'] / e3['step']:.2f}x"
                         if e1["step"] and e3["step"] else "–")
                rows.append([f"{model.upper()} {length.upper()}", dist, step_cell(e1),
                             e1["peak"], step_cell(e3), e3["peak"], e3["setting"], ratio])
    print("## ZeRO-1 vs ZeRO-3 inside a stage (EPP, `--zero-stage`)\n")
    print(bc.md_table(["setting", "lengths", "ZeRO-1 step", "ZeRO-1 peak", "ZeRO-3 step",
                       "ZeRO-3 peak", "ZeRO-3 plan", "ZeRO-1 / ZeRO-3"], rows, "llrrrrlr"))
    print()


def case_study(run, a):
    """The paper's case study (§V-C, Fig. 8): Llama-13B, batch 512, 48K and 96K; every system's
    step in the paper's four parts (ZeRO, A2A, Bubble & P2P, Others), summed over the batches,
    from `simulate --compare --baselines paper --json`."""
    import json
    rows = []
    for length in ["48k", "96k"]:
        for dist in a.dists.split():
            parts = {}
            for it in range(a.iterations):
                path = os.path.join(a.out, f"case-{length}-{dist}-{it}.json")
                cmd = [run.exe, "simulate", "--compare", "--baselines", "paper", "--config",
                       f"examples/llama13b-{length}.yaml", "--distribution", dist,
                       "--iteration", str(it), "--json", path] + shlex.split(a.extra)
                bc.run(cmd)
                with open(path) as f:
                    for r in json.load(f)["rows"]:
                        p = parts.setdefault(r["schedule"], {"ok": True})
                        if not r["ok"]:
                            p["ok"], p["note"] = False, r["note"]
                            continue
                        for k, v in list(r["parts_s"].items()) + [("step", r["step_s"])]:
                            p[k] = p.get(k, 0.0) + v
            for name, p in parts.items():
                if not p["ok"]:
                    rows.append([f"13B {length.upper()}", dist, name, p["note"][:40]] + ["–"] * 4)
                    continue
                rows.append([f"13B {length.upper()}", dist, name, f"{p['step']:.2f} s"] +
                            [f"{p[k]:.2f} s ({100 * p[k] / p['step']:.0f}%)"
                             for k in ("zero", "a2a", "bubble_p2p", "others")])
    print("## Case study: Llama-13B, batch 512, the paper's four parts of each system's step "
          f"(sum of {a.iterations} batches)\n")
    print(bc.md_table(["setting", "lengths", "system", "step", "ZeRO", "A2A", "Bubble & P2P",
                       "Others"], rows, "lllrrrrr"))
    print()


def scaling(run, a, title, header, values, flags_of):
    rows = []
    for dist in a.dists.split():
        for v in values:
            total, _ = run.simulate("examples/llama13b-96k.yaml", dist,
                                    ["--compare", "--baselines", "paper"] + flags_of(v))
            epp = total.get("epp")
            rows.append([v, dist, step_cell(epp), epp["setting"] if epp else "–"]
                        + speedups(total))
    print(f"## {title}\n")
    print(bc.md_table([header, "lengths", f"EPP step (sum of {a.iterations})", "EPP plan"]
                      + [f"vs {b}" for b in PAPER_ROWS], rows, "llrl" + "r" * len(PAPER_ROWS)))
    print()


# The paper's ablation (§V-D): Llama-13B at 64K, EPP without workload-balanced chunking ("w/o
# wbc"), without checkpointing ("w/o ckpt") and with every layer checkpointed ("full ckpt").
ABLATIONS = [("EPP (balanced chunking, adaptive recompute)", []),
             ("w/o wbc (uniform slicing)", ["--epp-uniform-slicing"]),
             ("w/o ckpt (no recompute)", ["--recompute-granularity", "none"]),
             ("full ckpt (every layer recomputed)",
              ["--recompute-granularity", "full", "--recompute-num-layers", "1"])]


def ablation(run, a):
    rows = []
    for dist in a.dists.split():
        base = None
        for name, flags in ABLATIONS:
            total, _ = run.simulate("examples/llama13b-96k.yaml", dist,
                                    ["--seq-length", "65536"] + flags)
            epp = total["epp"]
            base = base if base is not None else epp["step"]
            slow = (f"{epp['step'] / base:.2f}x" if epp["step"] and base else "–")
            rows.append(["13B 64K", dist, name, step_cell(epp), epp["bubble"], epp["peak"], slow])
    print("## Ablation (EPP, Llama-13B, 64K)\n")
    print(bc.md_table(["setting", "lengths", "variant", f"step (sum of {a.iterations})",
                       "bubble", "peak", "vs EPP"], rows, "lllrrrr"))
    print()


def solver_time(run, a):
    rows = []
    for model in ["7b", "13b", "30b"]:
        for length in ["48k", "96k"]:
            for dist in a.dists.split():
                _, planning = run.simulate(f"examples/llama{model}-{length}.yaml", dist, [])
                if planning:
                    rows.append([f"{model.upper()} {length.upper()}", dist,
                                 f"{sum(planning) / len(planning):.2f} s",
                                 f"{max(planning):.2f} s"])
    print("## Planner time per global batch (EPP, whole plan, wall-clock on this machine)\n")
    print(bc.md_table(["setting", "lengths", f"mean of {a.iterations}", "max"], rows, "llrr"))
    print()


def main():
    a = parse_args()
    exe = bc.binary()
    os.chdir(bc.ROOT)
    os.makedirs(a.out, exist_ok=True)
    run = Runner(exe, a)
    print("# The paper's other figures, simulated (32 x A800-80GB)\n")
    print("\n".join(bc.machine_lines()) + "\n")
    with bc.LoadSampler():
        zero_stages(run, a)
        case_study(run, a)
        scaling(run, a, "Context scaling (Llama-13B, global batch 512)", "max length",
                ["64K", "128K", "192K"],
                lambda v: ["--seq-length", str(int(v[:-1]) * 1024)])
        scaling(run, a, "Global batch scaling (Llama-13B, 96K)", "global batch",
                ["128", "256", "512"], lambda v: ["--global-batch-size", v])
        ablation(run, a)
        solver_time(run, a)


if __name__ == "__main__":
    main()
