"""`python3 -m infinipipe.torch.train`: it trains (the loss falls) at pp 2 x dp 2, resumes
`infinipipe train`'s checkpoints and leaves checkpoints `infinipipe train` resumes, to the loss
of a run that never stopped; bf16 trains within a stated distance of fp32; a rank killed
mid-run ends the job naming it; bad flags, and data prepared with another tokenizer, get the
`infinipipe` command's messages."""

import json
import os
import signal
import subprocess
import sys
import time
import unittest

from common import CorpusTestCase, binary, mpirun, python_env

# The C++ trainer's tiny model (tests/common/tiny_model.h's shape), on a synthetic corpus.
MODEL = ["--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4",
         "--num-query-groups", "2", "--group-query-attention", "--seq-length", "256",
         "--global-batch-size", "8", "--device", "cpu", "--memory-budget", "6MiB",
         "--min-tail-slice", "32", "--lr", "3e-3"]
TRAIN = [sys.executable, "-m", "infinipipe.torch.train"]


def losses(metrics_file):
    with open(metrics_file) as f:
        return {r["iteration"]: r["loss"] for r in map(json.loads, f)}


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def descendants(root):
    """The processes below `root`, read from /proc (Linux only, as mpirun's tests are)."""
    parent = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    # The name in parentheses may hold spaces; the parent follows the state.
                    parent[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    found, frontier = [], [root]
    while frontier:
        children = [pid for pid, ppid in parent.items() if ppid in frontier]
        found += children
        frontier = children
    return found


def end_job(p):
    """A failed test must not leave a run of 100,000 iterations behind."""
    if p.poll() is None:
        for pid in descendants(p.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        p.kill()
        p.wait()
    p.stdout.close()


class TorchTrain(CorpusTestCase):
    def words(self, *extra):
        return MODEL + ["--data-path", self.corpus] + list(extra)

    def run_py(self, *extra):
        return subprocess.run(TRAIN + self.words(*extra), env=python_env(), capture_output=True,
                              text=True, timeout=240)

    def run_cpp(self, n, *extra):
        cmd = [binary(), "train"] + self.words(*extra)
        if n > 1:
            cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
                   "-np", str(n), "-x", "OMP_NUM_THREADS"] + cmd
        return subprocess.run(cmd, env=python_env(), capture_output=True, text=True, timeout=240)

    def test_pp2_dp2_loss_falls_and_the_report_reads_the_run(self):
        run = os.path.join(self.dir, "traced")
        timings = os.path.join(self.dir, "timings", "timings.jsonl")
        tmp = os.path.join(self.dir, "tmp")
        os.makedirs(tmp)
        r = mpirun(4, ["-m", "infinipipe.torch.train"] + self.words(
            "--pp", "2", "--dp", "2", "--train-iters", "8", "--trace", run, "--trace-explain",
            "--trace-iterations", "1-4", "--timings", timings), tmpdir=tmp)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("done: 8 iterations", r.stdout)
        # The ranks met through a file in the job's session folder in TMPDIR; nothing is left.
        self.assertEqual([f for _, _, files in os.walk(tmp) for f in files], [])
        loss = losses(os.path.join(run, "metrics.jsonl"))  # next to the traces, as train puts it
        self.assertEqual(sorted(loss), list(range(1, 9)))
        self.assertLess(loss[8], loss[1] - 0.3, loss)
        # Every rank writes its own metrics and timings next to rank 0's, as `infinipipe train`.
        for rank in range(1, 4):
            self.assertEqual(sorted(losses(os.path.join(run, f"metrics-rank{rank:05d}.jsonl"))),
                             list(range(1, 9)))
        for rank in range(4):
            name = "timings.jsonl" if rank == 0 else f"timings-rank{rank:05d}.jsonl"
            with open(os.path.join(self.dir, "timings", name)) as f:
                records = [json.loads(line) for line in f]
            self.assertEqual([t["iteration"] for t in records], list(range(1, 9)))
            stage = rank // 2  # Megatron's order: world rank = stage x dp + replica
            for t in records:
                self.assertGreater(t["predicted_step_seconds"], 0)
                self.assertTrue(t["actions"])
                for a in t["actions"]:
                    self.assertEqual(a["rank"], stage, a)
                    self.assertGreater(a["predicted_s"], 0)
                    self.assertLessEqual(a["start_s"], a["end_s"])
        report = subprocess.run([binary(), "report", run], capture_output=True, text=True)
        self.assertEqual(report.returncode, 0, report.stderr)
        self.assertIn("epp schedule, pp 2 x dp 2, 4 iteration(s) traced on 4 ranks", report.stdout)
        self.assertRegex(report.stdout, r"\| forward \| [1-9]\d* \|")
        self.assertTrue(os.path.exists(os.path.join(run, "report.html")))
        # --trace-explain: each traced plan carries the planner's candidates, one of them chosen
        # with the plan's own prediction; the page shows them.
        for it in range(1, 5):
            for replica in range(2):
                with open(os.path.join(run, "plans", f"iter-{it:08d}-replica{replica}.json")) as f:
                    plan = json.load(f)
                chosen = [c for c in plan["explain"]["candidates"] if c["chosen"]]
                self.assertEqual(len(chosen), 1)
                self.assertEqual(chosen[0]["predicted_step_time"], plan["predicted_step_time"])
        self.assertFalse(os.path.exists(os.path.join(run, "plans", "iter-00000005-replica0.json")))
        with open(os.path.join(run, "report.html")) as f:
            self.assertIn("<h2>Why these plans</h2>", f.read())

    def test_checkpoints_resume_across_runtimes_to_the_uninterrupted_loss(self):
        whole = os.path.join(self.dir, "whole.jsonl")
        r = self.run_cpp(1, "--train-iters", "4", "--metrics", whole)
        self.assertEqual(r.returncode, 0, r.stderr)
        want = losses(whole)[4]
        # infinipipe train (pp 2, MPI) stops at 3; PyTorch (one process) resumes.
        cpp = os.path.join(self.dir, "from-cpp")
        r = self.run_cpp(2, "--pp", "2", "--train-iters", "4", "--exit-interval", "3", "--save",
                         cpp)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        got = os.path.join(self.dir, "py-resumed.jsonl")
        r = self.run_py("--train-iters", "4", "--load", cpp, "--metrics", got)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("resumed from", r.stdout)
        self.assertAlmostEqual(losses(got)[4], want, delta=1e-5 * want)
        # PyTorch stops at 3; infinipipe train resumes.
        py = os.path.join(self.dir, "from-py")
        r = self.run_py("--train-iters", "4", "--exit-interval", "3", "--save", py)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        got = os.path.join(self.dir, "cpp-resumed.jsonl")
        r = self.run_cpp(1, "--train-iters", "4", "--load", py, "--metrics", got)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertAlmostEqual(losses(got)[4], want, delta=1e-5 * want)

    def test_the_distributed_optimizer_resumes_across_runtimes(self):
        zero = ["--dp", "2", "--use-distributed-optimizer", "--train-iters", "4"]
        whole = os.path.join(self.dir, "zero-whole.jsonl")
        self.assertEqual(self.run_cpp(1, "--train-iters", "4", "--metrics", whole).returncode, 0)
        want = losses(whole)[4]
        py = os.path.join(self.dir, "zero-py")
        r = mpirun(2, ["-m", "infinipipe.torch.train"] + self.words(
            *zero, "--exit-interval", "3", "--save", py))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        got = os.path.join(self.dir, "zero-cpp-resumed.jsonl")
        r = self.run_cpp(2, *zero, "--load", py, "--metrics", got)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertAlmostEqual(losses(got)[4], want, delta=1e-5 * want)
        cpp = os.path.join(self.dir, "zero-cpp")
        r = self.run_cpp(2, *zero, "--exit-interval", "3", "--save", cpp)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        got = os.path.join(self.dir, "zero-py-resumed.jsonl")
        r = mpirun(2, ["-m", "infinipipe.torch.train"] + self.words(
            *zero, "--load", cpp, "--metrics", got))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertAlmostEqual(losses(got)[4], want, delta=1e-5 * want)

    def test_validation_and_test_losses_are_the_engines(self):
        # A budget that slices: evaluation's forward-only plans keep the training plans' chunks.
        evals = ["--train-iters", "4", "--split", "90,5,5", "--eval-interval", "2",
                 "--eval-iters", "2", "--pp", "2", "--memory-budget", "3MiB"]
        py, cpp = (os.path.join(self.dir, f"eval-{k}.jsonl") for k in ("py", "cpp"))
        r = mpirun(2, ["-m", "infinipipe.torch.train"] + self.words(*evals, "--metrics", py))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        r = self.run_cpp(2, *evals, "--metrics", cpp)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(py) as f:
            got = [json.loads(line) for line in f]
        with open(cpp) as f:
            want = [json.loads(line) for line in f]
        self.assertTrue(any(int(r["plan_knobs"].split("K=")[1].split(",")[0]) > 1 for r in got),
                        [r["plan_knobs"] for r in got])  # some batch's longest sequence was cut
        for a, b in zip(got, want):
            for key in ("valid_loss", "test_loss"):
                self.assertEqual(key in a, key in b, (a, b))
                if key in b:
                    self.assertAlmostEqual(a[key], b[key], delta=1e-5 * b[key], msg=key)
        self.assertIn("test_loss", got[-1])

    def test_long_documents_split_reads_the_samples_train_reads(self):
        # Both trainers read samples through the same RunDatasets: the same pieces, said once.
        split = ["--train-iters", "2", "--seq-length", "64", "--long-documents", "split",
                 "--eval-iters", "0"]
        note = "note: --long-documents split: the training split's 400 documents are "
        py, cpp = (os.path.join(self.dir, f"split-{k}.jsonl") for k in ("py", "cpp"))
        for r in (self.run_py(*split, "--metrics", py), self.run_cpp(1, *split, "--metrics", cpp)):
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertEqual(r.stderr.count(note), 1, r.stderr)
            self.assertNotIn("truncates", r.stderr)
        self.assertEqual(sorted(losses(py)), sorted(losses(cpp)))
        cut = self.run_py("--train-iters", "1", "--seq-length", "64", "--eval-iters", "0")
        self.assertEqual(cut.returncode, 0, cut.stdout + cut.stderr)
        self.assertEqual(cut.stderr.count("warning: --seq-length 64 truncates"), 1, cut.stderr)

    def test_bf16_trains_within_two_percent_of_fp32(self):
        fp32, bf16 = (os.path.join(self.dir, f"{k}.jsonl") for k in ("fp32", "bf16"))
        self.assertEqual(self.run_py("--train-iters", "6", "--metrics", fp32).returncode, 0)
        r = self.run_py("--train-iters", "6", "--metrics", bf16, "--bf16")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        a, b = losses(fp32), losses(bf16)
        self.assertLess(b[6], b[1] - 0.2, b)
        for i in a:
            self.assertAlmostEqual(b[i], a[i], delta=0.02 * a[i], msg=f"iteration {i}")

    def test_a_killed_rank_ends_the_job_naming_it(self):
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np",
               "2", "-x", "PYTHONPATH", "-x", "OMP_NUM_THREADS"] + TRAIN + self.words(
                   "--pp", "2", "--train-iters", "100000", "--p2p-timeout", "60")
        p = subprocess.Popen(cmd, env=python_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        self.addCleanup(end_job, p)
        line = p.stdout.readline()
        while line and "iter 1/" not in line:
            line = p.stdout.readline()
        # A rank of this job only: other tests' ranks may run beside it.
        victims = [pid for pid in descendants(p.pid) if "infinipipe.torch.train" in cmdline(pid)]
        self.assertTrue(victims, "no rank to kill")
        os.kill(max(victims), signal.SIGKILL)
        start = time.time()
        out, _ = p.communicate(timeout=120)
        self.assertNotEqual(p.returncode, 0)
        self.assertLess(time.time() - start, 90)
        self.assertRegex(out, r"rank \d+ with PID \d+ .*(signal 9|Killed)")

    def test_data_of_another_tokenizer_is_refused_with_trains_message(self):
        docs = os.path.join(self.dir, "docs.jsonl")
        with open(docs, "w") as f:
            for i in range(40):
                f.write(json.dumps({"text": f"the pipe {i} plans the pipes. " * 10}) + "\n")
        prefix = os.path.join(self.dir, "prepared")
        subprocess.run([binary(), "data", "prepare", "--input", docs, "--output-prefix", prefix],
                       check=True, capture_output=True)
        data = prefix + "_text_document"
        words = MODEL + ["--data-path", data, "--train-iters", "1"]
        # Data `data prepare` wrote with the run's tokenizer (the byte tokenizer) trains.
        r = subprocess.run(TRAIN + words, env=python_env(), capture_output=True, text=True,
                           timeout=240)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        # Its record now names another tokenizer, as `data prepare --tokenizer-type
        # HuggingFaceTokenizer` writes it: both trainers refuse it, with one message.
        info = data + ".tokenizer_info.json"
        with open(info) as f:
            record = json.load(f)
        record.update(tokenizer_type="HuggingFaceTokenizer", tokenizer_model="llama3",
                      vocab_size=128256)
        with open(info, "w") as f:
            json.dump(record, f)
        cpp = subprocess.run([binary(), "train"] + words, capture_output=True, text=True,
                             timeout=240)
        self.assertEqual(cpp.returncode, 2, cpp.stdout + cpp.stderr)
        message = next(line.split("error: ", 1)[1] for line in cpp.stderr.splitlines()
                       if "error: " in line)
        self.assertIn("was prepared with HuggingFaceTokenizer llama3 (vocabulary 128256), but "
                      "this run's tokenizer is ByteTokenizer (vocabulary 257)", message)
        r = subprocess.run(TRAIN + words, env=python_env(), capture_output=True, text=True,
                           timeout=240)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn(f"infinipipe: error: {message}", r.stderr)

    def test_bad_flags_get_the_commands_messages(self):
        r = subprocess.run(TRAIN + ["--num-layer", "4"], env=python_env(), capture_output=True,
                           text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown option '--num-layer': did you mean 'num-layers'?", r.stderr)
        cli = subprocess.run([binary(), "train", "--num-layer", "4"], capture_output=True,
                             text=True)
        self.assertIn("unknown option '--num-layer': did you mean 'num-layers'?", cli.stderr)
        # --search-iterations sizes the search of auto degrees, as `infinipipe train` says.
        r = subprocess.run(TRAIN + self.words("--search-iterations", "4"), env=python_env(),
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--search-iterations sizes the layout search of auto degrees", r.stderr)
        # --measure-links-interval at its default too: given, it is refused, never ignored.
        for flag in (["--measure-links"], ["--measure-links-interval", "5"],
                     ["--measure-links-interval", "100"], ["--measure-links-interval=0"]):
            r = subprocess.run(TRAIN + self.words(*flag), env=python_env(),
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("--measure-links and --measure-links-interval are `infinipipe "
                          "train`'s", r.stderr)
        r = subprocess.run(TRAIN + self.words("--trace-explain"), env=python_env(),
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--trace-explain explains the plans --trace saves: add --trace DIR",
                      r.stderr)
        r = subprocess.run(TRAIN + self.words("--pp", "2"), env=python_env(), capture_output=True,
                           text=True)
        self.assertEqual(r.returncode, 2)
        # dp is derived as Megatron-LM does: one process does not hold pp 2.
        self.assertIn("launch a multiple of 2 processes (`mpirun -np N`", r.stderr)


if __name__ == "__main__":
    unittest.main()
