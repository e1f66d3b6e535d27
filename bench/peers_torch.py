"""EPP (infinipipe.torch) against torch.distributed.pipelining on this CPU: the same Llama (a
random transformers LlamaForCausalLM saved once with save_pretrained; infinipipe's own Llama of
the same shape where the trainer has no --hf-model), the same long-tail corpus and global
batches, pp 2 and pp 4 over gloo, one thread per rank.

Peers (bench/peers_torch_rank.py): ScheduleGPipe, Schedule1F1B, ScheduleInterleaved1F1B and
ScheduleInterleavedZeroBubble (2 virtual stages per rank), the decoder layers split by hand into
PipelineStages, one sequence (row) per micro-batch, global-batch-size micro-batches, fed
  pad:  each global batch's sequences right-padded to its longest (padding out of the loss)
  pack: the same documents concatenated into rows of --seq-length, --global-batch-size rows per
        iteration (attention crosses document boundaries: the default causal mask)
EPP: `python -m infinipipe.torch.train` on the same corpus, once at the planner's default
budget and once at the peak the best peer measured ("at equal memory").

Real tokens/s: non-padding tokens trained (for pack every token of a row) over the iterations
after the warm-up, divided by the slowest rank's seconds of those iterations. Peak memory per
rank: ru_maxrss less the resident size after the imports, the same for every run.

    bash bench/peers_torch.sh [--quick] [--out FILE] [--pp "2 4"] [--distributions github ...]
"""

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common as bc  # noqa: E402
import peers_torch_report as report  # noqa: E402

PYTHON = os.environ.get("INFINIPIPE_PYTHON", os.path.join(bc.ROOT, "scripts", "python"))
RANK_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers_torch_rank.py")
ALL_SCHEDULES = "gpipe 1f1b interleaved1f1b interleavedzb"
# The model: examples/cpu-small.yaml's Llama (its CPU calibration fits it), MHA, untied head.
CONFIG = "examples/cpu-small.yaml"
CALIBRATION = "examples/calibration-cpu.json"


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="smoke check: pp 2, gpipe and interleaved1f1b, github, sequences up to "
                         "1024 tokens, 2 iterations (the first a warm-up)")
    ap.add_argument("--out", default="", help="also write the markdown report to this file")
    ap.add_argument("--pp", default="2 4", help="pipeline sizes, e.g. '2 4'")
    ap.add_argument("--schedules", default=ALL_SCHEDULES,
                    help=f"peer schedules among {ALL_SCHEDULES} zbv")
    ap.add_argument("--modes", default="pad pack", help="peer inputs: pad, pack")
    ap.add_argument("--distributions", default="github", help="github, commoncrawl")
    ap.add_argument("--seq-length", type=int, default=2048,
                    help="longest sequence (4096: each padded run takes ~4x as long)")
    ap.add_argument("--global-batch-size", type=int, default=8)
    ap.add_argument("--iters", type=int, default=3, help="iterations per run, warm-up included")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--documents", type=int, default=2000)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--launcher", choices=("torchrun", "mpirun"), default="torchrun")
    ap.add_argument("--epp-model", choices=("auto", "hf", "own"), default="auto",
                    help="hf: the trainer's --hf-model on the saved folder; own: infinipipe's "
                         "Llama of the same shape; auto: hf when the trainer has --hf-model")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per run")
    ap.add_argument("--work", default="", help="working folder (default: a fresh temporary one)")
    ap.add_argument("--render-from", default="", metavar="WORK",
                    help="print the report of a finished run kept with --work WORK again (give "
                         "the sizes that run had)")
    a = ap.parse_args()
    if a.quick:
        a.pp, a.schedules, a.distributions = "2", "gpipe interleaved1f1b", "github"
        a.seq_length, a.iters, a.warmup = 1024, 2, 1
    a.pp = [int(x) for x in a.pp.split()]
    a.schedules, a.modes = a.schedules.split(), a.modes.split()
    a.distributions = a.distributions.split()
    for m in a.modes:
        if m not in ("pad", "pack"):
            sys.exit(f"error: --modes {m!r}: each must be pad or pack")
    if a.iters <= a.warmup:
        sys.exit(f"error: --iters {a.iters} must exceed --warmup {a.warmup}")
    return a


