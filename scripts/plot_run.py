"""Redraw a run's pictures (the same as ``python -m translator plot-run``).

    python scripts/plot_run.py runs/20261130-061500                 # curves and showcase
    python scripts/plot_run.py runs/20261130-061500 --curves-only   # only curves.png

RUN/curves.png: train and dev loss, dev BLEU and chrF against steps, from RUN/metrics.jsonl,
the best checkpoint marked (by the run's train.early_stopping_metric). If the run has a
checkpoint, the showcase sentences are translated again (in the run's direction) and their
heatmaps and explorer pages rewritten in RUN/heatmaps/.
"""

import sys

from translator.cli import plot_run_main

if __name__ == "__main__":
    sys.exit(plot_run_main())
