"""The GPU bundle (bench/gpu_bundle.sh): its planner-only module imports in a clean Python 3.12
with only the bundle's folder and libraries (no site-packages, PYTHONPATH or LD_LIBRARY_PATH),
plans as the full build does, refuses the left-out engine clearly, and gpu_check refuses it
under another Python. ctest builds the bundle once (python_gpu_bundle_build) and names it in
INFINIPIPE_GPU_BUNDLE."""

import glob
import json
import os
import subprocess
import sys
import unittest

import infinipipe as ip

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUNDLE = os.environ.get("INFINIPIPE_GPU_BUNDLE", os.path.join(ROOT, "gpu-bundle"))
WORDS = ["--num-layers", "8", "--hidden-size", "64", "--num-attention-heads", "4",
         "--seq-length", "256", "--vocab-size", "97", "--pp", "2", "--global-batch-size", "6",
         "--memory-budget", "6.5MiB", "--min-tail-slice", "16", "--device", "h100-80gb"]
LENGTHS = [256, 40, 17, 200, 5, 96]
# A GPU preset, as the check plans there: with --device cpu this bundle once chose other recomputes
# than the release build (simulate agreed on one plan), not yet understood.
# Libraries every Linux has; anything else the module loads must be in the bundle.
BASE = ("linux-vdso", "ld-linux-x86-64", "libc.", "libm.", "libdl.", "librt.", "libpthread.",
        "libstdc++.", "libgcc_s.")

IN_BUNDLE = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
import infinipipe as ip
assert ip._core.planner_only and "LD_LIBRARY_PATH" not in os.environ
cfg = ip.Config.from_args(json.loads(sys.argv[2]))
cost = ip.CostModel.from_config(cfg)
plan = ip.plan(json.loads(sys.argv[3]), cfg, cost).plan
fb = ip.CostFeedback(cost)
fb.observe(plan, cost, cfg, 0, [(i, 1e-3) for i in range(len(plan.actions[0]))])
try:
    ip.reference_step(cfg, {}, [[1, 2]])
    refused = ""
except ip.ConfigError as e:
    refused = str(e)
print(json.dumps({"python": "%d.%d" % sys.version_info[:2], "module": ip._core.__file__,
                  "plan": plan.to_json(), "step": ip.simulate(plan, cfg, cost).step_time,
                  "stages": [s.num_layers for s in cfg.stage_layout(cost)],
                  "samples": fb.samples, "refused": refused}))
