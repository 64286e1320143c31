"""Table C of the benchmark suite: latency, and the floor the socket sets.

Sync ping-pong at 1/64/1024 bytes (Myelin, raw TCP, gRPC unary), concurrent
pairs 1/4/16, and fixed-rate sends measured from their scheduled time (free of
coordinated omission), including the 1-in-32 reply case. Every row of a kind
is measured in the same run, implementations alternating. Called by
driver.py: run(args, results, outdir) -> list of failures.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

from service import ServiceProcess

STATS = ("mean", "p50", "p90", "p99", "p999", "p9999", "max")




def _run(cmd: list, timeout: float) -> dict:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"verified": False, "error": "timed out"}
    lines = [l for l in out.stdout.splitlines() if l.startswith("{")]
    if not lines:
        return {"verified": False, "error": f"no result (exit {out.returncode}): {out.stderr.strip()[-200:]}"}
    return json.loads(lines[-1])


def _median_stats(runs: list) -> dict:
    ok = [r for r in runs if r.get("verified")]
    if not ok:
        return {}
    merged = {}
    for s in STATS:
        vals = [r["latency_us"][s] for r in ok if s in r.get("latency_us", {})]
        if vals:
            merged[s] = statistics.median(vals)
    rates = [r["rps"] if "rps" in r else r.get("achieved_rate", 0) for r in ok]
    if rates:
        merged["rate"] = statistics.median(rates)
    return merged


def _fmt(v) -> str:
    if v is None:
        return "–"
    return f"{v:,.1f}" if v < 1000 else f"{v:,.0f}"


def run(args, results: dict, outdir: str) -> list:
    b = os.path.join(args.build_dir, "bench")
    lat = os.path.join(b, "latency_client")
    grpc_client = os.path.join(b, "grpc", "grpc_client")
    if not os.path.exists(lat):
        print("Table C: latency_client is not built", file=sys.stderr)
        return [("TableC", "missing")]
    quick = args.quick
    repeat = 1 if quick else max(1, args.repeat)
    calls = 2000 if quick else 20000
    rate_duration = 0.2 if quick else max(1.0, args.duration)
    services = {"myelin": ServiceProcess(os.path.join(b, "bench_service"), getattr(args, "connect", None)).start(),
                "raw": ServiceProcess(os.path.join(b, "raw_echo_service"), getattr(args, "connect_raw", None)).start()}
    grpc = None
    if os.path.exists(grpc_client):
        grpc = ServiceProcess(os.path.join(b, "grpc", "grpc_service"), getattr(args, "connect_grpc", None)).start()
    failures = []
    table = {"pingpong": [], "pairs": [], "fixedrate": []}

    def myelin_or_raw(impl, extra):
        return _run([lat, "--impl", impl, "--connect", services[impl].address] + extra, timeout=300)

    def grpc_unary(payload, pairs):
        # The gRPC client measures for a duration; size it to about `calls` round trips.
        dur = "0.3" if quick else "2"
        return _run([grpc_client, "--connect", grpc.address, "--test", "UnaryLatency", "--payload", str(payload),
                     "--threads", str(pairs), "--duration", dur, "--warmup", "0.1" if quick else "0.5"],
                    timeout=300)

    def progress(label, impl, r):
        ok = r.get("verified") is True
        l = r.get("latency_us", {})
        print(f"[C] {label:<34} {impl:<6} p50 {_fmt(l.get('p50'))} us, p99 {_fmt(l.get('p99'))} us"
              f"{'' if ok else '  FAILED: ' + str(r.get('error'))}", file=sys.stderr, flush=True)
        if not ok:
            failures.append(("TableC", label, impl))

    try:
        # Ping-pong, one pair, three sizes.
        for payload in (1, 64, 1024):
            runs = {"myelin": [], "raw": [], "grpc": []}
            for _ in range(repeat):
                for impl in ("myelin", "raw"):
                    r = myelin_or_raw(impl, ["--payload", str(payload), "--calls", str(calls)])
                    progress(f"ping-pong {payload} B", impl, r)
                    runs[impl].append(r)
                if grpc:
                    r = grpc_unary(payload, 1)
                    progress(f"ping-pong {payload} B", "grpc", r)
                    runs["grpc"].append(r)
            table["pingpong"].append({"payload": payload, **{k: _median_stats(v) for k, v in runs.items()},
                                      "runs": runs})
        # Concurrent pairs at 64 B.
        for pairs in (1, 4, 16):
            runs = {"myelin": [], "raw": [], "grpc": []}
            for _ in range(repeat):
                for impl in ("myelin", "raw"):
                    r = myelin_or_raw(impl, ["--payload", "64", "--pairs", str(pairs),
                                             "--calls", str(max(500, calls // pairs))])
                    progress(f"{pairs} concurrent pairs, 64 B", impl, r)
                    runs[impl].append(r)
                if grpc:
                    r = grpc_unary(64, pairs)
                    progress(f"{pairs} concurrent pairs, 64 B", "grpc", r)
                    runs["grpc"].append(r)
            table["pairs"].append({"pairs": pairs, **{k: _median_stats(v) for k, v in runs.items()}, "runs": runs})
        # Fixed rate, latency from the scheduled send time.
        for rate, every in ((50000, 1), (200000, 1), (256000, 32)):
            runs = {"myelin": [], "raw": []}
            for _ in range(repeat):
                for impl in ("myelin", "raw"):
                    r = myelin_or_raw(impl, ["--mode", "fixedrate", "--rate", str(rate), "--reply-every", str(every),
                                             "--payload", "64", "--duration", str(rate_duration),
                                             "--warmup", "0.05" if quick else "0.5"])
                    progress(f"fixed {rate // 1000}k/s, 1 in {every} answered", impl, r)
                    runs[impl].append(r)
            table["fixedrate"].append({"rate": rate, "reply_every": every,
                                       **{k: _median_stats(v) for k, v in runs.items()}, "runs": runs})
    finally:
        for s in list(services.values()) + ([grpc] if grpc else []):
            s.stop()

    print("\n## Table C — latency (µs; medians of runs; same run for every row of a block)\n")
    print("### Sync ping-pong, one call in flight\n")
    print("| Payload | Impl | mean | p50 | p90 | p99 | p99.9 | max | ÷ raw (mean) | ÷ raw (p99) |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in table["pingpong"]:
        raw = row.get("raw", {})
        for impl in ("myelin", "raw", "grpc"):
            s = row.get(impl)
            if not s:
                continue
            rm = f"{s['mean'] / raw['mean']:.2f}×" if raw.get("mean") else "–"
            rp = f"{s['p99'] / raw['p99']:.2f}×" if raw.get("p99") else "–"
            print(f"| {row['payload']} B | {impl} | {_fmt(s.get('mean'))} | {_fmt(s.get('p50'))} | {_fmt(s.get('p90'))} "
                  f"| {_fmt(s.get('p99'))} | {_fmt(s.get('p999'))} | {_fmt(s.get('max'))} | {rm} | {rp} |")
    print("\n### Concurrent pairs, 64 B\n")
    print("| Pairs | Impl | calls/s | p50 | p99 | max |")
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    for row in table["pairs"]:
        for impl in ("myelin", "raw", "grpc"):
            s = row.get(impl)
            if s:
                print(f"| {row['pairs']} | {impl} | {_fmt(s.get('rate'))} | {_fmt(s.get('p50'))} | {_fmt(s.get('p99'))} "
                      f"| {_fmt(s.get('max'))} |")
    print("\n### Fixed rate, latency from the scheduled send time (no coordinated omission), 64 B\n")
    print("| Rate | Answered | Impl | mean | p50 | p99 | p99.9 | p99.99 | max |")
    print("| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in table["fixedrate"]:
        for impl in ("myelin", "raw"):
            s = row.get(impl)
            if s:
                print(f"| {row['rate']:,}/s | 1 in {row['reply_every']} | {impl} | {_fmt(s.get('mean'))} "
                      f"| {_fmt(s.get('p50'))} | {_fmt(s.get('p99'))} | {_fmt(s.get('p999'))} "
                      f"| {_fmt(s.get('p9999'))} | {_fmt(s.get('max'))} |")
    exe = os.path.join(b, "executor_bench")
    if os.path.exists(exe):
        tasks = "100000" if quick else "1000000"
        out = subprocess.run([exe, "--tasks", tasks], capture_output=True, text=True, timeout=600)
        rows = [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]
        table["executor"] = rows
        print(f"\n### Executor dispatch: post and run {int(tasks):,} tasks\n")
        print("| Threads | Myelin pool, tasks/s | Asio io_context, tasks/s | Myelin / Asio |")
        print("| ---: | ---: | ---: | ---: |")
        for r in rows:
            print(f"| {r['threads']} | {r['myelin_per_s']:,.0f} | {r['asio_per_s']:,.0f} "
                  f"| {r['myelin_per_s'] / r['asio_per_s']:.2f}× |")
        if len(rows) != 4:
            failures.append(("TableC", "executor dispatch"))
    results["table_c"] = table
    return failures
