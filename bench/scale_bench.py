"""Data preparation at the IIT Bombay corpus's size: wall time, CPU time and peak memory per
stage, cold and warm, as rows grow.

    python bench/make_iitb_standin.py --train-rows 100000 --out bench/results/iitb-100k
    python bench/make_iitb_standin.py --train-rows 400000 --out bench/results/iitb-400k
    python bench/make_iitb_standin.py --out bench/results/iitb-1660k
    python bench/scale_bench.py                         # 100k, 400k, 1660k; cold, then warm
    python bench/scale_bench.py --sizes 100k --steps 10 # a quick look

Each measurement is a fresh process running what `python scripts/train.py --config
configs/iitb.yaml data.hub_id=STAND-IN` runs before and during its first steps: `build_run`
(read the dataset through `datasets.load_dataset`, normalise, filter, de-duplicate, check
leakage; train SentencePiece on the configured sample; encode; build the model, optimiser and
batch sampler), then N training steps. The data and tokenizer sections are iitb.yaml's; the
model is shrunk (train.batch_tokens too) because this measures the pipeline on a CPU, not the
model's speed. "cold" starts with empty caches (ours and the `datasets` cache, into which
load_dataset converts the Parquet files, as on a first download); "warm" runs the same again.

Stages (their windows come from `PreparedData.stages`; memory from /proc/self/statm sampled
every 20 ms, so the peak of a stage is the process's resident size during it, including what
earlier stages left): data (fingerprint + load + normalise + filter + de-dup + leakage, and
writing the clean splits to the cache), tokenizer, encoding, links (guided alignment's
targets: eflomal once over the clean de-duplicated pairs and their piece links, or both read
from the cache; its eflomal seconds beside it), the rest of build_run (the links, model,
optimiser, sampler), then the steps. "before step 1" is build_run and the Trainer; "process"
adds the interpreter's start and imports.
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
WORK = RESULTS / "scale-bench"
PROCESS_STARTED = time.perf_counter()
MODEL = ["model.d_model=64", "model.heads=2", "model.layers=1", "model.d_ff=256",
         "train.batch_tokens=2000"]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["100k", "400k", "1660k"],
                        help="stand-ins bench/results/iitb-SIZE to measure")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--modes", nargs="+", default=["cold", "warm"])
    parser.add_argument("--one", nargs=2, metavar=("SIZE", "MODE"), help=argparse.SUPPRESS)
    parser.add_argument("overrides", nargs="*", help="more section.key=value overrides")
    return parser.parse_args()


class Memory:
    """Samples the resident set size and the process's CPU time every 20 ms."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, int, float]] = []
        self._page = os.sysconf("SC_PAGE_SIZE")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            time.sleep(0.02)

    def sample(self) -> None:
        with open("/proc/self/statm") as statm:
            resident = int(statm.read().split()[1]) * self._page
        self.samples.append((time.perf_counter(), resident, time.process_time()))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def window(self, started: float, ended: float) -> dict[str, float]:
        inside = [s for s in self.samples if started <= s[0] <= ended]
        before = [s for s in self.samples if s[0] <= started][-1:] or inside[:1]
        after = [s for s in self.samples if s[0] >= ended][:1] or inside[-1:]
        return {"wall_s": round(ended - started, 2),
                "cpu_s": round(after[0][2] - before[0][2], 2) if before and after else 0.0,
                "peak_rss_gib": round(max(s[1] for s in inside + before) / 2**30, 2)}