def launch(a, n, args):
    """The command that starts n ranks of RANK_SCRIPT with args."""
    if a.launcher == "torchrun":
        return [PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
                str(n), RANK_SCRIPT] + args
    return ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np",
            str(n), "-x", "OMP_NUM_THREADS", "-x", "MASTER_ADDR=127.0.0.1", "-x",
            f"MASTER_PORT={29500 + os.getpid() % 1000}", PYTHON, RANK_SCRIPT] + args


def run_ranks(a, n, args, log):
    """Runs the ranks; returns (ok, the tail of the output)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    cmd = launch(a, n, args)
    with open(log, "w") as f:
        f.write(shlex.join(cmd) + "\n")
        f.flush()
        try:
            p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=bc.ROOT,
                               timeout=a.timeout)
            ok = p.returncode == 0
        except subprocess.TimeoutExpired:
            ok = False
    with open(log) as f:
        tail = f.read()[-3000:]
    return ok, tail


def read_ranks(prefix, n):
    out = []
    for r in range(n):
        with open(f"{prefix}.rank{r}") as f:
            out.append(json.load(f))
    return out


def model_words(a, epp_model, hf_dir):
    words = ["--config", CONFIG, "--calibration", CALIBRATION, "--seq-length", str(a.seq_length),
             "--global-batch-size", str(a.global_batch_size), "--lr", str(a.lr),
             "--device", "cpu"]
    if epp_model == "hf":
        words += ["--hf-model", hf_dir]
    return words


def save_hf_model(ip, cfg, folder):
    """A random LlamaForCausalLM of the configuration's shape (the same maths as infinipipe's
    Llama: RMSNorm, rotary, SwiGLU, no biases, untied head), saved once."""
    import torch
    import transformers

    m = cfg.model
    conf = transformers.LlamaConfig(
        vocab_size=m.vocab_size, hidden_size=m.hidden_size, intermediate_size=m.ffn_hidden_size,
        num_hidden_layers=m.num_layers, num_attention_heads=m.num_attention_heads,
        num_key_value_heads=m.num_key_value_heads, max_position_embeddings=m.seq_length,
        rms_norm_eps=m.norm_epsilon, rope_theta=m.rotary_base, tie_word_embeddings=False,
        attention_bias=False, mlp_bias=False, hidden_act="silu")
    torch.manual_seed(1)
    transformers.logging.disable_progress_bar()
    transformers.LlamaForCausalLM(conf).save_pretrained(folder)
    return conf


def dump_batches(ip, words, a, path):
    """The sampler's global batches, in `train`'s order: enough for packing every run."""
    need = a.iters * a.global_batch_size * a.seq_length + 1
    n = max(a.iters, 2)
    while True:
        cfg = ip.Config.for_training(words + ["--train-iters", str(n)])
        sampler = ip.TrainingBatches(cfg, ip.CostModel.from_config(cfg))  # (cfg) alone crashes
        batches = [sampler.next() for _ in range(n)]
        if sum(len(d) for b in batches for d in b) >= need:
            break
        n *= 2
    with open(path, "w") as f:
        json.dump({"batches": batches}, f)
    return batches


def detect_epp_model(want):
    """hf where the trainer's help offers --hf-model (it is a trainer flag, not a config one)."""
    if want != "auto":
        return want
    out = subprocess.run([PYTHON, "-m", "infinipipe.torch.train", "--help"], capture_output=True,
                         text=True).stdout
    return "hf" if "--hf-model" in out else "own"