"""


def python_312():
    found = sorted(glob.glob(os.path.expanduser(
        os.path.join(os.environ.get("PYENV_ROOT", "~/.pyenv"), "versions/3.12.*/bin/python3.12"))))
    return found[-1] if found else None


class GpuBundle(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.py = python_312()
        if cls.py is None:  # Debian 12 has none; bench/gpu_bundle.sh skips too
            raise unittest.SkipTest("no Python 3.12 (pyenv's), the GPU machine's: no bundle to "
                                    "check (pyenv install 3.12)")
        if not os.path.exists(os.path.join(BUNDLE, "bundle.json")):
            if "INFINIPIPE_GPU_BUNDLE" in os.environ:  # ctest built it: its absence is a failure
                raise AssertionError(f"no bundle at {BUNDLE} (python_gpu_bundle_build failed?)")
            raise unittest.SkipTest(f"no bundle at {BUNDLE}: bash bench/gpu_bundle.sh makes it "
                                    f"(ctest builds it first as python_gpu_bundle_build)")
        with open(os.path.join(BUNDLE, "bundle.json")) as f:
            cls.meta = json.load(f)

    def test_a_clean_python_imports_it_and_plans_as_the_full_build(self):
        out = subprocess.run(
            [self.py, "-I", "-S", "-c", IN_BUNDLE, BUNDLE, json.dumps(WORDS),
             json.dumps(LENGTHS)],
            env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        got = json.loads(out.stdout)
        self.assertEqual(got["python"], "3.12")
        self.assertTrue(got["module"].startswith(os.path.abspath(BUNDLE)), got["module"])
        self.assertIn("planner-only", got["refused"])
        self.assertGreater(got["samples"], 0)
        cfg = ip.Config.from_args(WORDS)
        cost = ip.CostModel.from_config(cfg)
        want = ip.plan(LENGTHS, cfg, cost).plan
        plan = ip.Plan.from_json(got["plan"])
        self.assertIn("split", {c.kind for c in plan.chunks})  # the budget slices sequences
        # The bundle is built without -march=native: the same decisions, times to rounding.
        self.assertEqual([[(s.seq, s.offset, s.len) for s in c.slices] for c in plan.chunks],
                         [[(s.seq, s.offset, s.len) for s in c.slices] for c in want.chunks])
        self.assertEqual([[(a.kind, a.chunk, a.stage, a.recompute_layers) for a in r]
                          for r in plan.actions],
                         [[(a.kind, a.chunk, a.stage, a.recompute_layers) for a in r]
                          for r in want.actions])
        self.assertAlmostEqual(got["step"] / ip.simulate(want, cfg, cost).step_time, 1.0,
                               places=9)
        self.assertEqual(got["stages"], [s.num_layers for s in cfg.stage_layout(cost)])

    def test_its_libraries_are_beside_it(self):
        folder = os.path.join(BUNDLE, "infinipipe")
        module = os.path.join(folder, self.meta["module"])
        for path in [module] + [os.path.join(folder, n) for n in self.meta["libraries"]]:
            dyn = subprocess.run(["readelf", "-d", path], capture_output=True, text=True,
                                 check=True).stdout
            self.assertIn("(RUNPATH)", dyn, path)
            self.assertIn("[$ORIGIN]", dyn, path)
            for line in dyn.splitlines():
                if "(NEEDED)" in line:
                    name = line.split("[")[1].rstrip("]")
                    self.assertTrue(name.startswith(BASE) or
                                    os.path.exists(os.path.join(folder, name)),
                                    f"{path} needs {name}, which the bundle lacks")
        for name in ("libdnnl", "libmpi", "libicu", "libsentencepiece", "libpcre2"):
            self.assertFalse(glob.glob(os.path.join(folder, name + "*")), name)
        self.assertTrue(os.path.exists(os.path.join(BUNDLE, "reference", "small.npz")))
        package = os.path.join(ROOT, "python", "infinipipe")
        for d, _, files in os.walk(package):  # the package as it is now (else: rebuild it)
            for f in files:
                if f.endswith((".py", ".pyi", ".typed")):
                    rel = os.path.relpath(os.path.join(d, f), package)
                    with open(os.path.join(d, f), "rb") as a, \
                            open(os.path.join(folder, rel), "rb") as b:
                        self.assertEqual(a.read(), b.read(), f"{rel} differs from the bundle's")
        self.assertFalse(any(os.path.islink(os.path.join(d, f))
                             for d, _, fs in os.walk(BUNDLE) for f in fs))

    def test_gpu_check_refuses_it_under_another_python(self):
        if sys.version_info[:2] == (3, 12):
            self.skipTest("this test's Python is the bundle's")
        out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gpu_check.py"),
                              "--bundle", BUNDLE, "--device", "cpu", "--out", "unused"],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 1)
        self.assertEqual(len(out.stderr.strip().splitlines()), 1, out.stderr)
        self.assertIn("built for Python 3.12", out.stderr)
        self.assertIn("this is Python %d.%d" % sys.version_info[:2], out.stderr)
        self.assertIn("bench/gpu_bundle.sh --python", out.stderr)
        self.assertFalse(os.path.exists("unused"))


class GpuCheckRefusals(unittest.TestCase):
    """gpu_check's one-message refusals of a machine it cannot use (no bundle needed)."""

    def refusal(self, **patches):
        sys.path.insert(0, os.path.join(ROOT, "bench"))
        try:
            import gpu_check
        finally:
            sys.path.pop(0)
        import torch
        saved = {}
        for name, value in patches.items():
            owner, attr = (torch, name) if name == "__version__" else (torch.cuda, name)
            saved[(owner, attr)] = getattr(owner, attr)
            setattr(owner, attr, value)
        try:
            with self.assertRaises(SystemExit) as e:
                gpu_check.check_machine("cuda")
        finally:
            for (owner, attr), value in saved.items():
                setattr(owner, attr, value)
        self.assertEqual(len(str(e.exception.code).splitlines()), 1)
        return str(e.exception.code)

    def test_an_old_pytorch(self):
        message = self.refusal(__version__="2.1.0")
        self.assertIn("needs PyTorch >= 2.5", message)
        self.assertIn("PyTorch 2.1.0", message)

    def test_no_gpu(self):
        self.assertIn("sees no GPU", self.refusal(is_available=lambda: False))

    def test_a_gpu_without_bf16(self):
        message = self.refusal(is_available=lambda: True, is_bf16_supported=lambda: False,
                               get_device_name=lambda i=0: "Tesla V100",
                               get_device_capability=lambda i=0: (7, 0))
        self.assertIn("Tesla V100 (compute capability 7.0) has no bf16", message)
        self.assertIn("Ampere or later", message)


if __name__ == "__main__":
    unittest.main()
