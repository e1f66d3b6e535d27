"""The PyTorch executor against the C++ engine on this CPU: the same model, corpus, plans' settings
and tokens, trained by `infinipipe train` and `scripts/python -m infinipipe.torch.train` (the
pinned PyTorch's virtual environment) in turns (rounds alternate which goes first), tokens/s
from each run's metrics.jsonl after the warm-up iterations. On one process also tokens per CPU second (user + sys of the run less that of a run
of the warm-up iterations alone): on a shared machine wall time mostly measures the load, CPU
time much less so. (Ranks waiting in MPI poll, so CPU time is left out for several ranks.)
Prints a markdown report.

    bash bench/torch_engine.sh                     # ~5 minutes on 2 cores
    ITERS=12 ROUNDS=3 LAYOUTS="1x1 2x2" bash bench/torch_engine.sh
"""

import json
import os
import resource
import sys
import tempfile

from bench_common import (ROOT, LoadSampler, binary, env_int, machine_lines, md_table, median,
                          run)

# The project's Python: the pinned PyTorch with this build's module (INFINIPIPE_BUILD_DIR).
PYTHON = os.environ.get("INFINIPIPE_PYTHON", os.path.join(ROOT, "scripts", "python"))
MODEL = ["--num-layers", "4", "--hidden-size", "128", "--num-attention-heads", "4",
         "--group-query-attention", "--num-query-groups", "2",
         "--untie-embeddings-and-output-weights", "--seq-length", "2048", "--global-batch-size",
         "8", "--lr", "3e-3", "--device", "cpu", "--memory-budget", "64MiB",
         "--cost-model-update", "off"]


def tokens_after(metrics, warmup):
    with open(metrics) as f:
        return sum(r["tokens"] for r in map(json.loads, f) if r["iteration"] > warmup)


def tokens_per_s(metrics, warmup):
    with open(metrics) as f:
        rows = [json.loads(line) for line in f]
    rows = [r for r in rows if r["iteration"] > warmup]
    return sum(r["tokens"] for r in rows) / sum(r["seconds"] for r in rows), rows[-1]["loss"]


def children_cpu_s():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def launch(pp, dp, cmd):
    n = pp * dp
    if n == 1:
        return cmd
    return ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", str(n),
            "-x", "OMP_NUM_THREADS", "-x", "OMP_WAIT_POLICY"] + cmd


def main():
    iters, warmup, rounds = env_int("ITERS", 10), env_int("WARMUP", 3), env_int("ROUNDS", 2)
    layouts = [tuple(int(x) for x in l.split("x"))
               for l in os.environ.get("LAYOUTS", "1x1 2x2").split()]
    work = tempfile.mkdtemp(prefix="torch-engine-")
    corpus = os.path.join(work, "corpus")
    run([binary(), "data", "synth", "--distribution", "github", "--num-documents", "2000",
         "--seq-length", "2048", "--seed", "1", "--output", corpus])
    env = {"OMP_WAIT_POLICY": "passive"}
    torch_version = run([PYTHON, "-c", "import torch; print(torch.__version__)"])[1].strip()
    print("# The PyTorch executor against the C++ engine (bench/torch_engine.sh)\n")
    print("\n".join(machine_lines()))
    print(f"- PyTorch {torch_version} ({PYTHON})")
    results, cpu = {}, {}
    with LoadSampler() as load:
        for pp, dp in layouts:
            threads = "2" if pp * dp == 1 else "1"
            words = MODEL + ["--data-path", corpus, "--pp", str(pp), "--dp", str(dp)]
            environ = dict(env, OMP_NUM_THREADS=threads)

            def train(who, n, metrics):
                """CPU seconds of `who` training n iterations."""
                cmd = ([binary(), "train"] if who == "engine" else
                       [PYTHON, "-m", "infinipipe.torch.train"]) + words + [
                           "--train-iters", str(n), "--metrics", metrics, "--quiet"]
                start = children_cpu_s()
                run(launch(pp, dp, cmd), env=environ)
                return children_cpu_s() - start

            for r in range(rounds):
                order = ("engine", "torch") if r % 2 == 0 else ("torch", "engine")
                for who in order:
                    metrics = os.path.join(work, f"{who}-{pp}x{dp}-{r}.jsonl")
                    spent = train(who, iters, metrics)
                    results.setdefault((pp, dp, who), []).append(tokens_per_s(metrics, warmup))
                    if pp * dp == 1:  # less the same run stopped after the warm-up
                        spent -= train(who, warmup, metrics + ".warmup")
                        cpu.setdefault((pp, dp, who), []).append(
                            tokens_after(metrics, warmup) / spent)
    print(f"- {load.describe()}")
    print(f"- model: 4 layers x hidden 128 (GQA 4/2, untied), fp32, sequences up to 2048 "
          f"tokens, global batch 8, budget 64 MiB per rank, plans from the cpu preset "
          f"(--cost-model-update off: both runtimes get the same plans)")
    print(f"- {iters} iterations per run, the first {warmup} left out; {rounds} rounds, the "
          f"first runtime alternating; one process uses 2 OpenMP threads, ranks 1 each\n")
    rows = []
    for pp, dp in layouts:
        e = [x[0] for x in results[(pp, dp, "engine")]]
        t = [x[0] for x in results[(pp, dp, "torch")]]
        by_cpu = "-"
        if (pp, dp, "engine") in cpu:
            ce, ct = median(cpu[(pp, dp, "engine")]), median(cpu[(pp, dp, "torch")])
            by_cpu = f"{ce:.0f} / {ct:.0f} ({ct / ce:.2f})"
        rows.append([f"pp {pp} x dp {dp}", f"{median(e):.0f}", f"{median(t):.0f}",
                     f"{median(t) / median(e):.2f}", by_cpu,
                     f"{results[(pp, dp, 'engine')][-1][1]:.4f} / "
                     f"{results[(pp, dp, 'torch')][-1][1]:.4f}"])
    print(md_table(["layout", "C++ engine tok/s", "PyTorch tok/s", "PyTorch / engine",
                    "tok per CPU s: engine / PyTorch (ratio)", "final loss (engine / PyTorch)"],
                   rows))


if __name__ == "__main__":
    sys.exit(main())