def run_peer(a, work, dist_name, pp, schedule, mode, hf_dir, batches_file):
    tag = f"{dist_name}-pp{pp}-{schedule}-{mode}"
    prefix = os.path.join(work, tag)
    args = ["peer", "--model", hf_dir, "--batches", batches_file, "--schedule", schedule,
            "--mode", mode, "--iters", str(a.iters), "--microbatches",
            str(a.global_batch_size), "--rows", str(a.global_batch_size), "--seq-length",
            str(a.seq_length), "--lr", str(a.lr), "--rss", prefix, "--quiet"]
    ok, tail = run_ranks(a, pp, args, prefix + ".log")
    if not ok:
        return dict(tag=tag, error=report.first_error(tail), log=prefix + ".log")
    ranks = read_ranks(prefix, pp)
    w = a.warmup
    seconds = max(sum(r["seconds"][w:]) for r in ranks)
    tokens = sum(ranks[0]["tokens"][w:])
    widths = ranks[0]["widths"][w:]
    computed = sum(x * a.global_batch_size for x in widths)
    losses = next((r["losses"] for r in ranks if r["losses"][-1] is not None), [None])
    return dict(tag=tag, tokens=tokens, seconds=seconds, tps=tokens / seconds,
                peaks=[r["peak"] for r in ranks], computed=computed, loss=losses[-1],
                first_loss=losses[0],
                untrained=ranks[0]["untrained"], widths=ranks[0]["widths"])


def run_epp(ip, a, work, dist_name, pp, words, budget_mib, label, expected_tokens):
    tag = f"{dist_name}-pp{pp}-epp-{label}"
    prefix = os.path.join(work, tag)
    metrics = prefix + ".jsonl"
    train = words + ["--pp", str(pp), "--num-devices", str(pp), "--devices-per-node", str(pp),
                     "--train-iters", str(a.iters), "--metrics", metrics, "--quiet"]
    train += ["--memory-budget", f"{budget_mib}MiB"]
    ok, tail = run_ranks(a, pp, ["epp", "--rss", prefix, "--"] + train, prefix + ".log")
    if not ok:
        return dict(tag=tag, error=report.first_error(tail), log=prefix + ".log")
    ranks = read_ranks(prefix, pp)
    per_rank = []
    for r in range(pp):
        with open(ip.rank_path(metrics, r)) as f:
            per_rank.append([json.loads(line) for line in f if line.strip()])
    timed = [[m for m in rows if m["iteration"] > a.warmup] for rows in per_rank]
    seconds = max(sum(m["seconds"] for m in rows) for rows in timed)
    tokens = sum(m["tokens"] for m in timed[0])
    got = [m["tokens"] for m in per_rank[0]]
    if got != expected_tokens:  # the same global batches as the peers, or the table lies
        return dict(tag=tag, error=f"EPP trained batches of {got} tokens, the peers' padded "
                    f"batches hold {expected_tokens}", log=prefix + ".log")
    return dict(tag=tag, tokens=tokens, seconds=seconds, tps=tokens / seconds,
                peaks=[r["peak"] for r in ranks], computed=tokens, loss=per_rank[0][-1]["loss"],
                first_loss=per_rank[0][0]["loss"], untrained=0, budget=budget_mib)


def save(work, head, samples, results):
    """results.json in the working folder (--render-from reads it); returns what it wrote."""
    saved = dict(head=head, samples=samples,
                 results={k: dict(v, pp={str(p): x for p, x in v["pp"].items()})
                          for k, v in results.items()})
    with open(os.path.join(work, "results.json"), "w") as f:
        json.dump(saved, f)
    return saved


