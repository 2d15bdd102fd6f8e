"""Word alignments of given sentence pairs from a trained model's cross-attention.

    python scripts/align.py --run runs/latest --src test.hi --tgt test.en
    python scripts/align.py --run RUN --src dev.hi --tgt dev.en \\
        --gold dev.en-hi.pharaoh --gold-reversed          # + AER; gold indexes English first

Prints one line of 0-based Pharaoh links per sentence pair ("i-j": source word i, target word
j; words are whitespace-separated), forced alignment by teacher forcing: each target word is
linked to the source word it attends to most (or, with --threshold, to every source word with
at least that weight) in the chosen layer, its heads averaged. A pair with an empty side gets
an empty line. With --gold, the alignment error rate goes to standard error.

The same as ``python -m translator align`` (translator/cli.py).
"""

import sys

from translator.cli import align_main

if __name__ == "__main__":
    sys.exit(align_main())
