"""Parsers for the outputs bench/run.sh collects (Debian's python3, standard library only).

Every parser takes the text a tool printed and returns a list of result rows, one per
message size, each a dict with "size" and normalised metrics:

    lat_typical_us  median (perftest t_typical, UCX 50th percentile, qperf's only number)
    lat_avg_us, lat_min_us, lat_max_us, lat_stdev_us, lat_p99_us, lat_p999_us
    bw_Bps          bandwidth in bytes per second
    msg_rate        messages per second

or raises ParseError with the tool's own error lines. Units: perftest and UCX print
MB/sec meaning 2^20 bytes (perftest: MB/sec = 0x100000; UCX divides by 1024*1024);
qperf -uu prints bytes/sec and ns.
"""

import json
import re

MIB = 1024.0 * 1024.0


class ParseError(Exception):
    pass


_ERROR_HINTS = re.compile(
    r"(couldn'?t|failed|unable|error|not supported|unsupported|no such|bad test|"
    r"refused|timed? ?out|cannot|can't|unknown|invalid|abort|segmentation)",
    re.IGNORECASE,
)


def has_error(text):
    return any(_ERROR_HINTS.search(l) for l in text.splitlines())


def error_summary(text, limit=3):
    """The lines of a tool's output that look like its error message (at most `limit`)."""
    lines = [l.strip() for l in text.splitlines() if _ERROR_HINTS.search(l)]
    if not lines:
        lines = [l.strip() for l in text.splitlines() if l.strip()][-limit:]
    seen = []
    for l in lines:
        if l not in seen:
            seen.append(l)
    return " | ".join(seen[:limit]) or "no output"


def _floats(line):
    out = []
    for tok in line.split():
        try:
            out.append(float(tok))
        except ValueError:
            return None
    return out


# ------------------------------------------------------------------ perftest 4.5

def parse_perftest(text):
    """perftest's result table: bw (BW peak/average [MB/sec or Gb/sec], MsgRate[Mpps]) or
    lat (t_min, t_max, t_typical, t_avg, t_stdev, 99%, 99.9% in usec; or -D's t_avg, tps).
    Latency is what perftest prints: half the round trip for send/write, the whole round
    trip for read and atomic."""
    rows = []
    header = None
    for line in text.splitlines():
        if "#bytes" in line:
            header = line
            continue
        if header is None:
            continue
        nums = _floats(line)
        if not nums or len(nums) < 3 or nums[0] != int(nums[0]):
            continue
        size, iters = int(nums[0]), int(nums[1])
        row = {"size": size, "iterations": iters}
        if "BW average" in header:
            gbit = "Gb/sec" in header
            if len(nums) < 5:
                continue
            peak, avg, mpps = nums[2], nums[3], nums[4]
            row["bw_Bps"] = avg * 125e6 if gbit else avg * MIB
            row["bw_peak_Bps"] = peak * 125e6 if gbit else peak * MIB
            row["msg_rate"] = mpps * 1e6
        elif "t_typical" in header:
            names = ["lat_min_us", "lat_max_us", "lat_typical_us", "lat_avg_us",
                     "lat_stdev_us", "lat_p99_us", "lat_p999_us"]
            for name, v in zip(names, nums[2:]):
                row[name] = v
            if "lat_typical_us" not in row:
                continue
        elif "t_avg" in header:  # duration mode: #bytes #iterations t_avg tps
            row["lat_avg_us"] = nums[2]
            row["lat_typical_us"] = nums[2]
        else:
            continue
        rows.append(row)
    if not rows:
        raise ParseError("no perftest result line: " + error_summary(text))
    return rows


# ------------------------------------------------------------------ ucx_perftest

_UCX_CSV_HEADER = "iterations,50.0_percentile_lat"


def parse_ucx(text, size):
    """ucx_perftest's final numbers, from -v (CSV) output or the table's "Final:" line.
    Columns: iterations, 50th percentile lat, average lat, overall lat (usec), average and
    overall bandwidth (MB/s = 2^20 B/s), average and overall message rate (msg/s).
    For tag_lat the latency is half the round trip. The size is not printed: pass it."""
    vals = None
    in_csv = False
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("iterations,") and "percentile" in s:
            in_csv = True
            continue
        if in_csv:
            parts = s.split(",")
            if len(parts) >= 8:
                try:
                    vals = [float(p) for p in parts[:8]]
                except ValueError:
                    pass
        if s.startswith("Final:"):
            nums = _floats(s[len("Final:"):])
            if nums and len(nums) >= 8:
                vals = nums[:8]
    if vals is None:
        raise ParseError("no ucx_perftest result: " + error_summary(text))
    iters, p50, avg_lat, overall_lat, _avg_bw, overall_bw, _avg_mr, overall_mr = vals
    return [{
        "size": int(size),
        "iterations": int(iters),
        "lat_typical_us": p50,
        "lat_avg_us": overall_lat,
        "bw_Bps": overall_bw * MIB,
        "msg_rate": overall_mr,
    }]


