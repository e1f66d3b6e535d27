"""A PyTorch user's install: `pip install --no-build-isolation .` from the checkout, offline,
into a fresh virtual environment that sees this Python's PyTorch (reusing this build's CMake
folder), then `import infinipipe` and `infinipipe.torch` from the installed package, not the
checkout."""

import os
import subprocess
import sys
import sysconfig
import unittest

import infinipipe
from common import SOURCE, TempDir


def torch_version() -> str:
    import torch
    return torch.__version__


class PipInstall(unittest.TestCase):
    def test_installs_offline_and_imports_from_site_packages(self):
        build = os.path.dirname(os.path.dirname(os.path.dirname(infinipipe.__file__)))
        with TempDir() as d:
            venv = os.path.join(d, "venv")
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
            py = os.path.join(venv, "bin", "python")
            # The user's environment already has PyTorch (and pip, setuptools): this one sees
            # the running Python's packages (PyTorch's wheels are GBs; a copy proves no more).
            site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                  check=True, capture_output=True, text=True).stdout.strip()
            with open(os.path.join(site, "outer.pth"), "w") as f:
                f.write(sysconfig.get_path("purelib") + "\n")
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            env["INFINIPIPE_BUILD_DIR"] = build
            r = subprocess.run([py, "-m", "pip", "install", "--no-build-isolation", "--no-index",
                                "--no-deps", "--quiet", SOURCE], env=env, capture_output=True,
                               text=True, cwd=d)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            probe = ("import infinipipe, infinipipe.torch.model as m, torch; "
                     "c = infinipipe.Config.from_args(['--num-layers', '2']); "
                     "print(infinipipe.__file__, c.model.num_layers, m.Stage.__name__, "
                     "torch.__version__ == %r)" % torch_version())
            r = subprocess.run([py, "-c", probe], env=env, capture_output=True, text=True, cwd=d)
            self.assertEqual(r.returncode, 0, r.stderr)
            where, layers, stage, same_torch = r.stdout.split()
            self.assertTrue(where.startswith(venv), where)
            self.assertEqual((layers, stage, same_torch), ("2", "Stage", "True"))
            self.assertTrue(os.path.exists(os.path.join(os.path.dirname(where), "_core.pyi")))


if __name__ == "__main__":
    unittest.main()
