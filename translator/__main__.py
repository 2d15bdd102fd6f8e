"""``python -m translator COMMAND ...``: the command line of `translator.cli`."""

import sys

from translator.cli import main

if __name__ == "__main__":
    sys.exit(main())
