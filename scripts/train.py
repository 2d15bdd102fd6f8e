"""Train a Hindi → English Transformer (the same as ``python -m translator train``).

    python scripts/train.py                                   # configs/default.yaml
    python scripts/train.py --config configs/smoke.yaml train.max_steps=50 model.layers=2
    python scripts/train.py --resume runs/20261130-101500     # continue where it stopped
    torchrun --nproc_per_node=4 scripts/train.py --config configs/iitb.yaml
"""

import sys

from translator.cli import train_main

if __name__ == "__main__":
    sys.exit(train_main())