# ------------------------------------------------------------------ rdma-core pingpong

_PINGPONG = re.compile(r"^\s*(\d+) iters in ([0-9.]+) seconds = ([0-9.]+) usec/iter")


def parse_pingpong(text, size):
    """ibv_rc_pingpong / ibv_ud_pingpong (rdma-core's examples): "N iters in S seconds =
    U usec/iter". One iteration is a whole round trip (a message each way); the time is
    the average over the run, reported as lat_avg_us and lat_typical_us."""
    for line in text.splitlines():
        m = _PINGPONG.match(line)
        if m:
            per_iter = float(m.group(3))
            return [{"size": int(size), "iterations": int(m.group(1)),
                     "lat_typical_us": per_iter, "lat_avg_us": per_iter}]
    raise ParseError("no pingpong result: " + error_summary(text))


def parse_histogram(text):
    """perftest -H's "#, usec" lines ("i, latency"): the latencies in microseconds, in the
    order printed (sorted unless -U)."""
    out = []
    for line in text.splitlines():
        parts = line.split(",")
        if len(parts) == 2:
            try:
                int(parts[0])
                out.append(float(parts[1]))
            except ValueError:
                continue
    return out


# ------------------------------------------------------------------ qperf

_QPERF_TIME = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "sec": 1e6, "s": 1e6}
_QPERF_BW = {"bytes/sec": 1.0, "KB/sec": 1e3, "MB/sec": 1e6, "GB/sec": 1e9, "TB/sec": 1e12,
             "bits/sec": 0.125, "Kb/sec": 125.0, "Mb/sec": 125e3, "Gb/sec": 125e6}
_QPERF_RATE = {"/sec": 1.0, "K/sec": 1e3, "M/sec": 1e6, "G/sec": 1e9}


def _qperf_number(s):
    return float(s.replace(",", ""))


def parse_qperf(text, size):
    """qperf's "name: / key = value unit" blocks. tcp_lat: latency (one way); tcp_bw: bw,
    msg_rate (computed from bw and the message size when qperf does not print it)."""
    row = {"size": int(size)}
    for line in text.splitlines():
        m = re.match(r"^\s*(latency|bw|msg_rate)\s*=\s*([0-9.,]+)\s*(\S+)", line)
        if not m:
            continue
        key, num, unit = m.group(1), _qperf_number(m.group(2)), m.group(3)
        if key == "latency" and unit in _QPERF_TIME:
            row["lat_typical_us"] = num * _QPERF_TIME[unit]
            row["lat_avg_us"] = row["lat_typical_us"]
        elif key == "bw" and unit in _QPERF_BW:
            row["bw_Bps"] = num * _QPERF_BW[unit]
        elif key == "msg_rate" and unit in _QPERF_RATE:
            row["msg_rate"] = num * _QPERF_RATE[unit]
    if len(row) == 1:
        raise ParseError("no qperf result: " + error_summary(text))
    if "bw_Bps" in row and "msg_rate" not in row and size:
        row["msg_rate"] = row["bw_Bps"] / float(size)
    return [row]


# ------------------------------------------------------------------ limits, idle

def parse_limits(text):
    """softrdma_bench_limits' JSON lines: {"test","size","unit","values":[...]} or
    {"test","size","error"}. Returns (results, errors, info): results maps
    (test, size) -> (unit, values); errors is a list of (test, size, message)."""
    results, errors, info = {}, [], {}
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("test") == "info":
            info = rec
        elif "error" in rec:
            errors.append((rec.get("test", "?"), int(rec.get("size", 0)), rec["error"]))
        elif "values" in rec:
            results[(rec["test"], int(rec["size"]))] = (rec.get("unit", ""), rec["values"])
    return results, errors, info


def parse_idle(text):
    """run.sh's idle measurement: idle_cpu_ticks, clk_tck, window_s -> cpu_pct (% of a core)."""
    kv = {}
    for line in text.splitlines():
        m = re.match(r"^\s*([a-z_]+):\s*([0-9.]+)\s*$", line)
        if m:
            kv[m.group(1)] = float(m.group(2))
    if not {"idle_cpu_ticks", "clk_tck", "window_s"} <= kv.keys():
        raise ParseError("no idle measurement: " + error_summary(text))
    pct = 100.0 * kv["idle_cpu_ticks"] / kv["clk_tck"] / kv["window_s"]
    return [{"size": 0, "cpu_pct": pct}]


# ------------------------------------------------------------------ scale, callgrind

