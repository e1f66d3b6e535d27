"""One run driver (runtime/run_driver.h) for both runtimes: `infinipipe train` and
`python3 -m infinipipe.torch.train` on the same flags write the same metrics records (the same
fields, the same losses), the same online calibration file, print the same stop report, rewind
their metrics on resume and resume each other's stopped runs, with the online cost fit."""

import json
import os
import subprocess
import unittest

from common import CorpusTestCase, binary, mpirun, python_env
from test_train import MODEL

RUN = ["--pp", "2", "--train-iters", "4", "--cost-model-update", "online", "--log-interval", "1"]


def records(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def calibration(folder):
    with open(os.path.join(folder, "calibration.json")) as f:
        return json.load(f)


class SameRunBothRuntimes(CorpusTestCase):
    def words(self, *extra):
        return MODEL + ["--data-path", self.corpus] + RUN + list(extra)

    def cpp(self, *extra):
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np",
               "2", "-x", "OMP_NUM_THREADS", binary(), "train"] + self.words(*extra)
        return subprocess.run(cmd, env=python_env(), capture_output=True, text=True, timeout=240)

    def py(self, *extra):
        return mpirun(2, ["-m", "infinipipe.torch.train"] + self.words(*extra))

    def test_stopped_runs_report_record_and_resume_alike(self):
        saves = {k: os.path.join(self.dir, k) for k in ("cpp", "py")}
        runs = {"cpp": self.cpp, "py": self.py}
        for k, run in runs.items():
            r = run("--exit-interval", "3", "--save", saves[k], "--tensorboard-dir",
                    os.path.join(self.dir, f"tb-{k}"))
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn(f"stopped at iteration 3 of 4 (at --exit-interval 3): checkpoint "
                          f"{saves[k]}/iter_0000003 saved; continue with --load {saves[k]}",
                          r.stdout)
            self.assertTrue(any(n.startswith("events.out.tfevents")
                                for n in os.listdir(os.path.join(self.dir, f"tb-{k}"))), k)
        got = {k: records(os.path.join(saves[k], "metrics.jsonl")) for k in saves}
        for a, b in zip(got["py"], got["cpp"]):
            # Fields the runtime measures differently (its clocks and memory) aside, one record.
            self.assertEqual(sorted(a), sorted(b))
            self.assertEqual(a["iteration"], b["iteration"])
            self.assertEqual(a["consumed_samples"], b["consumed_samples"])
            self.assertEqual(a["plan_knobs"], b["plan_knobs"])
            self.assertAlmostEqual(a["loss"], b["loss"], delta=1e-5 * b["loss"])
        self.assertEqual([m["iteration"] for m in got["py"]], [1, 2, 3])
        # What the online fit learned, in the same file with the same content.
        cals = {k: calibration(saves[k]) for k in saves}
        self.assertEqual(sorted(cals["py"]), sorted(cals["cpp"]))
        self.assertEqual(len(cals["py"]["ranks"]), len(cals["cpp"]["ranks"]))
        # Each resumes the other's run; the metrics file is rewound to the checkpoint and
        # continued, the fit resumed from the checkpoint's state.
        for k, other in (("py", "cpp"), ("cpp", "py")):
            with open(os.path.join(saves[other], "metrics.jsonl"), "a") as f:
                f.write(json.dumps({"iteration": 4, "loss": -1.0}) + "\n")  # a lost iteration
            r = runs[k]("--save", saves[other], "--load", saves[other])
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn(f"resumed from {saves[other]} at iteration 3", r.stdout)
            self.assertIn("resumed the online cost fit", r.stdout)
            after = records(os.path.join(saves[other], "metrics.jsonl"))
            self.assertEqual([m["iteration"] for m in after], [1, 2, 3, 4], k)
            self.assertGreater(after[-1]["loss"], 0)


if __name__ == "__main__":
    unittest.main()
