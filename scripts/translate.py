"""Translate with a trained run (the same as ``python -m translator translate``).

    python scripts/translate.py "राजेश ने कल शाम को ट्रेन टिकट बुक की"
    python scripts/translate.py --beam 5 --n-best 3 --json "पहला वाक्य" "दूसरा वाक्य"
    python scripts/translate.py --run runs/20261130-101500 < sentences.hi > sentences.en
    python scripts/translate.py --plot heatmap.png --plot-heads heads.png --layer 0 "कल शाम"

One output line per input line, in order; an empty input line gives an empty output line.
With --n-best K the K translations of a line are separated by tabs (--json gives their
scores too). Warnings (wrong script, input too long) go to standard error.

--plot/--plot-heads/--plot-layers draw the cross-attention of the translation that was
chosen (beam search too), merged to words: one file per non-empty input (FILE.png for one
input; FILE-1.png, FILE-2.png, ... for several).
"""

import sys

from translator.cli import translate_main

if __name__ == "__main__":
    sys.exit(translate_main())
