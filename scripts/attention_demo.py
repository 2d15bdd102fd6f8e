"""Reproduce the seeds' worked examples of scaled dot-product attention, step by step.

    python scripts/attention_demo.py            # "UPI payment failed" and "it" → scooter
    python scripts/attention_demo.py --causal   # the 3×3 example under a causal mask

The same as ``python -m translator demo`` (translator/cli.py).
"""

import sys

from translator.cli import demo_main

if __name__ == "__main__":
    sys.exit(demo_main())
