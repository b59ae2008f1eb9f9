"""GPU smoke check of the production config (vLLM 0.26 on the lent GPU machine).

Serves serve_config.yaml with its model swapped for a Qwen2.5-1.5B-shaped model with random
weights (load_format=dummy), started through Ray's `serve run` CLI, then checks the API over
HTTP and runs 25 concurrent clients with variable-length texts. Writes a JSON summary.
Usage: python3 bench/gpu_smoke.py --tokenizer DIR --out DIR
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from serve_app.launcher import derive_config  # noqa: E402

URL = "http://127.0.0.1:8000"
WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "the",
    "weather",
    "stays",
    "lovely",
    "and",
    "everyone",
    "in",
    "the",
    "small",
    "town",
    "prepares",
    "for",
    "the",
    "festival",
    "next",
    "week",
]


def post(path: str, body: dict, timeout: float = 120) -> tuple[int, dict, float]:
    data = json.dumps(body).encode()
    req = urllib.request.Request(
        URL + path, data=data, headers={"content-type": "application/json"}
    )
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read()), time.perf_counter() - start
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}"), time.perf_counter() - start


def wait_ready(proc: subprocess.Popen, timeout: float = 420) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if proc.poll() is not None:
            raise SystemExit(f"serve run exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(URL + "/readyz", timeout=5) as r:
                if r.status == 200:
                    return time.monotonic() - start
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(2)
    raise SystemExit("not ready in time")


def closed_loop(n_requests: int, concurrency: int, seed: int = 0) -> dict:
    rng = random.Random(seed)
    # 8-150 words: about 10-200 tokens of the Qwen2 tokenizer.
    texts = [" ".join(rng.choices(WORDS, k=rng.randint(8, 150))) for _ in range(n_requests)]
    bodies = [{"text": t, "source_lang": "en", "target_lang": "de"} for t in texts]
    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        results = list(pool.map(lambda b: post("/translate", b), bodies))
    wall = time.perf_counter() - start
    ok = [r for r in results if r[0] == 200]
    lat = sorted(r[2] for r in ok)
    return {
        "requests": n_requests,
        "concurrency": concurrency,
        "ok": len(ok),
        "statuses": sorted({r[0] for r in results}),
        "wall_s": round(wall, 2),
        "rps": round(len(ok) / wall, 2),
        "p50_s": round(statistics.median(lat), 3),
        "p95_s": round(lat[int(0.95 * (len(lat) - 1))], 3),
        "output_tokens_per_s": round(sum(r[1]["usage"]["output_tokens"] for r in ok) / wall, 1),
        "mean_input_tokens": round(statistics.mean(r[1]["usage"]["input_tokens"] for r in ok), 1),
        "mean_output_tokens": round(statistics.mean(r[1]["usage"]["output_tokens"] for r in ok), 1),
    }


def api_checks() -> dict:
    item = {"text": "Hello world", "source_lang": "en", "target_lang": "de"}
    cases: dict[str, tuple[str, dict, int]] = {
        "ok": ("/translate", item, 200),
        "batch": ("/translate/batch", {"items": [item, {**item, "target_lang": "zh"}]}, 200),
        "blank": ("/translate", {**item, "text": " "}, 422),
        "bad_code": ("/translate", {**item, "source_lang": "../x"}, 400),
        "unsupported": ("/translate", {**item, "target_lang": "xx"}, 400),
        "too_long": ("/translate", {**item, "text": "word " * 5000}, 413),
        "deadline": ("/translate", {**item, "timeout_s": 0.001}, 504),
    }
    out = {}
    for name, (path, body, expected) in cases.items():
        status, _, _ = post(path, body)
        out[name] = {"status": status, "expected": expected, "pass": status == expected}
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--requests", type=int, default=1000)
    ns = parser.parse_args()
    model = Path("/tmp/smoke-model")
    model.mkdir(exist_ok=True)
    shutil.copy(ROOT / "bench/models/qwen2.5-1.5b/config.json", model / "config.json")
    for f in Path(ns.tokenizer).iterdir():
        shutil.copy(f, model / f.name)
    config = derive_config(
        ROOT / "serve_config.yaml",
        args={
            "engine": {"model": str(model), "load_format": "dummy"},
            "prompt": {"family": "chat"},
            "model_name": "qwen2.5-1.5b-dummy",
            # Random weights: output about as long as the input, as a translation is.
            "limits": {"output_tokens_ratio": 1.0, "output_tokens_margin": 0},
        },
    )
    path = Path("/tmp/smoke.yaml")
    path.write_text(yaml.safe_dump(config))
    log = open(Path(ns.out) / "serve.log", "w")  # noqa: SIM115
    cmd = [sys.executable, "-c", "from ray.serve.scripts import cli; cli()", "run", str(path)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    summary: dict = {}
    try:
        summary["ready_after_s"] = round(wait_ready(proc), 1)
        summary["api"] = api_checks()
        closed_loop(100, 25, seed=1)  # warm-up
        summary["runs"] = [closed_loop(ns.requests, 25, seed=s) for s in (2, 3)]
        gpu = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.used,memory.total", "--format=csv"],
            capture_output=True,
            text=True,
        )
        summary["nvidia_smi"] = gpu.stdout.strip()
    finally:
        proc.terminate()
        (Path(ns.out) / "summary.json").write_text(json.dumps(summary, indent=2))
        print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
