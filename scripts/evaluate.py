"""Score a trained run: corpus BLEU, chrF and chrF++ with sacrebleu, with their signatures.

    python scripts/evaluate.py --run runs/latest --src test.hi --ref test.en
    python scripts/evaluate.py --run runs/latest                 # the run's own test split
    python scripts/evaluate.py --src test.hi --ref test.en --beam 1 --json

The hypotheses are written to a file (--out; default: hypotheses-<name>-beam<N>.txt in the
run folder), one a line, so the scores can be checked with the sacrebleu command.

The same as ``python -m translator evaluate`` (translator/cli.py).
"""

import sys

from translator.cli import evaluate_main

if __name__ == "__main__":
    sys.exit(evaluate_main())
