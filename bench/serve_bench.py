"""The translation server under load: requests/s and p50/p95 latency, and #34's load run.

    python bench/serve_bench.py --run bench/results/default-run-fp32/run
    python bench/serve_bench.py --run runs/latest-ct2 --backend ct2 --requests 80
    python bench/serve_bench.py --run RUN --server-root /tmp/old-checkout --no-load  # before

Starts ``python -m translator serve`` on a free port (a process of its own, as it is run; from
``--server-root``, another checkout, to measure older code), then:

1. for 1, 8 and 32 client threads, each on one keep-alive connection, sends one-sentence
   POST /translate requests (the embedded test split's sources, in turn), greedy and beam 5,
   and prints a Markdown table. Every answer is checked to be a translation of its sentence.
2. the load run of issue #34 (``--no-load`` skips it): one client sends a maximal legal
   request (``--max-sentences`` sentences of Latin words, each just under the server's
   256-piece limit, beam 5) over and over, bad clients send a 2 MB body, invalid JSON,
   non-UTF-8 and a request over the piece limit, 3 idle sockets and 2 half-sent bodies stay
   open, while 8 good clients send 10 one-sentence requests each (beam 5, a 120 s client
   timeout). It prints the good requests/s beside the sequential rate (the 1-client beam-5
   row), their p50/p95, how many timed out, and what the maximal and bad requests got.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from translator.data import DataConfig, load_splits  # noqa: E402
from translator.tokenizer import Tokenizer  # noqa: E402

LATIN = ("lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor "
         "incididunt ut labore et dolore magna aliqua").split()


def start_server(args: argparse.Namespace) -> tuple[subprocess.Popen, str]:
    """The server process and its host:port, once it says it is serving."""
    command = [sys.executable, "-m", "translator", "serve", "--port", "0", "--quiet",
               "--backend", args.backend, "--device", "cpu"]
    if args.run is not None:
        command += ["--run", str(Path(args.run).resolve())]
    if args.threads:
        command += ["--threads", str(args.threads)]
    process = subprocess.Popen(command, cwd=args.server_root, stderr=subprocess.PIPE,
                               text=True)
    for line in process.stderr:
        found = re.match(r"serving http://([^/]+)/", line)
        if found:
            threading.Thread(target=process.stderr.read, daemon=True).start()  # drain it
            return process, found.group(1)
        sys.stderr.write(line)
    raise SystemExit(f"the server did not start (exit code {process.wait()})")


def exchange(connection: http.client.HTTPConnection, items: object) -> tuple[int, object]:
    body = json.dumps(items).encode("utf-8")
    connection.request("POST", "/translate", body=body,
                       headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    return response.status, json.loads(response.read())


def client(address: str, sentences: list[str], beam: int, timeout: float = 300
           ) -> tuple[list[float], int]:
    """Send each sentence in turn on one connection: the latency of each answered one, in
    seconds, and how many timed out (the connection is then opened again)."""
    connection = http.client.HTTPConnection(address, timeout=timeout)
    latencies, timeouts = [], 0
    try:
        for sentence in sentences:
            started = time.perf_counter()
            try:
                status, answer = exchange(connection, [{"src": sentence, "id": 0,
                                                        "beam": beam}])
            except TimeoutError:
                timeouts += 1
                connection.close()
                connection = http.client.HTTPConnection(address, timeout=timeout)
                continue
            latencies.append(time.perf_counter() - started)
            if status != 200 or answer[0][0]["src"] != sentence:
                raise SystemExit(f"a bad answer ({status}): {answer}")
    finally:
        connection.close()
    return latencies, timeouts


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def measure(address: str, sources: list[str], clients: int, requests: int, beam: int
            ) -> tuple[float, list[float], int]:
    """(requests/s, latencies, timeouts) of ``clients`` threads sharing ``requests``."""
    each = max(1, requests // clients)
    shares = [[sources[(c * each + i) % len(sources)] for i in range(each)]
              for c in range(clients)]
    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        parts = list(pool.map(client, [address] * clients, shares, [beam] * clients,
                              [120.0] * clients))
    seconds = time.perf_counter() - started
    latencies = [t for part, _ in parts for t in part]
    return len(latencies) / seconds, latencies, sum(timeouts for _, timeouts in parts)


def maximal_request(tokenizer: Tokenizer, sentences: int, pieces: int, beam: int
                    ) -> list[dict]:
    """``sentences`` sentences of Latin words, each of at most ``pieces`` source pieces, as
    many as fit."""
    rng = random.Random(0)
    items = []
    for _ in range(sentences):
        words: list[str] = []
        while len(tokenizer.encode_source(" ".join(
                [*words, word := rng.choice(LATIN)]))) <= pieces:
            words.append(word)
        items.append({"src": " ".join(words), "beam": beam})
    return items


def raw(address: str, data: bytes, hold: threading.Event | None = None) -> bytes:
    """Send ``data``; with ``hold``, keep the connection open until it is set, else read
    the answer."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=300) as connection:
        connection.sendall(data)
        if hold is not None:
            hold.wait(timeout=600)
            return b""
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
            if b"\r\n\r\n" in received and b'"}' in received:
                break
        return received


