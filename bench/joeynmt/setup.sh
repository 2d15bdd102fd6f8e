#!/usr/bin/env bash
# JoeyNMT 2.3.0 in its own virtual environment (bench/.venv-joeynmt), for bench/joeynmt_bench.py.
# It is never a dependency of the project. torch==2.13.0 is named first on the same command
# line: otherwise pip resolves JoeyNMT's torch requirement to a multi-GB CUDA build.
# sentencepiece is pinned to 0.2.0: JoeyNMT 2.3.0 calls SentencePieceProcessor.SetVocabulary,
# which newer releases (0.2.3, what pip picks today) no longer have.
#
#     bash bench/joeynmt/setup.sh      # a few minutes; joeynmt_bench.py runs it when needed
set -euo pipefail
cd "$(dirname "$0")/../.."
python3 -m venv bench/.venv-joeynmt
bench/.venv-joeynmt/bin/pip install torch==2.13.0 joeynmt==2.3.0 importlib-metadata \
    sentencepiece==0.2.0
bench/.venv-joeynmt/bin/python -c "from importlib.metadata import version as v; \
print('installed joeynmt', v('joeynmt'), 'with torch', v('torch'))"
