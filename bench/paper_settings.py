#!/usr/bin/env python3
"""The InfiniPipe paper's settings, simulated: Llama 7B / 13B / 30B on 32 A800-80GB (4 nodes x 8,
Ulysses 8 inside a node (4 for 30B's 52 heads, with dp 2), pp 4 across nodes), 48K and 96K
maximum length, global batch 512,
GitHub-like and CommonCrawl-like lengths. Runs `infinipipe simulate --compare` on each
examples/llama*-{48k,96k}.yaml, first with the paper's baselines as its evaluation configured them
(--baselines paper), then with each baseline tuned in EPP's layout (--baselines tuned), and prints
EPP's speedup over each next to the paper's published speedups.
Env/flags: MODELS, LENGTHS, DISTS, ITERATIONS (batches averaged), OUT, EXTRA (more simulate flags)."""

import argparse
import os
import re
import shlex
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common as bc  # noqa: E402

TUNED = ["ulysses", "1f1b", "interleaved", "seq1f1b", "gpipe"]
PAPER_ROWS = ["seq1f1b", "megatron", "deepspeed", "flexsp"]
# What the paper reports (arXiv 2509.21275, abstract and evaluation summary): maxima over its
# settings; per-setting figures are in its plots, not reproduced here.
PAPER = {"ulysses": "up to 2.07x (DeepSpeed)", "deepspeed": "up to 2.07x",
         "1f1b": "up to 2.60x (Megatron-LM)", "megatron": "up to 2.60x",
         "interleaved": "(in Megatron-LM's 2.60x)", "seq1f1b": "1.27x at 48K, 1.40x at 96K",
         "gpipe": "–", "flexsp": "up to 1.69x"}


def parse_args():
    e = os.environ.get
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=e("MODELS", "7b 13b 30b"))
    ap.add_argument("--lengths", default=e("LENGTHS", "48k 96k"))
    ap.add_argument("--dists", default=e("DISTS", "github commoncrawl"))
    ap.add_argument("--iterations", type=int, default=bc.env_int("ITERATIONS", 20),
                    help="global batches simulated per setting (step times summed)")
    ap.add_argument("--out", default=e("OUT", "out/bench/paper_settings"))
    ap.add_argument("--extra", default=e("EXTRA", ""),
                    help="more flags for every `simulate`, e.g. '--inter-node-bandwidth 40e9'")
    return ap.parse_args()


def parse_compare(text):
    """{schedule: (step seconds or None, peak, setting, note)} from a --compare table."""
    rows = {}
    for line in text.splitlines():
        if not line.startswith("| ") or line.startswith("| schedule"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 8:
            continue
        name, step = cells[0], cells[1]
        m = re.fullmatch(r"([\d.]+) s", step)
        rows[name] = {"step": float(m.group(1)) if m else None, "note": step,
                      "bubble": cells[4], "peak": cells[5], "setting": cells[7]}
    return rows


def compare_add(total, text):
    """Adds one `--compare` table's step times into `total`, per schedule; a schedule that could
    not run in any batch keeps that batch's note instead of a time."""
    for key, r in parse_compare(text).items():
        prev = total.get(key)
        if prev is None:
            total[key] = dict(r)
        elif prev["step"] is not None and r["step"] is not None:
            prev["step"] += r["step"]
        elif prev["step"] is not None:  # the first batch that could not run gives the note
            prev["step"], prev["note"] = None, r["note"]


def short_note(note):
    m = re.match(r"OOM \(needs ([^)]*)\)", note)
    if m:
        return f"OOM ({m.group(1)})"
    if note.startswith("OOM"):
        return "OOM"
    return "n/a" if note.startswith("n/a") else note[:40]


def run_mode(exe, a, mode, baselines):
    """One table row per setting (EPP's speedup over each baseline) and the best per baseline."""
    rows, best = [], {b: (0.0, "") for b in baselines}
    for model in a.models.split():
        for length in a.lengths.split():
            cfg = f"examples/llama{model}-{length}.yaml"
            if not os.path.exists(cfg):
                sys.exit(f"error: {cfg} not found")
            for dist in a.dists.split():
                total = {}
                for it in range(a.iterations):
                    cmd = [exe, "simulate", "--compare", "--baselines", mode, "--config", cfg,
                           "--distribution", dist, "--iteration", str(it)] + shlex.split(a.extra)
                    _, out, _ = bc.run(cmd)
                    name = f"{mode}-{model}-{length}-{dist}-{it}.md"
                    with open(os.path.join(a.out, name), "w") as f:
                        f.write(f"$ {shlex.join(cmd)}\n\n{out}")
                    compare_add(total, out)
                epp = total.get("epp")
                if epp is None:
                    sys.exit(f"error: no epp row in `simulate --compare` for {cfg}")
                label = f"{model.upper()} {length.upper()}"
                row = [label, dist,
                       f"{epp['step']:.2f} s" if epp["step"] else short_note(epp["note"]),
                       epp["setting"] if epp["step"] else "–"]
                for b in baselines:
                    r = total.get(b)
                    if r is None:
                        row.append("–")
                    elif r["step"] is None:
                        row.append(short_note(r["note"]))
                    elif epp["step"] is None:
                        row.append(f"{r['step']:.2f} s (EPP OOM)")
                    else:
                        sp = r["step"] / epp["step"]
                        row.append(f"{sp:.2f}x")
                        if sp > best[b][0]:
                            best[b] = (sp, f"{label} {dist}")
                rows.append(row)
    return rows, best


def print_mode(a, rows, best, baselines, title, note):
    print(f"## {title}\n")
    print(bc.md_table(["setting", "lengths", f"EPP step (sum of {a.iterations})",
                       "EPP plan (first batch)"] + [f"vs {b}" for b in baselines], rows,
                      "llrl" + "r" * len(baselines)))
    print(f"\n{note}\n")
    print(bc.md_table(
        ["baseline", "ours: best over these settings", "paper (arXiv 2509.21275)"],
        [[b, f"{best[b][0]:.2f}x ({best[b][1]})" if best[b][0] else "–", PAPER[b]]
         for b in baselines], "lll"))
    print()


def main():
    a = parse_args()
    exe = bc.binary()
    os.chdir(bc.ROOT)
    os.makedirs(a.out, exist_ok=True)
    print("# The paper's settings, simulated (32 x A800-80GB, global batch 512)\n")
    print("\n".join(bc.machine_lines()))
    print(f"- workload: `simulate --compare` of {a.iterations} global batch(es) of 512 "
          f"sequences per setting; preset A800 coefficients (docs/cost-model.md)"
          + (f"; extra flags `{a.extra}`" if a.extra else "") + "\n")
    with bc.LoadSampler():
        paper = run_mode(exe, a, "paper", PAPER_ROWS)
        tuned = run_mode(exe, a, "tuned", TUNED)
    print_mode(a, *paper, PAPER_ROWS, "Baselines as the paper configured them (--baselines paper)",
               "EPP speedup = baseline step time / EPP step time; each baseline at the paper's "
               "fixed configuration for the model size (docs/cost-model.md, \"The paper's "
               "baselines\").")
    print_mode(a, *tuned, TUNED, "Baselines tuned in EPP's layout (--baselines tuned)",
               "Each schedule tuned to its best feasible setting inside EPP's layout (Ulysses 8 "
               "in a node, 4 for 30B; pp across nodes); OOM (needs X) = no setting fits the usable 70 "
               "of 80 GiB "
               "(docs/cost-model.md, \"Usable memory\").")


if __name__ == "__main__":
    main()
