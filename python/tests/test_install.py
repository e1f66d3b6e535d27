"""A PyTorch user's install: `pip install --no-build-isolation .` from the checkout, offline,
into a fresh virtual environment (reusing this build's CMake folder), then `import infinipipe`
and `infinipipe.torch` from the installed package, not the checkout."""

import os
import subprocess
import sys
import unittest

import infinipipe
from common import SOURCE, TempDir


class PipInstall(unittest.TestCase):
    def test_installs_offline_and_imports_from_site_packages(self):
        build = os.path.dirname(os.path.dirname(os.path.dirname(infinipipe.__file__)))
        with TempDir() as d:
            venv = os.path.join(d, "venv")
            subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv],
                           check=True)
            py = os.path.join(venv, "bin", "python")
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            env["INFINIPIPE_BUILD_DIR"] = build
            r = subprocess.run([py, "-m", "pip", "install", "--no-build-isolation", "--no-index",
                                "--no-deps", "--quiet", SOURCE], env=env, capture_output=True,
                               text=True, cwd=d)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            probe = ("import infinipipe, infinipipe.torch.model as m; "
                     "c = infinipipe.Config.from_args(['--num-layers', '2']); "
                     "print(infinipipe.__file__, c.model.num_layers, m.Stage.__name__)")
            r = subprocess.run([py, "-c", probe], env=env, capture_output=True, text=True, cwd=d)
            self.assertEqual(r.returncode, 0, r.stderr)
            where, layers, stage = r.stdout.split()
            self.assertTrue(where.startswith(venv), where)
            self.assertEqual((layers, stage), ("2", "Stage"))
            self.assertTrue(os.path.exists(os.path.join(os.path.dirname(where), "_core.pyi")))


if __name__ == "__main__":
    unittest.main()
