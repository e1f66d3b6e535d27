"""infinipipe.torch: executes infinipipe's plans on PyTorch (CPU with gloo, GPUs with NCCL).

It needs PyTorch 2.5 or later (``enable_gqa`` in scaled_dot_product_attention, the CPU flash
kernel's log-sum-exp, ``torch.nn.attention.bias``); the tested version is the one
scripts/install-deps.sh pins. An older PyTorch is refused here, at import, once.
"""

import re

import torch

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


require_torch(torch.__version__)

# The one call for a Hugging Face transformers model (epp.py); after the check above.
from infinipipe.torch.epp import EppModel, wrap  # noqa: E402
