#!/usr/bin/env python3
"""EPP at pp 1 in the tuned Ulysses baseline's own layout, on the paper's settings: the baseline's
choice (sp, dp) from `simulate --compare --baselines tuned`, then EPP with Ulysses degree sp and
the same dp, every replica planned (`--replica all`, the slowest counts), with ZeRO-1 and ZeRO-3.
Prints a markdown table: the baseline's step, EPP's slowest replica and the ratio.
Env: MODELS, LENGTHS, DISTS (as bench/paper_settings.py), BEFORE (a second infinipipe binary whose
EPP columns are printed next to this build's, e.g. one built from an earlier commit)."""

import os
import re
import sys

import bench_common as bc

ULYSSES = re.compile(r"^\| ulysses \| ([0-9.]+) s \|.*\| sp=(\d+), dp=(\d+)[^|]*\|", re.M)
SLOWEST = re.compile(r"^replicas: slowest ([0-9.]+) s", re.M)


def epp_step(exe, cfg, dist, sp, dp, zero):
    """EPP's slowest replica at pp 1 x Ulysses sp x dp, or the reason it cannot run."""
    cmd = [exe, "simulate", "--config", cfg, "--distribution", dist, "--pp", "1", "--dp", str(dp),
           "--ulysses-degree", str(sp), "--zero-stage", str(zero), "--replica", "all"]
    rc, out, err = bc.run(cmd, check=False)
    m = SLOWEST.search(out)
    if rc == 0 and m:
        return float(m.group(1)), ""
    if "smallest budget that fits is" in err:
        need = re.search(r"smallest budget that fits is ([0-9.]+ GiB)", err).group(1)
        return None, f"OOM (needs {need})"
    sys.exit(f"error: `{' '.join(cmd)}` gave no step time:\n{out[-1000:]}{err[-1000:]}")


def cell(step, note, base):
    return f"{step:.3f} s ({base / step:.3f}x)" if step else note


def main():
    if len(sys.argv) > 1:
        sys.exit(f"error: {sys.argv[0]} takes no arguments, got {' '.join(sys.argv[1:])}; "
                 f"set MODELS, LENGTHS, DISTS or BEFORE in the environment instead")
    e = os.environ.get
    exe = bc.binary()
    before = e("BEFORE", "")
    os.chdir(bc.ROOT)
    print("\n".join(bc.machine_lines()))
    print(f"- workload: one global batch of 512 sequences per setting (--iteration 0); "
          f"EPP's columns: slowest replica, (baseline / EPP)\n")
    head = ["setting", "lengths", "ulysses (tuned)", "layout"]
    for z in (1, 3):
        if before:
            head.append(f"EPP ZeRO-{z}, before")
        head.append(f"EPP ZeRO-{z}")
    rows = []
    with bc.LoadSampler() as load:
        for model in e("MODELS", "7b 13b 30b").split():
            for length in e("LENGTHS", "48k 96k").split():
                cfg = f"examples/llama{model}-{length}.yaml"
                for dist in e("DISTS", "github commoncrawl").split():
                    _, out, _ = bc.run([exe, "simulate", "--compare", "--baselines", "tuned",
                                        "--config", cfg, "--distribution", dist])
                    m = ULYSSES.search(out)
                    if not m:
                        sys.exit(f"error: no feasible ulysses row for {cfg} {dist}:\n{out}")
                    base, sp, dp = float(m.group(1)), int(m.group(2)), int(m.group(3))
                    row = [f"{model.upper()} {length.upper()}", dist, f"{base:.3f} s",
                           f"pp 1 x ulysses {sp} x dp {dp}"]
                    for z in (1, 3):
                        for b in ([before] if before else []) + [exe]:
                            row.append(cell(*epp_step(b, cfg, dist, sp, dp, z), base))
                    rows.append(row)
    print(bc.md_table(head, rows, "llrl" + "r" * (len(head) - 4)))
    print(f"\n{load.describe()}")


if __name__ == "__main__":
    main()
