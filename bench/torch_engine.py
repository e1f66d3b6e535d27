"""The PyTorch executor against the C++ engine on this CPU: the same model, corpus, plans' settings
and tokens, trained by `infinipipe train` and `scripts/python -m infinipipe.torch.train` (the
pinned PyTorch's virtual environment) in turns (rounds alternate which goes first), tokens/s
from each run's metrics.jsonl after the warm-up iterations. One process runs 2 OpenMP threads,
once per OpenMP wait policy in WAIT_POLICIES (PyTorch's many short parallel regions pay for
threads that sleep at once much more than the engine's few long ones), and also reports tokens
per CPU second (user + sys of the run less that of a run of the warm-up iterations alone): on a
shared machine wall time mostly measures the load, CPU time much less so (but it counts the
spinning of the default policy). Ranks (1 thread each) report wall time only: those waiting in
MPI poll. Prints a markdown report.
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
    # One process runs 2 OpenMP threads, so how idle threads wait matters: libgomp's default
    # (spin a while, then sleep) and passive (sleep at once, the choice for a loaded machine).
    # Ranks run 1 thread each (no team, nothing waits): passive.
    policies = os.environ.get("WAIT_POLICIES", "default passive").split()
    for policy in policies:
        if policy not in ("default", "passive", "active"):
            sys.exit(f"error: WAIT_POLICIES={policy!r}: each must be default, passive or active")
    os.environ.pop("OMP_WAIT_POLICY", None)
    cases = [(pp, dp, policy) for pp, dp in layouts
             for policy in (policies if pp * dp == 1 else ["passive"])]
    work = tempfile.mkdtemp(prefix="torch-engine-")
    corpus = os.path.join(work, "corpus")
    run([binary(), "data", "synth", "--distribution", "github", "--num-documents", "2000",
         "--seq-length", "2048", "--seed", "1", "--output", corpus])
    torch_version = run([PYTHON, "-c", "import torch; print(torch.__version__)"])[1].strip()
    print("# The PyTorch executor against the C++ engine (bench/torch_engine.sh)\n")
    print("\n".join(machine_lines()))
    print(f"- PyTorch {torch_version} ({PYTHON})")
    results, cpu = {}, {}
    with LoadSampler() as load:
        for case in cases:
            pp, dp, policy = case
            words = MODEL + ["--data-path", corpus, "--pp", str(pp), "--dp", str(dp)]
            environ = {"OMP_NUM_THREADS": "2" if pp * dp == 1 else "1"}
            if policy != "default":
                environ["OMP_WAIT_POLICY"] = policy

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
                    metrics = os.path.join(work, f"{who}-{pp}x{dp}-{policy}-{r}.jsonl")
                    spent = train(who, iters, metrics)
                    results.setdefault(case + (who,), []).append(tokens_per_s(metrics, warmup))
                    if pp * dp == 1:  # less the same run stopped after the warm-up
                        spent -= train(who, warmup, metrics + ".warmup")
                        cpu.setdefault(case + (who,), []).append(
                            tokens_after(metrics, warmup) / spent)
    print(f"- {load.describe()}")
    print(f"- model: 4 layers x hidden 128 (GQA 4/2, untied), fp32, sequences up to 2048 "
          f"tokens, global batch 8, budget 64 MiB per rank, plans from the cpu preset "
          f"(--cost-model-update off: both runtimes get the same plans)")
    print(f"- {iters} iterations per run, the first {warmup} left out; {rounds} round(s), the "
          f"first runtime alternating; one process uses 2 OpenMP threads (idle threads wait "
          f"as OMP_WAIT_POLICY says: libgomp's default or passive), ranks 1 each\n")
    rows = []
    for case in cases:
        pp, dp, policy = case
        e = [x[0] for x in results[case + ("engine",)]]
        t = [x[0] for x in results[case + ("torch",)]]
        by_cpu = "-"
        if case + ("engine",) in cpu:
            ce, ct = median(cpu[case + ("engine",)]), median(cpu[case + ("torch",)])
            by_cpu = f"{ce:.0f} / {ct:.0f} ({ct / ce:.2f})"
        rows.append([f"pp {pp} x dp {dp}", policy if pp * dp == 1 else "-", f"{median(e):.0f}",
                     f"{median(t):.0f}", f"{median(t) / median(e):.2f}", by_cpu,
                     f"{results[case + ('engine',)][-1][1]:.4f} / "
                     f"{results[case + ('torch',)][-1][1]:.4f}"])
    print(md_table(["layout", "OpenMP wait", "C++ engine tok/s", "PyTorch tok/s",
                    "PyTorch / engine", "tok per CPU s: engine / PyTorch (ratio)",
                    "final loss (engine / PyTorch)"], rows))


if __name__ == "__main__":
    sys.exit(main())