def measure_one(size: str, mode: str, steps: int, overrides: list[str]) -> dict:
    """One process: build_run + `steps` training steps; returns the stages' numbers."""
    hf_cache, cache = WORK / f"hf-cache-{size}", WORK / f"cache-{size}"
    if mode == "cold":
        shutil.rmtree(hf_cache, ignore_errors=True)
        shutil.rmtree(cache, ignore_errors=True)
    os.environ.update(HF_DATASETS_CACHE=str(hf_cache), HF_HUB_OFFLINE="1",
                      HF_DATASETS_OFFLINE="1")
    memory = Memory()
    imports_started = time.perf_counter()
    sys.path.insert(0, str(ROOT))
    # Imported here, timed, after HF_DATASETS_CACHE is set (datasets reads it on import).
    from translator import build, guided, training
    from translator.config import load_config
    from translator.run_dir import RunDir

    imported = time.perf_counter()
    prepared = {}

    def prepare_data(*args, **kwargs):
        prepared["data"] = real_prepare(*args, **kwargs)
        return prepared["data"]

    real_prepare = build.prepare_data
    build.prepare_data = prepare_data
    # The guided-alignment links (eflomal over the clean pairs, then piece links), timed by
    # wrapping the function build_run calls and the eflomal call inside it (translator.guided);
    # eflomal is not called on a warm run.
    links_window, eflomal_window = {}, {}
    real_links, real_eflomal = build.guided_alignment_targets, guided.eflomal_links

    def timed(window: dict, function):
        def call(*args, **kwargs):
            window["started"] = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                window["ended"] = time.perf_counter()
        return call

    build.guided_alignment_targets = timed(links_window, real_links)
    guided.eflomal_links = timed(eflomal_window, real_eflomal)
    config = load_config(ROOT / "configs" / "iitb.yaml", [
        f"data.hub_id={RESULTS / f'iitb-{size}'}", f"data.cache_dir={cache}",
        f"train.output_dir={WORK / 'runs'}", f"train.run_name={size}-{mode}",
        "train.overwrite=true", "train.device=cpu", "train.precision=fp32",
        "train.compile=false", "train.threads=1", f"train.max_steps={steps}", *MODEL,
        *overrides])
    run_dir = RunDir.new(config.train.output_dir, config.train.run_name, overwrite=True)
    shutil.rmtree(run_dir.path, ignore_errors=True)
    run_dir.path.mkdir(parents=True)
    started = time.perf_counter()
    run = build.build_run(config, run_dir)
    trainer = training.Trainer(run)
    ready = time.perf_counter()
    batches = trainer.batches()
    losses = [trainer.train_step(batches)[0] for _ in range(steps)]
    finished = time.perf_counter()
    memory.stop()

    stages = prepared["data"].stages
    windows = {name: (stage.started, stage.ended) for name, stage in stages.items()}
    windows["links"] = (links_window["started"], links_window["ended"])
    windows["rest of build_run"] = (stages["encoding"].ended, ready)
    windows[f"{steps} steps"] = (ready, finished)
    windows["before step 1"] = (started, ready)
    windows["process"] = (PROCESS_STARTED, ready)
    result = {name: memory.window(*window) for name, window in windows.items()}
    result["process"]["wall_s"] = round(ready - PROCESS_STARTED, 2)
    result["imports"] = {"wall_s": round(imported - imports_started, 2)}
    for name, stage in stages.items():
        result[name]["from"] = stage.source
    result["links"]["from"] = "built" if eflomal_window else "cache"
    result["links"]["eflomal_s"] = round(eflomal_window["ended"] - eflomal_window["started"], 1) \
        if eflomal_window else 0.0
    # eflomal runs as a child process: its memory and CPU time are not in the samples above.
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    result["links"]["eflomal_peak_rss_gib"] = round(children.ru_maxrss / 2**20, 2)
    result["links"]["eflomal_cpu_s"] = round(children.ru_utime + children.ru_stime, 1)
    data = prepared["data"]
    cache_bytes = sum(p.stat().st_size for p in cache.rglob("*") if p.is_file())
    return {"size": size, "mode": mode, "stages": result,
            "peak_rss_gib": round(max(resource.getrusage(who).ru_maxrss for who in
                                      (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)) / 2**20, 2),
            "train_pairs": len(data.train), "train_tokens": data.train.num_tokens,
            "encoded_mib": round(data.train.nbytes / 2**20, 1),
            "cache_mib": round(cache_bytes / 2**20), "report": data.report,
            "first_loss": round(losses[0], 3), "last_loss": round(losses[-1], 3),
            "vocab": run.tokenizer.source_vocab_size}


def table(results: list[dict], steps: int) -> str:
    stages = ["data", "tokenizer", "encoding", "links", "rest of build_run", "before step 1",
              "process", f"{steps} steps"]
    lines = ["| rows | run | " + " | ".join(stages) + " | peak RSS |",
             "|---|---|" + "---|" * len(stages) + "---|"]
    for result in results:
        cells = []
        for stage in stages:
            numbers = result["stages"][stage]
            cell = f"{numbers['wall_s']:.1f} s / {numbers['cpu_s']:.1f} s cpu, " \
                   f"{numbers['peak_rss_gib']:.2f} GiB"
            if numbers.get("from") == "cache":
                cell += " (cache)"
            if numbers.get("eflomal_s"):
                cell += f" (eflomal {numbers['eflomal_s']:.1f} s / {numbers['eflomal_cpu_s']:.1f}" \
                        f" s cpu, {numbers['eflomal_peak_rss_gib']:.2f} GiB)"
            cells.append(cell)
        lines.append(f"| {result['train_pairs']:,} of {result['size']} | {result['mode']} | "
                     + " | ".join(cells) + f" | {result['peak_rss_gib']:.2f} GiB |")
    notes = [f"- {r['size']} {r['mode']}: {r['train_pairs']:,} train pairs kept "
             f"({dict(r['report']['train'])}), {r['train_tokens']:,} tokens in "
             f"{r['encoded_mib']} MiB of arrays, cache {r['cache_mib']} MiB on disk, vocabulary "
             f"{r['vocab']:,}, loss {r['first_loss']} → {r['last_loss']}" for r in results]
    return "\n".join(lines + [""] + notes)


def main() -> int:
    args = parse_args()
    if args.one:
        print(json.dumps(measure_one(*args.one, args.steps, args.overrides)))
        return 0
    WORK.mkdir(parents=True, exist_ok=True)
    results = []
    for size in args.sizes:
        if not (RESULTS / f"iitb-{size}").is_dir():
            print(f"skipped {size}: make bench/results/iitb-{size} with make_iitb_standin.py")
            continue
        for mode in args.modes:
            command = [sys.executable, __file__, "--one", size, mode, "--steps",
                       str(args.steps), *args.overrides]
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                print(done.stderr[-3000:], file=sys.stderr)
                return 1
            results.append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(json.dumps(results[-1]), file=sys.stderr)
    heading = (f"# scale_bench ({time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs, "
               f"wall / CPU time, peak resident memory)\n\n")
    text = heading + table(results, args.steps) + "\n"
    (RESULTS / "scale_bench.md").write_text(text, encoding="utf-8")
    (RESULTS / "scale_bench.json").write_text(json.dumps(results, indent=1) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