def parse_scale(text):
    """softrdma_bench_scale's JSON lines: {"test":"scale","config","qps","figure","unit",
    "value"} or {"test":"scale","config","qps","error"}, one run after another. Returns
    (results, errors, qps): results maps (config, figure) -> (unit, [values, one per run]);
    errors is a list of (config, message); qps maps config -> the number of QPs."""
    results, errors, qps = {}, [], {}
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("test") != "scale":
            continue
        config = str(rec.get("config", "?"))
        if "qps" in rec:
            qps[config] = int(rec["qps"])
        if "error" in rec:
            errors.append((config, str(rec["error"])))
        elif "figure" in rec and "value" in rec:
            entry = results.setdefault((config, rec["figure"]), (rec.get("unit", ""), []))
            entry[1].append(float(rec["value"]))
    return results, errors, qps


_VALGRIND_COLLECTED = re.compile(r"^==\d+==\s+Collected\s*:\s*([0-9]+)\s*$")
_VALGRIND_IREFS = re.compile(r"^==\d+==\s+I\s+refs:\s*([0-9,]+)\s*$")


def parse_callgrind(text, size):
    """A perftest client run under valgrind --tool=callgrind: the instructions it executed
    (valgrind's "Collected :" or "I refs:" summary, all threads) -> ir; iterations from
    perftest's own result line when it printed one."""
    ir = None
    for line in text.splitlines():
        m = _VALGRIND_COLLECTED.match(line.strip()) or _VALGRIND_IREFS.match(line.strip())
        if m:
            ir = int(m.group(1).replace(",", ""))
    if ir is None:
        raise ParseError("no callgrind summary: " + error_summary(text))
    row = {"size": int(size), "ir": ir}
    try:
        perf = parse_perftest(text)
        row["iterations"] = perf[0]["iterations"]
    except ParseError:
        pass
    return [row]


_CG_NAME = re.compile(r"^\((\d+)\)(?:\s+(.*))?$")


def parse_callgrind_profile(text, prefix="softrdma::verbs::"):
    """A callgrind.out file (Ir only, default name compression): the program total, and for
    every function whose name starts with `prefix` the calls made to it from functions
    outside softrdma and their inclusive Ir. Returns {"total": Ir or None,
    "calls": {short name: calls}, "inclusive": {short name: Ir}}; the short name is the
    function's name without prefix and arguments (PollCq, PostSend, ...)."""
    names = {}
    total = None
    calls, incl = {}, {}
    current = ""   # the function whose costs and calls follow (fn=)
    pending = None  # (callee name, calls) waiting for the cost line of a calls= line

    def name_of(spec):
        m = _CG_NAME.match(spec.strip())
        if not m:
            return spec.strip()
        if m.group(2):
            names[m.group(1)] = m.group(2)
        return names.get(m.group(1), "")

    for line in text.splitlines():
        if pending is not None:
            callee, n = pending
            pending = None
            parts = line.split()
            if len(parts) >= 2:
                try:
                    cost = int(parts[1])
                except ValueError:
                    cost = 0
                short = callee[len(prefix):].split("(", 1)[0]
                calls[short] = calls.get(short, 0) + n
                incl[short] = incl.get(short, 0) + cost
            continue
        if line.startswith("fn="):
            current = name_of(line[3:])
        elif line.startswith("cfn="):
            callee = name_of(line[4:])
        elif line.startswith("calls="):
            try:
                n = int(line[6:].split()[0])
            except (ValueError, IndexError):
                continue
            if callee.startswith(prefix) and not current.startswith("softrdma::"):
                pending = (callee, n)
        elif line.startswith("totals:") or (line.startswith("summary:") and total is None):
            try:
                total = int(line.split(":", 1)[1].split()[0])
            except (ValueError, IndexError):
                pass
    return {"total": total, "calls": calls, "inclusive": incl}


def parse_state_rtt(field):
    """run.sh's rtt_before_ns / rtt_after_ns column of runs.tsv: the cross-core cache-line
    round trip in ns measured just before / after a latency measurement. None when the
    column is missing (results written before it existed), empty, or not a positive number."""
    try:
        v = float((field or "").strip())
    except ValueError:
        return None
    return v if v > 0 and v == v and v != float("inf") else None


def parse(suite, text, size):
    """Dispatch on run.sh's suite name."""
    if suite in ("perftest", "qps", "pairs"):
        return parse_perftest(text)
    if suite == "callgrind":
        return parse_callgrind(text, size)
    if suite in ("ucx", "ucx_verbs", "ucx_posix"):
        return parse_ucx(text, size)
    if suite == "tcp":
        return parse_qperf(text, size)
    if suite == "idle":
        return parse_idle(text)
    if suite == "apps":  # rdma-core's pingpongs, or perftest (ib_send_lat -e)
        return parse_pingpong(text, size) if "iters in" in text else parse_perftest(text)
    if suite == "cdf":  # ucx_perftest -R (one percentile), or perftest -H's summary
        return parse_ucx(text, size) if "percentile_lat" in text else parse_perftest(text)
    raise ParseError("unknown suite " + suite)