def load_run(address: str, sources: list[str], tokenizer: Tokenizer, args: argparse.Namespace,
             sequential_rate: float) -> None:
    """#34's load run (see the module's docstring)."""
    maximal = maximal_request(tokenizer, args.max_sentences, 255, args.beam)
    done, big_statuses, hold = threading.Event(), [], threading.Event()

    def abuser() -> None:  # the maximal request, over and over, until the good clients end
        while not done.is_set():
            connection = http.client.HTTPConnection(address, timeout=600)
            try:
                status, answer = exchange(connection, maximal)
            finally:
                connection.close()
            big_statuses.append(status)
            if status != 200:
                raise SystemExit(f"the maximal request was refused ({status}): {answer}")

    bad = {"a 2 MB body": b'[{"src": "' + b"a" * 2_000_000 + b'"}]',
           "invalid JSON": b'[{"src": ', "non-UTF-8": '[{"src": "x"}]'.encode("utf-16"),
           "over the piece limit": json.dumps([{"src": "lorem " * 400}]).encode()}
    half_sent = (b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"
                 b'[{"src": ')
    with ThreadPoolExecutor(16) as pool:
        big = pool.submit(abuser)
        time.sleep(1.0)  # the maximal request is being decoded
        idle = [pool.submit(raw, address, b"", hold) for _ in range(3)]
        halves = [pool.submit(raw, address, half_sent, hold) for _ in range(2)]
        refused = {name: pool.submit(raw, address, b"POST /translate HTTP/1.1\r\nHost: x\r\n"
                                     b"Content-Length: " + str(len(body)).encode()
                                     + b"\r\n\r\n" + body) for name, body in bad.items()}
        rate, latencies, timeouts = measure(address, sources, 8, 80, args.beam)
        done.set()
        hold.set()
        statuses = {name: future.result().split(b" ", 2)[1].decode()
                    for name, future in refused.items()}
        for future in idle + halves:
            future.result()
        big.result()
    print(f"\nload run (#34): a maximal legal request ({args.max_sentences} sentences of "
          f"255 pieces, beam {args.beam}) sent over and over, 3 idle sockets, 2 half-sent "
          f"bodies, bad requests ({', '.join(f'{k}: {v}' for k, v in statuses.items())}), "
          f"and 8 good clients x 10 one-sentence requests, beam {args.beam}:\n")
    print("| good requests/s | sequential requests/s | share | good p50 ms | good p95 ms | "
          "good timeouts (120 s) | maximal requests answered |")
    print("|---:|---:|---:|---:|---:|---:|---|")
    answered = {status: big_statuses.count(status) for status in sorted(set(big_statuses))}
    print(f"| {rate:.2f} | {sequential_rate:.2f} | {rate / sequential_rate:.0%} | "
          f"{1000 * statistics.median(latencies):.0f} | "
          f"{1000 * percentile(latencies, 0.95):.0f} | {timeouts} | "
          f"{', '.join(f'{n} x {s}' for s, n in answered.items())} |", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", type=Path, default=None,
                        help="run folder (or, with --backend ct2, an export)")
    parser.add_argument("--backend", default="torch", choices=("torch", "ct2"))
    parser.add_argument("--threads", type=int, default=0, help="CTranslate2's CPU threads")
    parser.add_argument("--requests", type=int, default=64,
                        help="requests per measurement, shared among the clients")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--server-root", type=Path, default=ROOT,
                        help="the checkout whose server to start (default: this one)")
    parser.add_argument("--no-load", action="store_true", help="skip the load run")
    parser.add_argument("--load-only", action="store_true",
                        help="only the load run, and the one-client beam row it compares with")
    parser.add_argument("--max-sentences", type=int, default=16,
                        help="sentences of the load run's maximal request (16 x 255 pieces: "
                        "the server's 4,096-piece limit)")
    args = parser.parse_args()
    test = load_splits(DataConfig(source="embedded")).splits["test"]
    sources = [pair.source for pair in test]
    process, address = start_server(args)
    try:
        client(address, sources[:2], 1)  # warm-up
        print(f"{args.requests} one-sentence requests per row, backend {args.backend}, "
              f"server {address} ({args.server_root})\n")
        print("| search | clients | requests/s | p50 ms | p95 ms |")
        print("|---|---:|---:|---:|---:|")
        rates = {}
        for beam in (args.beam,) if args.load_only else (1, args.beam):
            for clients in args.clients[:1] if args.load_only else args.clients:
                rate, latencies, _ = measure(address, sources, clients, args.requests, beam)
                rates[beam, clients] = rate
                search = "greedy" if beam == 1 else f"beam {beam}"
                print(f"| {search} | {clients} | {rate:.1f} | "
                      f"{1000 * statistics.median(latencies):.0f} | "
                      f"{1000 * percentile(latencies, 0.95):.0f} |", flush=True)
        if not args.no_load:
            tokenizer = Tokenizer.load(Path(args.run) / "tokenizer")
            load_run(address, sources, tokenizer, args, rates[args.beam, args.clients[0]])
    finally:
        process.terminate()
        process.wait(timeout=60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
