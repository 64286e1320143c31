"""Table B of the benchmark suite: raw Myelin, one client and one service.

Runs the 17 raw tests (bench/raw_client against bench/bench_service), each
for a duration after a warm-up, `repeat` times; reports the run with the
median RPC/s. Prints the summary table as Markdown and each test's details
block, and stores every run in results["table_b"]. Called by driver.py.

In the same pass it measures the raw TCP ceiling (bench/raw_ceiling: 8-byte
records in 64 KiB blocking writes to a separate receiver process), its runs
alternating with those of the one-way tiny-call tests, and states their RPC/s
as a fraction of it against the 1/20 target (results["table_b"]["ceiling"]).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import Optional

from service import ServiceProcess

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

# The one-way tiny calls held against the raw TCP ceiling, and the target: at
# least 1/20 of the rate at which raw TCP moves 8-byte records in 64 KiB writes.
CEILING = "RawTcpCeiling"
ONE_WAY_TINY = ["OneParamToSrvAsyncVoid", "MultiEndpointToSrvAsyncVoid"]
CEILING_RECORD_BYTES, CEILING_WRITE_BYTES = 8, 65536
TARGET_DENOMINATOR = 20

# --quick: every test for a fraction of a second with endpoint and thread
# counts scaled down (at least 1 each).
QUICK_DURATION, QUICK_WARMUP, QUICK_SCALE = 0.2, 0.05, 0.2

COLUMNS = ["Name", "Total RPCs", "RPC/s", "Lat p99", "Send Bytes/s", "Recv Bytes/s", "Avg Batch"]




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


def run_ceiling(path: str, connect: Optional[str], duration: float, warmup: float) -> dict:
    """One run of raw_ceiling: its own forked receiver, or a `raw_ceiling --serve` at `connect`."""
    cmd = [path, "--duration", str(duration), "--warmup", str(warmup), "--record", str(CEILING_RECORD_BYTES),
           "--write", str(CEILING_WRITE_BYTES)]
    if connect:
        cmd += ["--connect", connect]
    timeout = duration + warmup + 60
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"impl": "raw_tcp", "test": CEILING, "records_per_s": 0, "verified": False,
                "error": f"timed out after {timeout:.0f} s"}
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"impl": "raw_tcp", "test": CEILING, "records_per_s": 0, "verified": False,
                "error": f"no result (exit {out.returncode}): {out.stderr.strip()[-300:]}"}
    r = json.loads(lines[-1])
    if out.returncode != 0 and r.get("verified"):
        r["verified"] = False
        r["error"] = f"exit status {out.returncode}"
    return r


def median_index(runs: list, key: str = "rps") -> Optional[int]:
    """Index of the verified run with the median `key` (the lower middle one of an even count)."""
    ok = sorted((i for i, r in enumerate(runs) if r.get("verified")), key=lambda i: runs[i].get(key, 0))
    return ok[(len(ok) - 1) // 2] if ok else None


def median_of(row: dict) -> Optional[dict]:
    i = row.get("median_run")
    return row["runs"][i] if i is not None else None


def print_table(rows: list, address: str, settings: dict) -> None:
    print("\n## Table B — raw Myelin (one client process, one service process)\n")
    tls = "Yes" if os.environ.get("MYELIN_BENCH_TLS_CA") else "No"
    print(f"Service: {address}, TLS: {tls}; {settings['duration_s']} s per run after {settings['warmup_s']} s "
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


def compare_with_ceiling(rows: list, ceiling: dict) -> dict:
    """The one-way tiny-call tests' median RPC/s as a fraction of the ceiling's median records/s."""
    c = ceiling.get("records_per_s")
    out = {"target": f"1/{TARGET_DENOMINATOR}", "target_fraction": 1 / TARGET_DENOMINATOR,
           "ceiling_records_per_s": c, "target_rps": c / TARGET_DENOMINATOR if c else None, "rows": []}
    for row in rows:
        if row["test"] not in ONE_WAY_TINY:
            continue
        r = median_of(row)
        rps = r.get("rps", 0) if r else 0
        entry = {"test": row["test"], "rps": rps if r else None, "verified": r is not None,
                 "fraction": None, "ceiling_over_rps": None, "meets_target": None}
        if c and rps:
            entry["fraction"] = rps / c
            entry["ceiling_over_rps"] = c / rps
            entry["meets_target"] = rps * TARGET_DENOMINATOR >= c
        out["rows"].append(entry)
    return out


def print_ceiling(ceiling: dict, comparison: dict) -> None:
    print("\n### One-way tiny calls against the raw TCP ceiling\n")
    print("```")
    st = ceiling["settings"]
    where = f"`raw_ceiling --serve` at {st['connect']}" if st.get("connect") else "a forked receiver process on 127.0.0.1"
    c = ceiling.get("records_per_s")
    if c:
        ok = [r["records_per_s"] for r in ceiling["runs"] if r.get("verified")]
        print(f"Raw TCP ceiling: {fmt_int(c)} records/s of {st['record_bytes']} bytes "
              f"({fmt_int(ceiling['bytes_per_s'])} bytes/s), median of {len(ok)} run(s) "
              f"({fmt_int(min(ok))}–{fmt_int(max(ok))})")
    else:
        print(f"Raw TCP ceiling: FAILED: {ceiling.get('error') or 'no verified run'}")
    print(f"  {st['write_bytes'] // 1024} KiB blocking send()s, TCP_NODELAY off, {where} checking every record;")
    beside = ("runs alternating with those of the tests below" if st.get("alternating_with")
              else "no one-way tiny-call test selected")
    print(f"  {st['duration_s']} s per run after {st['warmup_s']} s warm-up, {beside}.")
    if st.get("note"):
        print(f"  Note: {st['note']}")
    if c:
        print(f"Target: at least 1/{TARGET_DENOMINATOR} of the ceiling = {fmt_int(comparison['target_rps'])} RPC/s")
    if comparison["rows"]:
        print()
    width = max(len(t) for t in ONE_WAY_TINY)
    for e in comparison["rows"]:
        if not e["verified"]:
            print(f"{e['test']:<{width}}  FAILED")
        elif e["ceiling_over_rps"] is None:
            print(f"{e['test']:<{width}}  {fmt_int(e['rps']):>12} RPC/s   no ceiling to compare with")
        else:
            verdict = "at or above the target" if e["meets_target"] else "BELOW the target"
            print(f"{e['test']:<{width}}  {fmt_int(e['rps']):>12} RPC/s   1/{e['ceiling_over_rps']:.1f} of the ceiling"
                  f"   {verdict} (1/{TARGET_DENOMINATOR})")
    print("```")


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
    """Runs Table B and the raw TCP ceiling; returns a list of failures (test, "table_b", error)."""
    del outdir  # Table B writes no files of its own; results.json carries it.
    quick = bool(getattr(args, "quick", False))
    duration = QUICK_DURATION if quick else args.duration
    warmup = QUICK_WARMUP if quick else args.warmup
    scale = QUICK_SCALE if quick else 1.0
    repeat = 1 if quick else max(1, int(getattr(args, "repeat", 1) or 1))
    only = getattr(args, "only", "") or ""
    tests = [t for t in TABLE_B if re.search(only, t)] if only else list(TABLE_B)
    paired = [t for t in ONE_WAY_TINY if t in tests]
    with_ceiling = bool(paired) or bool(only and re.search(only, CEILING))
    bench = os.path.join(args.build_dir, "bench")
    client = os.path.join(bench, "raw_client")
    settings = {"duration_s": duration, "warmup_s": warmup, "scale": scale, "repeat": repeat,
                "reported": "the verified run with the median RPC/s"}
    results["table_b"] = {"settings": settings, "rows": []}
    if not tests and not with_ceiling:
        return []
    connect = getattr(args, "connect", None)
    failures = []
    if tests:
        missing = [p for p in ([client] + ([] if connect else [os.path.join(bench, "bench_service")]))
                   if not os.path.exists(p)]
        if missing:
            msg = f"missing programs (build first): {', '.join(missing)}"
            print(f"Table B: {msg}", file=sys.stderr)
            results["table_b"]["error"] = msg
            failures.append(("table_b", "table_b", msg))
            tests, paired = [], []

    ceiling = None
    ceiling_path = os.path.join(bench, "raw_ceiling")
    connect_ceiling = getattr(args, "connect_ceiling", None)
    if with_ceiling:
        note = ("the Myelin service is remote (--connect) but the ceiling runs on loopback: pass --connect-ceiling"
                if connect and not connect_ceiling else "")
        ceiling = {"test": CEILING, "runs": [], "median_run": None, "records_per_s": None, "bytes_per_s": None,
                   "verified": False,
                   "settings": {"record_bytes": CEILING_RECORD_BYTES, "write_bytes": CEILING_WRITE_BYTES,
                                "nodelay": False, "duration_s": duration, "warmup_s": warmup, "repeat": repeat,
                                "connect": connect_ceiling, "alternating_with": paired, "note": note,
                                "reported": "the median records/s of the verified runs"}}
        results["table_b"]["ceiling"] = ceiling
        if not os.path.exists(ceiling_path):
            msg = f"missing program (build first): {ceiling_path}"
            print(f"Table B: {msg}", file=sys.stderr)
            ceiling["error"] = msg
            failures.append((CEILING, "table_b", msg))
            with_ceiling = False

    service = ServiceProcess(os.path.join(bench, "bench_service"), connect)
    runs = {t: [] for t in tests}
    total = len(tests) * repeat + (repeat if with_ceiling else 0)
    done = 0

    def once(test: str, rep: int) -> None:
        nonlocal done
        if test == CEILING:
            r = run_ceiling(ceiling_path, connect_ceiling, duration, warmup)
            ceiling["runs"].append(r)
            rate, unit = r.get("records_per_s", 0), "rec/s"
        else:
            if not service.alive():
                service.stop()
                service.start()
            r = run_client(client, service.address, test, duration, warmup, scale)
            runs[test].append(r)
            rate, unit = r.get("rps", 0), "RPC/s"
        done += 1
        ok = r.get("verified") is True
        print(f"[{done:3d}/{total}] B {test:<33} run {rep + 1}: {fmt_int(rate):>12} {unit}"
              f"{'' if ok else '  FAILED: ' + str(r.get('error'))}", file=sys.stderr, flush=True)

    try:
        if tests:
            service.start()
        # The ceiling and the one-way tiny-call tests first, alternating run by
        # run, so that the fraction compares runs made side by side.
        if with_ceiling:
            for rep in range(repeat):
                for test in [CEILING] + paired:
                    once(test, rep)
        for test in tests:
            if test in paired and with_ceiling:
                continue
            for rep in range(repeat):
                once(test, rep)
    finally:
        service.stop()

    rows = []
    for test in tests:
        row = {"test": test, "runs": runs[test], "median_run": median_index(runs[test]),
               "verified": all(r.get("verified") for r in runs[test])}
        if not row["verified"]:
            errors = "; ".join(str(r.get("error")) for r in runs[test] if not r.get("verified"))
            failures.append((test, "table_b", errors))
        rows.append(row)
    results["table_b"]["rows"] = rows
    if tests:
        print_table(rows, service.address, settings)
    if ceiling is not None:
        i = median_index(ceiling["runs"], "records_per_s")
        ceiling["median_run"] = i
        ceiling["verified"] = bool(ceiling["runs"]) and all(r.get("verified") for r in ceiling["runs"])
        if i is not None:
            ceiling["records_per_s"] = ceiling["runs"][i]["records_per_s"]
            ceiling["bytes_per_s"] = ceiling["runs"][i]["bytes_per_s"]
        if ceiling["runs"] and not ceiling["verified"]:
            errors = "; ".join(str(r.get("error")) for r in ceiling["runs"] if not r.get("verified"))
            failures.append((CEILING, "table_b", errors))
        comparison = compare_with_ceiling(rows, ceiling)
        results["table_b"]["one_way_vs_ceiling"] = comparison
        print_ceiling(ceiling, comparison)
    if tests:
        print_details(rows)
    sys.stdout.flush()
    return failures
