"""infinipipe.torch: executes infinipipe's plans on PyTorch (CPU with gloo, GPUs with NCCL).

It needs PyTorch 2.5 or later (``enable_gqa`` in scaled_dot_product_attention, the CPU flash
kernel's log-sum-exp, ``torch.nn.attention.bias``); the tested version is the one
scripts/install-deps.sh pins. An older PyTorch is refused here, at import, once.

PyTorch itself loads with the first module that computes (a second or two of CPU): the package
reads its version from the installed metadata, so ``python3 -m infinipipe.torch.train`` answers
--help and refuses a bad flag at once.
"""

import re

MIN_TORCH = (2, 5)


def require_torch(version: str) -> None:
    """Raises ImportError naming the installed and the required version unless `version`
    (torch.__version__) is at least MIN_TORCH."""
    found = re.match(r"(\d+)\.(\d+)", version)
    if found is None or (int(found.group(1)), int(found.group(2))) < MIN_TORCH:
        raise ImportError(
            f"infinipipe.torch needs PyTorch >= {MIN_TORCH[0]}.{MIN_TORCH[1]}; this Python has "
            f"PyTorch {version}: run scripts/install-deps.sh and use scripts/python (its "
            f"virtual environment holds the pinned PyTorch)")


def _installed_torch_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:  # a PyTorch without pip's metadata (a source build)
        import torch

        return torch.__version__


require_torch(_installed_torch_version())


def __getattr__(name):
    # The one call for a Hugging Face transformers model (epp.py), loaded when first used.
    if name in ("EppModel", "wrap"):
        from infinipipe.torch import epp

        return getattr(epp, name)
    raise AttributeError(f"module 'infinipipe.torch' has no attribute '{name}'")


__all__ = ["EppModel", "MIN_TORCH", "require_torch", "wrap"]
