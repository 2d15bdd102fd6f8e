"""Train a Hindi → English Transformer.

    python scripts/train.py                                   # configs/default.yaml
    python scripts/train.py --config configs/smoke.yaml train.max_steps=50 model.layers=2
    python scripts/train.py --resume runs/20261130-101500     # continue where it stopped
    torchrun --nproc_per_node=4 scripts/train.py --config configs/iitb.yaml
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from translator.config import load_config
from translator.errors import TranslatorError
from translator.training import train

DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "default.yaml"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Train a Hindi–English Transformer.")
    parser.add_argument("--config", type=Path, default=None,
                        help=f"YAML config (default: {DEFAULT_CONFIG.relative_to(Path.cwd())}"
                        if DEFAULT_CONFIG.is_relative_to(Path.cwd()) else "YAML config")
    parser.add_argument("--resume", type=Path, default=None, metavar="RUN_DIR",
                        help="continue a run from its last checkpoint (its own config.yaml is "
                        "used; overrides still apply, e.g. train.max_steps=6000)")
    parser.add_argument("overrides", nargs="*", metavar="section.key=value",
                        help="dotted overrides, e.g. train.max_steps=200 model.layers=2")
    args = parser.parse_args(argv)
    try:
        if args.resume is not None:
            if not (args.resume / "config.yaml").is_file():
                raise TranslatorError(f"{args.resume} is not a run folder (no config.yaml in "
                                      "it); pass the folder that train.py printed")
            config = load_config(args.resume / "config.yaml", args.overrides)
        else:
            config = load_config(args.config or DEFAULT_CONFIG, args.overrides)
        run_dir, code = train(config, resume=args.resume)
    except TranslatorError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(run_dir)
    return code


if __name__ == "__main__":
    sys.exit(main())
