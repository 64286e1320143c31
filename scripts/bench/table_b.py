"""Table B of the benchmark suite: raw Myelin, one client and one service.

Runs the 17 raw tests (bench/raw_client against bench/bench_service), each
for a duration after a warm-up, `repeat` times; reports the run with the
median RPC/s. Prints the summary table as Markdown and each test's details
block, and stores every run in results["table_b"]. Called by driver.py.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import Optional

TABLE_B = [
    "OneParamToSrvAsyncVoid",
    "OneParamToClnAsyncVoid",
    "MultiOneParamToSrvAsyncVoid",
    "SendAsyncReplyAsyncVoid",
    "SmallStructToSrvAsyncVoid",
    "MediumStructToSrvAsyncVoid",
    "MultiEndpointToSrvAsyncVoid",
    "MultiEndpointToClnAsyncVoid",
    "SmallStructSendReplyAsyncVoid",
    "MediumStructSendReplyAsyncVoid",
    "LargeStructSendReplyAsyncVoid",
    "SmallStructVectorParamAsyncVoid",
    "MediumStructVectorParamAsyncVoid",
    "LargeStructVectorParamAsyncVoid",
    "SmallStructRTAsyncVal",
    "MediumStructRTAsyncVal",
    "LargeStructRTAsyncVal",
]

# --quick: every test for a fraction of a second with endpoint and thread
# counts scaled down (at least 1 each).
QUICK_DURATION, QUICK_WARMUP, QUICK_SCALE = 0.2, 0.05, 0.2

COLUMNS = ["Name", "Total RPCs", "RPC/s", "Lat p99", "Send Bytes/s", "Recv Bytes/s", "Avg Batch"]


class Service:
    """bench_service on 127.0.0.1, or an address given with --connect."""

    def __init__(self, path: str, connect: Optional[str]):
        self.path = path
        self.connect = connect
        self.proc: Optional[subprocess.Popen] = None
        self.address = ""

    def start(self) -> None:
        if self.connect:
            self.address = self.connect
            return
        self.proc = subprocess.Popen([self.path, "127.0.0.1:0"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        line = self.proc.stdout.readline()
        m = re.match(r"PORT (\d+)", line or "")
        if not m:
            self.stop()
            raise RuntimeError(f"{self.path} did not report its port (got {line!r})")
        self.address = f"127.0.0.1:{m.group(1)}"

    def stop(self) -> None:
        if self.proc:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except Exception:  # noqa: BLE001 - a hung service is killed
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def alive(self) -> bool:
        return self.connect is not None or (self.proc is not None and self.proc.poll() is None)


def fmt_int(v: float) -> str:
    return f"{v:,.0f}"


def fmt_us(us: Optional[float]) -> str:
    """Microseconds as three significant digits: "850 ns", "30.1 ms", "1.20 s"."""
    if us is None:
        return ""
    ns = us * 1e3
    for unit, scale in (("ns", 1.0), ("us", 1e3), ("ms", 1e6), ("s", 1e9)):
        v = ns / scale
        if v < 1000 or unit == "s":
            digits = 2 if v < 10 else 1 if v < 100 else 0
            return f"{v:.{digits}f} {unit}"
    return ""


def run_client(client: str, address: str, test: str, duration: float, warmup: float, scale: float) -> dict:
    cmd = [client, "--connect", address, "--test", test, "--duration", str(duration), "--warmup", str(warmup),
           "--scale", str(scale)]
    timeout = duration + warmup + 240
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        return {"impl": "myelin", "test": test, "rps": 0, "verified": False,
                "error": f"timed out after {timeout:.0f} s", "details": err}
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"impl": "myelin", "test": test, "rps": 0, "verified": False,
                "error": f"no result (exit {out.returncode}): {out.stderr.strip()[-300:]}", "details": out.stderr}
    r = json.loads(lines[-1])
    r["details"] = out.stderr
    if out.returncode != 0 and r.get("verified"):
        r["verified"] = False
        r["error"] = f"exit status {out.returncode}"
    return r


def median_index(runs: list) -> Optional[int]:
    """Index of the verified run with the median RPC/s (the lower middle one of an even count)."""
    ok = sorted((i for i, r in enumerate(runs) if r.get("verified")), key=lambda i: runs[i].get("rps", 0))
    return ok[(len(ok) - 1) // 2] if ok else None


def median_of(row: dict) -> Optional[dict]:
    i = row.get("median_run")
    return row["runs"][i] if i is not None else None


def print_table(rows: list, address: str, settings: dict) -> None:
    print("\n## Table B — raw Myelin (one client process, one service process)\n")
    print(f"Service: {address}, TLS: No; {settings['duration_s']} s per run after {settings['warmup_s']} s "
          f"warm-up, scale {settings['scale']}; the run with the median RPC/s of {settings['repeat']} "
          f"run(s) is shown.\n")
    cells = []
    for row in rows:
        r = median_of(row)
        if not r:
            cells.append([row["test"], "FAILED", "", "", "", "", ""])
            continue
        lat = r.get("latency_us")
        cells.append([
            row["test"],
            fmt_int(r.get("rpcs", 0)),
            fmt_int(r.get("rps", 0)),
            fmt_us(lat["p99"]) if lat else "",
            fmt_int(r.get("send_bytes_per_s", 0)),
            fmt_int(r.get("recv_bytes_per_s", 0)),
            f"{r.get('avg_batch', 0):,.1f}",
        ])
    widths = [max(len(COLUMNS[i]), *(len(c[i]) for c in cells)) if cells else len(COLUMNS[i])
              for i in range(len(COLUMNS))]
    print("| " + " | ".join(COLUMNS[i].ljust(widths[i]) if i == 0 else COLUMNS[i].rjust(widths[i])
                            for i in range(len(COLUMNS))) + " |")
    print("| " + " | ".join("-" * widths[i] for i in range(len(COLUMNS))) + " |")
    for c in cells:
        print("| " + " | ".join(c[i].ljust(widths[i]) if i == 0 else c[i].rjust(widths[i])
                                for i in range(len(COLUMNS))) + " |")


def print_details(rows: list) -> None:
    print("\n### Table B details\n")
    print("```")
    print("Note: the average message size is that of a fully framed message,")
    print("including its header. \"Max Buffered\" are high-water marks: bytes staged")
    print("in one lane before a write, bytes of received calls queued in one lane,")
    print("and the receive buffer's capacity.")
    for row in rows:
        r = median_of(row) or (row["runs"][-1] if row["runs"] else None)
        if not r:
            continue
        text = (r.get("details") or "").rstrip()
        if text:
            print(text)
        if not r.get("verified"):
            print(f"\n#### {row['test']}: FAILED: {r.get('error')}")
        print()
    print("```")


def run(args, results: dict, outdir: str) -> list:
    """Runs Table B; returns a list of failures (test, "table_b", error)."""
    del outdir  # Table B writes no files of its own; results.json carries it.
    quick = bool(getattr(args, "quick", False))
    duration = QUICK_DURATION if quick else args.duration
    warmup = QUICK_WARMUP if quick else args.warmup
    scale = QUICK_SCALE if quick else 1.0
    repeat = 1 if quick else max(1, int(getattr(args, "repeat", 1) or 1))
    only = getattr(args, "only", "") or ""
    tests = [t for t in TABLE_B if re.search(only, t)] if only else list(TABLE_B)
    bench = os.path.join(args.build_dir, "bench")
    client = os.path.join(bench, "raw_client")
    settings = {"duration_s": duration, "warmup_s": warmup, "scale": scale, "repeat": repeat,
                "reported": "the verified run with the median RPC/s"}
    results["table_b"] = {"settings": settings, "rows": []}
    if not tests:
        return []
    connect = getattr(args, "connect", None)
    missing = [p for p in ([client] + ([] if connect else [os.path.join(bench, "bench_service")]))
               if not os.path.exists(p)]
    if missing:
        msg = f"missing programs (build first): {', '.join(missing)}"
        print(f"Table B: {msg}", file=sys.stderr)
        results["table_b"]["error"] = msg
        return [("table_b", "table_b", msg)]

    service = Service(os.path.join(bench, "bench_service"), connect)
    rows = []
    failures = []
    total = len(tests) * repeat
    done = 0
    try:
        service.start()
        for test in tests:
            runs = []
            for rep in range(repeat):
                if not service.alive():
                    service.stop()
                    service.start()
                r = run_client(client, service.address, test, duration, warmup, scale)
                done += 1
                ok = r.get("verified") is True
                print(f"[{done:3d}/{total}] B {test:<33} run {rep + 1}: {fmt_int(r.get('rps', 0)):>12} RPC/s"
                      f"{'' if ok else '  FAILED: ' + str(r.get('error'))}", file=sys.stderr, flush=True)
                runs.append(r)
            row = {"test": test, "runs": runs, "median_run": median_index(runs),
                   "verified": all(r.get("verified") for r in runs)}
            if not row["verified"]:
                errors = "; ".join(str(r.get("error")) for r in runs if not r.get("verified"))
                failures.append((test, "table_b", errors))
            rows.append(row)
    finally:
        service.stop()
    results["table_b"]["rows"] = rows
    print_table(rows, service.address, settings)
    print_details(rows)
    sys.stdout.flush()
    return failures
