"""The translation server under load: requests/s and p50/p95 latency.

    python bench/serve_bench.py --run runs/latest
    python bench/serve_bench.py --run runs/latest-ct2 --backend ct2 --requests 80

Starts ``python -m translator serve`` on a free port (a process of its own, as it is run),
then, for 1 and 8 client threads, each on one keep-alive connection, sends one-sentence
POST /translate requests (the embedded test split's sources, in turn), greedy and beam 5,
and prints a Markdown table. Every answer is checked to be a translation of its sentence.
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from translator.data import DataConfig, load_splits  # noqa: E402


def start_server(args: argparse.Namespace) -> tuple[subprocess.Popen, str]:
    """The server process and its host:port, once it says it is serving."""
    command = [sys.executable, "-m", "translator", "serve", "--port", "0", "--quiet",
               "--backend", args.backend, "--device", "cpu"]
    if args.run is not None:
        command += ["--run", str(args.run)]
    if args.threads:
        command += ["--threads", str(args.threads)]
    process = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    for line in process.stderr:
        found = re.match(r"serving http://([^/]+)/", line)
        if found:
            return process, found.group(1)
        sys.stderr.write(line)
    raise SystemExit(f"the server did not start (exit code {process.wait()})")


def client(address: str, sentences: list[str], beam: int) -> list[float]:
    """Send each sentence in turn on one connection; the latency of each, in seconds."""
    connection = http.client.HTTPConnection(address, timeout=300)
    latencies = []
    try:
        for sentence in sentences:
            body = json.dumps([{"src": sentence, "id": 0, "beam": beam}]).encode("utf-8")
            started = time.perf_counter()
            connection.request("POST", "/translate", body=body,
                               headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            answer = json.loads(response.read())
            latencies.append(time.perf_counter() - started)
            if response.status != 200 or answer[0][0]["src"] != sentence:
                raise SystemExit(f"a bad answer ({response.status}): {answer}")
    finally:
        connection.close()
    return latencies


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", type=Path, default=None,
                        help="run folder (or, with --backend ct2, an export)")
    parser.add_argument("--backend", default="torch", choices=("torch", "ct2"))
    parser.add_argument("--threads", type=int, default=0, help="CTranslate2's CPU threads")
    parser.add_argument("--requests", type=int, default=40,
                        help="requests per measurement, shared among the clients")
    parser.add_argument("--beam", type=int, default=5)
    args = parser.parse_args()
    test = load_splits(DataConfig(source="embedded")).splits["test"]
    sources = [pair.source for pair in test]
    process, address = start_server(args)
    try:
        client(address, sources[:2], 1)  # warm-up
        print(f"{args.requests} one-sentence requests per row, backend {args.backend}, "
              f"server {address}\n")
        print("| search | clients | requests/s | p50 ms | p95 ms |")
        print("|---|---:|---:|---:|---:|")
        for beam in (1, args.beam):
            for clients in (1, 8):
                each = max(1, args.requests // clients)
                shares = [[sources[(c * each + i) % len(sources)] for i in range(each)]
                          for c in range(clients)]
                started = time.perf_counter()
                with ThreadPoolExecutor(clients) as pool:
                    parts = pool.map(client, [address] * clients, shares, [beam] * clients)
                    latencies = [t for part in parts for t in part]
                seconds = time.perf_counter() - started
                search = "greedy" if beam == 1 else f"beam {beam}"
                print(f"| {search} | {clients} | {len(latencies) / seconds:.1f} | "
                      f"{1000 * statistics.median(latencies):.0f} | "
                      f"{1000 * percentile(latencies, 0.95):.0f} |", flush=True)
    finally:
        process.terminate()
        process.wait(timeout=60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