def finish(a, saved):
    """Prints the report and writes it to --out."""
    text = "\n".join(saved.get("head", [])) + report.render(a, saved["results"],
                                                            saved.get("samples", ""))
    print("\n" + text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")


def main():
    a = parse_args()
    if a.render_from:  # the report of a finished run again (its --work folder)
        with open(os.path.join(a.render_from, "results.json")) as f:
            finish(a, json.load(f))
        return 0
    import infinipipe as ip  # the project's Python (scripts/python) runs this script

    exe = bc.binary()
    work = a.work or tempfile.mkdtemp(prefix="peers-torch-")
    os.makedirs(work, exist_ok=True)
    versions = subprocess.run([PYTHON, "-c", "import torch, transformers; print(torch.__version__,"
                               " transformers.__version__)"], capture_output=True, text=True,
                              check=True).stdout.split()
    head = ["# EPP against torch.distributed.pipelining (bench/peers_torch.sh)", ""]
    head += bc.machine_lines()
    launcher = ("torchrun (`scripts/python -m torch.distributed.run --standalone "
                "--nproc_per_node N`)" if a.launcher == "torchrun" else
                "mpirun (`mpirun -np N --bind-to none`)")
    head += [f"- launcher: {launcher}, gloo, OMP_NUM_THREADS=1 per rank",
             f"- PyTorch {versions[0]}, transformers {versions[1]}",
             f"- command: `bash bench/peers_torch.sh {shlex.join(sys.argv[1:])}`"]
    print("\n".join(head), flush=True)
    results, failed = {}, []
    hf_dir = os.path.join(work, "llama-hf")
    started = time.monotonic()
    with bc.LoadSampler() as load:
        for dist_name in a.distributions:
            corpus = os.path.join(work, f"corpus-{dist_name}")
            bc.run([exe, "data", "synth", "--distribution", dist_name, "--num-documents",
                    str(a.documents), "--seq-length", str(a.seq_length), "--seed", "1",
                    "--output", corpus])
            words = model_words(a, "own", hf_dir) + ["--data-path", corpus]
            cfg = ip.Config.for_training(words + ["--train-iters", "1"])
            if not os.path.isdir(hf_dir):
                save_hf_model(ip, cfg, hf_dir)
            epp_model = detect_epp_model(a.epp_model)
            batches_file = os.path.join(work, f"batches-{dist_name}.json")
            batches = dump_batches(ip, words, a, batches_file)
            words = model_words(a, epp_model, hf_dir) + ["--data-path", corpus]
            expected = [sum(len(d) for d in b) for b in batches[:a.iters]]
            results[dist_name] = dict(epp_model=epp_model, batches=batches[:a.iters], pp={})
            for pp in a.pp:
                rows = []
                for schedule in a.schedules:
                    for mode in a.modes:
                        r = run_peer(a, work, dist_name, pp, schedule, mode, hf_dir,
                                     batches_file)
                        r.update(schedule=schedule, mode=mode)
                        rows.append(r)
                        print(report.progress(r), flush=True)
                        results[dist_name]["pp"][pp] = dict(rows=rows, best=None)
                        save(work, head, "", results)  # a stopped run's results so far
                ok = [r for r in rows if "error" not in r]
                best = max(ok, key=lambda r: r["tps"]) if ok else None
                for label, budget in (("default", int(cfg.get("memory-budget")) // 2**20),
                                      ("equal", -(-max(best["peaks"]) // 2**20) if best else None)):
                    if label == "equal" and best is None:
                        continue
                    r = run_epp(ip, a, work, dist_name, pp, words, budget, label, expected)
                    r.update(schedule="epp", mode=label)
                    rows.append(r)
                    print(report.progress(r), flush=True)
                results[dist_name]["pp"][pp] = dict(rows=rows, best=best)
                failed += [r for r in rows if "error" in r]
    finish(a, save(work, head + [f"- {load.describe()}",
                                 f"- wall time: {(time.monotonic() - started) / 60:.1f} min", ""],
                   ip.run_samples_message(cfg), results))
    if failed:
        print(f"error: {len(failed)} run(s) failed: " +
              "; ".join(f"{r['tag']}: {r['error']} (log {r['log']})" for r in failed),
              file=sys.stderr)
        return 1
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
