"""Installs `import infinipipe` (python/infinipipe) with its C++ extension, built by the project's
CMake: `pip install --no-build-isolation .` from a checkout. INFINIPIPE_BUILD_DIR=DIR reuses an
existing build folder (one configured for this Python: `cmake --preset release` uses the pinned
PyTorch's virtual environment of scripts/install-deps.sh) instead of configuring a fresh one
under pip's build directory."""

import glob
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = os.environ.get("INFINIPIPE_BUILD_DIR")
        if not build_dir:
            build_dir = os.path.join(os.path.abspath(self.build_temp), "cmake")
            subprocess.run(["cmake", "-S", ROOT, "-B", build_dir, "-G", "Ninja",
                            "-DCMAKE_BUILD_TYPE=Release", "-DINFINIPIPE_BUILD_BENCH=OFF",
                            f"-DPYTHON_EXECUTABLE={sys.executable}"], check=True)
        jobs = str(os.cpu_count() or 1)
        subprocess.run(["cmake", "--build", build_dir, "--target", "infinipipe_python", "-j", jobs],
                       check=True)
        built = glob.glob(os.path.join(build_dir, "python", "infinipipe", "_core*.so"))
        if len(built) != 1:
            raise RuntimeError(f"expected one _core module under {build_dir}, found {built}")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(built[0], target)


setup(
    name="infinipipe",
    version="0.1.0",
    description="Plan and train long-context LLMs with Elastic Pipeline Parallelism",
    packages=["infinipipe", "infinipipe.torch"],
    package_dir={"": "python"},
    package_data={"infinipipe": ["_core.pyi", "py.typed"]},
    ext_modules=[Extension("infinipipe._core", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.9",
    # infinipipe.torch's minimum (MIN_TORCH in python/infinipipe/torch/__init__.py).
    install_requires=["numpy", "torch>=2.5"],
    # Not `build/`, the CMake presets' folder.
    options={"build": {"build_base": "build-pip"}},
)
