"""Invariant 1 on PyTorch across processes: one step's loss and every parameter's gradient at
pp 1, 2, 4 and dp 1, 2 on up to four ranks (virtual stages too, and Ulysses sequence parallelism
of degree 2 inside the stages), under budgets tight enough that the plans slice, pack, mix hybrid
chunks, recompute and run several pipelines, equal the C++ engine's on one process with every
sequence whole (fp32, 1e-5 relative). Eight ranks (pp 4 x dp 2) would double the test's time on
two cores for no path four ranks miss; tests/dist's DistMatrix trains that layout."""

import glob
import json
import os
import unittest

import numpy as np

import infinipipe as ip
from common import HERE, LENGTHS, MODEL, TempDir, batch, mpirun, reference, relative_error

# (pp, dp, vpp, ulysses, budget): each budget is tight for its layout (what the plans do is
# asserted).
LAYOUTS = [(1, 1, 1, 1, "10MiB"), (1, 2, 1, 1, "10MiB"), (2, 1, 1, 1, "6MiB"),
           (2, 2, 1, 1, "6MiB"), (2, 1, 2, 1, "5MiB"), (4, 1, 1, 1, "3MiB"), (4, 1, 2, 1, "3MiB"),
           (1, 1, 1, 2, "7MiB"), (2, 1, 1, 2, "4MiB"), (1, 2, 1, 2, "7MiB")]
SEED = 11


class DistGradients(unittest.TestCase):
    def words(self, pp, dp, vpp, sp, budget):
        return MODEL + ["--pp", str(pp), "--dp", str(dp), "--vpp", str(vpp), "--ulysses-degree",
                        str(sp), "--memory-budget", budget, "--global-batch-size",
                        str(len(LENGTHS))]

    def run_layouts(self, world, layouts):
        """The layouts of one world size in one mpirun job; their ranks' records, in order."""
        with TempDir() as out:
            cases = []
            for i, layout in enumerate(layouts):
                os.makedirs(os.path.join(out, str(i)))
                cases.append({"out": os.path.join(out, str(i)), "seed": SEED,
                              "lengths": LENGTHS, "words": self.words(*layout)})
            path = os.path.join(out, "cases.json")
            with open(path, "w") as f:
                json.dump(cases, f)
            r = mpirun(world, [os.path.join(HERE, "dist_grads.py"), path], timeout=600)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            return [[np.load(f) for f in sorted(glob.glob(os.path.join(c["out"], "rank*.npz")))]
                    for c in cases]

    def check_layout(self, ranks, pp, dp, vpp, sp, budget):
        cfg = ip.Config.from_args(self.words(pp, dp, vpp, sp, budget))
        want_loss, want = reference(cfg, batch(SEED, LENGTHS, cfg.model.vocab_size))
        self.assertEqual(len(ranks), pp * dp * sp)
        kinds = set().union(*(set(x["kinds"].tolist()) for x in ranks))
        self.assertTrue({"split", "hybrid"} <= kinds, f"the plans did not slice: {kinds}")
        self.assertGreater(sum(int(x["recompute"]) for x in ranks), 0, "nothing was recomputed")
        self.assertEqual({int(x["vpp"]) for x in ranks}, {vpp})
        for x in ranks:
            self.assertAlmostEqual(float(x["loss"]), want_loss, delta=1e-5 * abs(want_loss))
        got = {}
        for x in ranks:
            for key in x.files:
                if key.startswith("grad/"):
                    name = key.split("/", 2)[2]
                    # Every replica, every rank of a Ulysses group and both ends of a tied
                    # embedding hold the whole gradient.
                    if name in got:
                        self.assertLess(relative_error(x[key], got[name]), 1e-6, name)
                    got[name] = x[key]
        self.assertEqual(set(got), set(want))
        for name, g in want.items():
            self.assertLess(relative_error(got[name], g), 1e-5, name)

    def test_every_layout_matches_one_process(self):
        pipelines = 0
        worlds = sorted({pp * dp * sp for pp, dp, _, sp, _ in LAYOUTS})
        for world in worlds:
            layouts = [x for x in LAYOUTS if x[0] * x[1] * x[3] == world]
            with self.subTest(world=world):
                records = self.run_layouts(world, layouts)
            for (pp, dp, vpp, sp, budget), ranks in zip(layouts, records):
                with self.subTest(pp=pp, dp=dp, vpp=vpp, ulysses=sp):
                    self.check_layout(ranks, pp, dp, vpp, sp, budget)
                    pipelines = max(pipelines, max(int(x["pipelines"]) for x in ranks))
        self.assertGreater(pipelines, 1, "no plan ran several pipelines")


if __name__ == "__main__":
    unittest.main()
