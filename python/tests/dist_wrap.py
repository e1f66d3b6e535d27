"""One rank of `infinipipe.torch.wrap` launched at pp 2 x dp 2 (run under mpirun by
test_hf_wrap.py): the folder's model in float64, one global batch, this rank's loss and
gradients (of the parameters it keeps) to OUT/rank<R>.npz, then a checkpoint in OUT/ckpt.

usage: dist_wrap.py OUT FOLDER SEED LENGTHS CONFIG-WORDS...
"""

import sys

import numpy as np
import torch
from transformers import AutoModelForCausalLM

import infinipipe.torch as ipt
from common import batch


def main():
    out, folder, seed, lengths, words = sys.argv[1], sys.argv[2], int(sys.argv[3]), \
        [int(n) for n in sys.argv[4].split(",")], sys.argv[5:]
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float64)
    epp = ipt.wrap(model, words)
    loss = epp.forward_backward(batch(seed, lengths, model.config.vocab_size))
    record = {"loss": np.array(loss)}
    names = {id(p): n for n, p in model.named_parameters()}
    for p in epp.parameters():
        record["grad/" + names[id(p)]] = p.grad.numpy()
    g = epp.groups
    np.savez(f"{out}/rank{g.rank}.npz", **record)
    epp.save(f"{out}/ckpt", iteration=1)
    epp.close()


if __name__ == "__main__":
    main()
