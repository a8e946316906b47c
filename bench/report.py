#!/usr/bin/python3
"""Write report.md, results.json and the PNG plots for one bench/run.sh results directory.

    /usr/bin/python3 bench/report.py DIR

Reads DIR/runs.tsv (one row per measurement, raw outputs in DIR/raw), DIR/limits.jsonl,
DIR/scale.jsonl and DIR/meta.txt. Medians and min-max over the repetitions; ratios from
medians measured in the same run. Uses Debian's python3-matplotlib for the plots (skipped
with a note if missing).
"""

import csv
import gzip
import json
import os
import re
import statistics
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parsers  # noqa: E402
import report_ucx_verbs  # noqa: E402

MiB = 1 << 20

# (name, softrdma key, reference key, metric, goal, "<=" or ">=")
# keys: (suite, test, size); pinned variants are derived.
TARGETS = [
    ("ib_send_lat 8 B vs UCX tag_lat 8 B", ("perftest", "ib_send_lat", 8),
     ("ucx", "tag_lat", 8), "lat_typical_us", 1.5, "<="),
    ("ib_write_lat 8 B vs UCX tag_lat 8 B", ("perftest", "ib_write_lat", 8),
     ("ucx", "tag_lat", 8), "lat_typical_us", 1.5, "<="),
    ("ib_write_bw 1 MiB vs memcpy 1 MiB (out of cache)", ("perftest", "ib_write_bw", MiB),
     ("limits", "memcpy_cold", MiB), "bw_Bps", 0.8, ">="),
    ("ib_read_bw 1 MiB vs memcpy 1 MiB (out of cache)", ("perftest", "ib_read_bw", MiB),
     ("limits", "memcpy_cold", MiB), "bw_Bps", 0.8, ">="),
    ("ib_write_bw 1 MiB vs UCX tag_bw 1 MiB", ("perftest", "ib_write_bw", MiB),
     ("ucx", "tag_bw", MiB), "bw_Bps", 1.0, ">="),
    ("ib_read_bw 1 MiB vs UCX tag_bw 1 MiB", ("perftest", "ib_read_bw", MiB),
     ("ucx", "tag_bw", MiB), "bw_Bps", 1.0, ">="),
    ("ib_send_bw 64 KiB vs UCX tag_bw 64 KiB", ("perftest", "ib_send_bw", 65536),
     ("ucx", "tag_bw", 65536), "bw_Bps", 0.8, ">="),
    ("ib_write_bw 8 B msg/s vs UCX tag_bw 8 B msg/s", ("perftest", "ib_write_bw", 8),
     ("ucx", "tag_bw", 8), "msg_rate", 1.0, ">="),
]
# What applications see (issue 15): message rate of small SENDs, average and tail latency,
# the one-CQ ping-pong of rdma-core's examples, blocking waits. Entries may name the
# reference's metric and a factor it is multiplied by:
# (name, softrdma key, reference key, metric, goal, op, reference metric, factor).
APP_TARGETS = [
    ("ib_send_bw 8 B msg/s vs UCX tag_bw 8 B msg/s", ("perftest", "ib_send_bw", 8),
     ("ucx", "tag_bw", 8), "msg_rate", 1.0, ">="),
    ("ib_send_bw 64 B msg/s vs UCX tag_bw 64 B msg/s", ("perftest", "ib_send_bw", 64),
     ("ucx", "tag_bw", 64), "msg_rate", 1.0, ">="),
    ("ib_send_lat 64 B average vs UCX tag_lat 64 B average", ("perftest", "ib_send_lat", 64),
     ("ucx", "tag_lat", 64), "lat_avg_us", 1.0, "<="),
    ("ib_send_lat 64 B 99th percentile vs its own median", ("perftest", "ib_send_lat", 64),
     ("perftest", "ib_send_lat", 64), "lat_p99_us", 3.0, "<=", "lat_typical_us", 1.0),
    ("ibv_rc_pingpong 1 KiB per iteration vs 2 × UCX tag_lat 1 KiB average",
     ("apps", "ibv_rc_pingpong", 1024), ("ucx", "tag_lat", 1024), "lat_avg_us", 1.5, "<=",
     "lat_avg_us", 2.0),
    ("ibv_ud_pingpong 1 KiB per iteration vs 2 × UCX tag_lat 1 KiB average",
     ("apps", "ibv_ud_pingpong", 1024), ("ucx", "tag_lat", 1024), "lat_avg_us", 1.5, "<=",
     "lat_avg_us", 2.0),
    ("ib_send_lat -e 8 B average vs qperf tcp_lat 8 B", ("apps", "ib_send_lat_events", 8),
     ("tcp", "tcp_lat", 8), "lat_avg_us", 1.0, "<="),
]
IDLE_CPU_GOAL_PCT = 1.0
# Machine state: run.sh measures the cross-core cache-line round trip just before and after
# every latency measurement (runs.tsv rtt_before_ns / rtt_after_ns). Medians of two sides
# (or before and after of one measurement) more than this far apart: different states.
STATE_RATIO = 1.5

LAT_SERIES = [  # (label, suite, test)
    ("softrdma ib_send_lat", "perftest", "ib_send_lat"),
    ("softrdma ib_write_lat", "perftest", "ib_write_lat"),
    ("softrdma ib_read_lat (round trip)", "perftest", "ib_read_lat"),
    ("UCX tag_lat (posix,cma)", "ucx", "tag_lat"),
    ("TCP loopback tcp_lat", "tcp", "tcp_lat"),
]
BW_SERIES = [
    ("softrdma ib_send_bw", "perftest", "ib_send_bw"),
    ("softrdma ib_write_bw", "perftest", "ib_write_bw"),
    ("softrdma ib_read_bw", "perftest", "ib_read_bw"),
    ("UCX tag_bw (posix,cma)", "ucx", "tag_bw"),
    ("TCP loopback tcp_bw", "tcp", "tcp_bw"),
    ("memcpy, out of cache", "limits", "memcpy_cold"),
    ("memcpy, in cache", "limits", "memcpy_hot"),
    ("process_vm_writev", "limits", "process_vm_writev"),
]


def human_size(n):
    n = int(n)
    for unit, f in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= f and n % f == 0:
            return "%d %s" % (n // f, unit)
    return "%d B" % n


def shorten(text, n):
    return text if len(text) <= n else text[:n - 1] + "…"


def fmt(v, digits=3):
    if v is None:
        return "–"
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1000:
        return "%.0f" % v
    return ("%%.%dg" % digits) % v


class Stats:
    def __init__(self, values):
        self.values = sorted(values)
        self.median = statistics.median(self.values)
        self.min = self.values[0]
        self.max = self.values[-1]
        self.n = len(self.values)

    def cell(self, scale=1.0):
        if self.n == 1:
            return fmt(self.median * scale)
        return "%s [%s–%s]" % (fmt(self.median * scale), fmt(self.min * scale),
                               fmt(self.max * scale))

    def as_dict(self):
        return {"median": self.median, "min": self.min, "max": self.max, "n": self.n,
                "values": self.values}


class Results:
    """All measurements: (suite, test, size, pinned) -> {metric: [values]} and errors."""

    def __init__(self, out):
        self.out = out
        self.data = {}
        self.errors = []  # (suite, test, size, pinned, rep, message)
        self.meta = {}
        self.limits_info = {}
        self.by_rep = {}  # (suite, test, size, pinned) -> {rep: first parsed row}
        self.scale = {}  # (config, figure) -> (unit, [values])
        self.scale_qps = {}  # config -> QPs
        # Measurements whose before/after round trips differ by more than STATE_RATIO:
        # (suite, test, size, pinned, rep, before_ns, after_ns)
        self.state_changes = []
        self._load()

    def add(self, key, metrics):
        d = self.data.setdefault(key, {})
        for m, v in metrics.items():
            if m in ("size", "iterations") or v is None:
                continue
            d.setdefault(m, []).append(v)

    def _load(self):
        meta = os.path.join(self.out, "meta.txt")
        if os.path.exists(meta):
            with open(meta) as f:
                for line in f:
                    k, _, v = line.partition(":")
                    self.meta[k.strip()] = v.strip()
        runs = os.path.join(self.out, "runs.tsv")
        if os.path.exists(runs):
            with open(runs, newline="") as f:
                for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
                    self._load_run(row)
        lim = os.path.join(self.out, "limits.jsonl")
        if os.path.exists(lim):
            with open(lim) as f:
                results, errors, info = parsers.parse_limits(f.read())
            self.limits_info = info
            for (test, size), (_unit, values) in results.items():
                metric = "rtt_ns" if test == "cacheline_rtt" else "bw_Bps"
                for v in values:
                    self.add(("limits", test, size, False), {metric: v})
            for test, size, msg in errors:
                self.errors.append(("limits", test, size, False, "", msg))
        scale = os.path.join(self.out, "scale.jsonl")
        if os.path.exists(scale):
            with open(scale) as f:
                self.scale, errors, self.scale_qps = parsers.parse_scale(f.read())
            for config, msg in errors:
                self.errors.append(("scale", config, 0, False, "", msg))

    def _load_run(self, row):
        suite, test = row["suite"], row["test"]
        size, pinned, rep = int(row["size"]), row["pinned"] == "1", row["rep"]
        text = ""
        path = os.path.join(self.out, row["client"]) if row["client"] else ""
        if path and os.path.exists(path):
            with open(path, errors="replace") as f:
                text = f.read()
        rc = int(row["rc"])
        key = (suite, test, size, pinned)
        # The machine state around the measurement (columns absent in older runs.tsv).
        state = [parsers.parse_state_rtt(row.get(c)) for c in ("rtt_before_ns", "rtt_after_ns")]
        if rc != 0:
            timed_out = rc in (124, 137)
            parts = []
            if parsers.has_error(text) or (text and not timed_out):
                parts.append(parsers.error_summary(text))
            elif not text:
                parts.append("no output")
            spath = os.path.join(self.out, row["server"]) if row.get("server") else ""
            if rc > 0 and spath and os.path.exists(spath):
                with open(spath, errors="replace") as f:
                    stext = f.read()
                if parsers.has_error(stext):
                    parts.append("server: " + parsers.error_summary(stext, limit=2))
            if timed_out:
                parts.insert(0, "timed out")
            elif rc not in (-1, -2):
                parts.insert(0, "exit code %d" % rc)
            msg = " | ".join(parts)
            self.errors.append((suite, test, size, pinned, rep, msg))
            return
        try:
            rows = parsers.parse(suite, text, size)
        except parsers.ParseError as e:
            self.errors.append((suite, test, size, pinned, rep, str(e)))
            return
        added = False
        for r in rows:
            if r.get("size", size) == size or suite == "idle":
                self.add(key, r)
                self.by_rep.setdefault(key, {}).setdefault(rep, dict(r))
                added = True
        if added:
            for v in state:
                self.add(key, {"machine_rtt_ns": v})
            if None not in state and max(state) > STATE_RATIO * min(state):
                self.state_changes.append(key + (rep, state[0], state[1]))
        if suite == "callgrind" and key in self.by_rep and path.endswith(".client.txt"):
            # The profile run.sh kept next to the client's output: calls into the verbs.
            prof = path[:-len(".client.txt")] + ".callgrind.out.gz"
            if os.path.exists(prof):
                try:
                    with gzip.open(prof, "rt", errors="replace") as f:
                        self.by_rep[key][rep]["profile"] = parsers.parse_callgrind_profile(f.read())
                except (OSError, EOFError) as e:
                    self.errors.append((suite, test, size, pinned, rep, "profile: %s" % e))

    def stats(self, suite, test, size, metric, pinned=False):
        vals = self.data.get((suite, test, size, pinned), {}).get(metric)
        return Stats(vals) if vals else None

    def error_for(self, suite, test, size, pinned=False):
        for e in self.errors:
            if e[:4] == (suite, test, size, pinned):
                return e[5]
        return None

    def sizes(self, suite, test, pinned=False):
        return sorted({k[2] for k in self.data if k[:2] == (suite, test) and k[3] == pinned})


def machine_states(soft, ref):
    """(softrdma's cache-line RTT Stats|None, the reference's, states differ: True, False,
    or None when a side has no round trip recorded)."""
    differ = None
    if soft and ref and min(soft.median, ref.median) > 0:
        differ = max(soft.median, ref.median) > STATE_RATIO * min(soft.median, ref.median)
    return soft, ref, differ


def evaluate_targets(res, targets=None):
    """Rows: (name, pinned, metric, soft Stats|None, ref Stats|None, ratio|None, goal text,
    verdict, note, state), state None for targets that are not latencies, else
    machine_states() of the two sides. `targets`: TARGETS (and the idle row) by default."""
    rows = []
    main_list = targets is None
    for pinned in (False, True):
        for entry in (TARGETS if main_list else targets):
            name, soft_key, ref_key, metric, goal, op = entry[:6]
            ref_metric = entry[6] if len(entry) > 6 else metric
            factor = entry[7] if len(entry) > 7 else 1.0
            soft_pinned = pinned
            ref_pinned = pinned and ref_key[0] != "limits"
            soft = res.stats(*soft_key, metric, pinned=soft_pinned)
            ref = res.stats(*ref_key, ref_metric, pinned=ref_pinned)
            ratio = None
            note = ""
            if soft and ref and ref.median > 0:
                ratio = soft.median / (ref.median * factor)
                ok = ratio <= goal if op == "<=" else ratio >= goal
                verdict = "PASS" if ok else "FAIL"
            else:
                verdict = "FAIL"
                missing = soft_key if not soft else ref_key
                err = res.error_for(*missing, pinned=(soft_pinned if not soft else ref_pinned))
                note = "no data for %s %s %s%s" % (missing[0], missing[1], human_size(missing[2]),
                                                    ": " + err if err else "")
            state = None
            if metric.startswith("lat_"):
                state = machine_states(
                    res.stats(*soft_key, "machine_rtt_ns", pinned=soft_pinned),
                    res.stats(*ref_key, "machine_rtt_ns", pinned=ref_pinned))
            rows.append((name, pinned, metric, soft, ref, ratio, "%s %g×" % (op, goal), verdict,
                         note, state))
    if not main_list:
        return rows
    idle = res.stats("idle", "idle_cpu", 0, "cpu_pct")
    if idle:
        verdict = "PASS" if idle.median <= IDLE_CPU_GOAL_PCT else "FAIL"
        note = ""
    else:
        verdict = "FAIL"
        err = res.error_for("idle", "idle_cpu", 0)
        note = "no data" + (": " + err if err else "")
    rows.append(("idle CPU, process holding a QP, no traffic (% of a core)", False, "cpu_pct",
                 idle, None, None, "<= %g %%" % IDLE_CPU_GOAL_PCT, verdict, note, None))
    return rows


def metric_cell(stats, metric):
    if stats is None:
        return "–"
    if metric == "bw_Bps":
        return stats.cell(1e-9) + " GB/s"
    if metric == "msg_rate":
        return stats.cell(1e-6) + " M/s"
    if metric.startswith("lat_"):
        return stats.cell() + " µs"
    if metric == "cpu_pct":
        return stats.cell() + " %"
    return stats.cell()


def state_cell(state):
    """The targets table's machine-state cell: cache-line RTT of softrdma / of the reference."""
    if state is None:
        return ""
    soft, ref, differ = state
    if soft is None and ref is None:
        return "–"
    cell = "%s / %s" % (fmt(soft.median) if soft else "–", fmt(ref.median) if ref else "–")
    return cell + (" **states differ**" if differ else "")


def state_section(res, targets):
    """Lines on the machine state around the latency measurements (empty without probes)."""
    probes = [v for k, m in res.data.items() if k[0] != "limits"
              for v in m.get("machine_rtt_ns", [])]
    if not probes:
        return []
    st = Stats(probes)
    md = ["Machine state: the cross-core cache-line round trip measured just before and after "
          "each latency measurement (%d probes in this run: %s ns); the **cache-line RTT** "
          "column gives the median over the probes of softrdma's measurements / of the "
          "reference's. **states differ**: the two medians are more than %g× apart, so the "
          "ratio compares the machine in two states (`docs/performance.md`, \"Machine state\")."
          % (st.n, st.cell(), STATE_RATIO)]
    differ = sum(1 for t in targets if t[9] and t[9][2])
    if differ:
        md[-1] += " %d latency target row%s affected." % (differ, "s are" if differ > 1 else " is")
    if res.state_changes:
        md[-1] += (" %d measurement%s saw the state change during the run (before / after): %s."
                   % (len(res.state_changes), "s" if len(res.state_changes) > 1 else "",
                      ", ".join("%s %s %s%s r%s %s / %s ns" % (
                          su, t, human_size(sz), " pinned" if p else "", rep, fmt(b), fmt(a))
                          for su, t, sz, p, rep, b, a in res.state_changes[:10])
                      + (", …" if len(res.state_changes) > 10 else "")))
    md.append("")
    return md


def series_table(res, series, metric, scale, pinned=False, note_fn=None):
    cols = [s for s in series if res.sizes(s[1], s[2], pinned)
            or any(e[:2] == (s[1], s[2]) and e[3] == pinned for e in res.errors)]
    if not cols:
        return ["(no measurements)", ""]
    sizes = sorted({sz for _l, su, t in cols for sz in res.sizes(su, t, pinned)}
                   | {e[2] for e in res.errors for _l, su, t in cols
                      if e[:2] == (su, t) and e[3] == pinned})
    lines = ["| size | " + " | ".join(l for l, _s, _t in cols) + " |",
             "|---:|" + "---:|" * len(cols)]
    for sz in sizes:
        cells = []
        for _l, su, t in cols:
            st = res.stats(su, t, sz, metric, pinned)
            if st:
                cells.append(st.cell(scale))
            elif res.error_for(su, t, sz, pinned):
                cells.append("error")
            else:
                cells.append("")
        lines.append("| %s | %s |" % (human_size(sz), " | ".join(cells)))
    lines.append("")
    return lines


# ------------------------------------------------------------------ scale

# (figure, label, unit shown, scale factor from the program's unit)
SCALE_FIGURES = [
    ("first_qp_create", "first QP of the process (starts the engine)", "µs", 1.0),
    ("create_per_qp", "`ibv_create_qp`, mean per QP", "µs", 1.0),
    ("create_first10pct_per_qp", "… mean over the first 10 % created", "µs", 1.0),
    ("create_last10pct_per_qp", "… mean over the last 10 % created", "µs", 1.0),
    ("create_max", "… slowest single call", "µs", 1.0),
    ("create_total", "`ibv_create_qp`, all QPs", "ms", 1.0),
    ("modify_init_per_qp", "RESET→INIT, mean per QP", "µs", 1.0),
    ("modify_rtr_per_qp", "INIT→RTR (connect to the pair's peer), mean per QP", "µs", 1.0),
    ("modify_rts_per_qp", "RTR→RTS, mean per QP", "µs", 1.0),
    ("pair_send_recv_per_pair", "one 8 B SEND on every pair, all completions, per pair", "µs",
     1.0),
    ("idle_cpu_connected", "CPU of the process, all QPs connected, no traffic", "% of a core",
     1.0),
    ("destroy_per_qp", "`ibv_destroy_qp`, mean per QP (newest first)", "µs", 1.0),
    ("destroy_first10pct_per_qp", "… mean over the first 10 % destroyed", "µs", 1.0),
    ("destroy_last10pct_per_qp", "… mean over the last 10 % destroyed", "µs", 1.0),
    ("destroy_total", "`ibv_destroy_qp`, all QPs", "ms", 1.0),
    ("rss_per_qp_created", "resident memory per QP, created (VmRSS growth / QPs)", "B", 1.0),
    ("anon_per_qp_created", "… of which private heap (RssAnon)", "B", 1.0),
    ("shm_alloc_per_qp_created", "`/dev/shm/softrdma-<ns>-*` growth per QP (allocated)", "B",
     1.0),
    ("rss_per_qp_rts", "resident memory per QP, connected (RTS) after the SENDs", "B", 1.0),
    ("shm_alloc_per_qp_rts", "`/dev/shm` growth per QP, connected", "B", 1.0),
    ("rss_retained_after_destroy", "resident memory left after destroying all (malloc_trim)",
     "KiB", 1.0 / 1024),
]


def scale_program_section(res):
    # In the order the runs came (run.sh: the larger queues first).
    configs = list(dict.fromkeys([c for c, _f in res.scale] +
                                 [e[1] for e in res.errors if e[0] == "scale"]))
    if not configs:
        return ["(not run)", ""]
    md = []
    qps = sorted({res.scale_qps.get(c) for c in configs if res.scale_qps.get(c)})
    md.append("`softrdma_bench_scale`: %s RC QPs in one process (one PD, 4 shared CQs); "
              "configurations %s (`wrN`: max_send_wr = max_recv_wr = N, 1 SGE, no inline). "
              "Every QP RESET→INIT→RTR→RTS, connected pairwise through `::ffff:127.0.0.1`, "
              "one 8 B SEND per pair checked, then all destroyed. Memory: growth over the process "
              "with its device, PD, CQs, MR and engine already set up."
              % ("/".join("{:,}".format(q) for q in qps) or "?",
                 ", ".join("`%s`" % c for c in configs)))
    md.append("")
    table = ["| figure | unit | " + " | ".join(configs) + " |",
             "|---|---|" + "---:|" * len(configs)]
    for fig, label, unit, factor in SCALE_FIGURES:
        cells = []
        for c in configs:
            entry = res.scale.get((c, fig))
            cells.append(Stats(entry[1]).cell(factor) if entry and entry[1] else "–")
        if all(x == "–" for x in cells):
            continue
        table.append("| %s | %s | %s |" % (label, unit, " | ".join(cells)))
    md += table if len(table) > 2 else ["(no measurements)"]
    for c in configs:
        for e in res.errors:
            if e[0] == "scale" and e[1] == c:
                md.append("")
                md.append("**%s failed:** %s" % (c, e[5].replace("|", "/")))
                break
    md.append("")
    return md


def _bw_cell(st):
    return st.cell(1e-6) if st else "–"


def _ratio(a, b):
    return ("%.2f×" % (a.median / b.median)) if a and b and b.median > 0 else "–"


def pairs_aggregate(res, size, npairs=None):
    """Per repetition, the sum of the pairs' bandwidths (only repetitions where every pair
    produced a result). Returns (Stats or None, number of pairs)."""
    tests = sorted({k[1] for k in res.by_rep if k[0] == "pairs" and k[2] == size}
                   | {e[1] for e in res.errors if e[0] == "pairs" and e[2] == size})
    n = npairs or len(tests)
    sums = []
    reps = {r for k, v in res.by_rep.items() if k[0] == "pairs" and k[2] == size for r in v}
    for rep in sorted(reps):
        vals = [res.by_rep.get(("pairs", t, size, False), {}).get(rep, {}).get("bw_Bps")
                for t in tests]
        if tests and all(v is not None for v in vals):
            sums.append(sum(vals))
    return (Stats(sums) if sums else None), n


def scale_perftest_section(res):
    md = []
    sizes = sorted({k[2] for k in res.data if k[0] in ("qps", "pairs")}
                   | {e[2] for e in res.errors if e[0] in ("qps", "pairs")})
    if not sizes:
        return ["(not run)", ""]
    md.append("### Many QPs in one process pair: `ib_write_bw -q 64` against `-q 1`")
    md.append("")
    md.append("Same message size, duration mode (`-D`), one process pair; bandwidth in MB/s "
              "(10^6 B/s) and messages in k/s, all QPs together.")
    md.append("")
    md.append("| size | -q 1 MB/s | -q 64 MB/s | -q 64 / -q 1 | -q 1 k msg/s | -q 64 k msg/s |")
    md.append("|---:|---:|---:|---:|---:|---:|")
    for sz in sizes:
        q1 = res.stats("qps", "ib_write_bw-q1", sz, "bw_Bps")
        q64 = res.stats("qps", "ib_write_bw-q64", sz, "bw_Bps")
        m1 = res.stats("qps", "ib_write_bw-q1", sz, "msg_rate")
        m64 = res.stats("qps", "ib_write_bw-q64", sz, "msg_rate")
        cells = [_bw_cell(q1) if q1 or not res.error_for("qps", "ib_write_bw-q1", sz) else "error",
                 _bw_cell(q64) if q64 or not res.error_for("qps", "ib_write_bw-q64", sz)
                 else "error", _ratio(q64, q1), m1.cell(1e-3) if m1 else "–",
                 m64.cell(1e-3) if m64 else "–"]
        md.append("| %s | %s |" % (human_size(sz), " | ".join(cells)))
    md.append("")
    tests = sorted({k[1] for k in res.data if k[0] == "pairs"}
                   | {e[1] for e in res.errors if e[0] == "pairs"})
    md.append("### Process pairs at once: %d `ib_write_bw` pairs" % len(tests))
    md.append("")
    md.append("All pairs in one `SOFTRDMA_NAMESPACE`, each on its own port, started together "
              "(every server listening before the clients start); duration mode, so their "
              "measuring windows overlap. Aggregate: the sum of the pairs' bandwidths in each "
              "repetition. MB/s = 10^6 B/s.")
    md.append("")
    md.append("| size | " + " | ".join("pair %s" % t.rsplit("pair", 1)[-1] for t in tests)
              + " | aggregate | one pair alone (-q 1) | aggregate / one pair |")
    md.append("|---:|" + "---:|" * (len(tests) + 3))
    for sz in sizes:
        cells = []
        for t in tests:
            st = res.stats("pairs", t, sz, "bw_Bps")
            cells.append(_bw_cell(st) if st or not res.error_for("pairs", t, sz) else "error")
        agg, _n = pairs_aggregate(res, sz)
        one = res.stats("qps", "ib_write_bw-q1", sz, "bw_Bps")
        cells += [_bw_cell(agg), _bw_cell(one), _ratio(agg, one)]
        md.append("| %s | %s |" % (human_size(sz), " | ".join(cells)))
    md.append("")
    return md


# ------------------------------------------------------------------ callgrind

_CG_TEST = re.compile(r"^(.*)-n(\d+)$")


def callgrind_results(res):
    """{(test, size): {"iters": (n1, n2), "per_iter": Stats, "verbs_per_iter": Stats,
    "calls_per_iter": {verb: Stats}, "ir_per_call": {verb: Stats}, "ir": {n: Stats}}}."""
    runs = {}  # (test, size) -> {n: {rep: row}}
    for (suite, test, size, _pinned), reps in res.by_rep.items():
        if suite != "callgrind":
            continue
        m = _CG_TEST.match(test)
        if m:
            runs.setdefault((m.group(1), size), {})[int(m.group(2))] = reps
    out = {}
    for (test, size), by_n in sorted(runs.items()):
        ns = sorted(by_n)
        entry = {"iters": tuple(ns), "ir": {n: Stats([r["ir"] for r in by_n[n].values()])
                                            for n in ns}}
        out[(test, size)] = entry
        if len(ns) < 2:
            continue
        n1, n2 = ns[0], ns[-1]
        per, verbs_per = [], []
        for rep in sorted(set(by_n[n1]) & set(by_n[n2])):
            a, b = by_n[n1][rep], by_n[n2][rep]
            per.append((b["ir"] - a["ir"]) / float(n2 - n1))
            pa, pb = a.get("profile"), b.get("profile")
            if pa and pb:
                verbs_per.append((sum(pb["inclusive"].values()) - sum(pa["inclusive"].values()))
                                 / float(n2 - n1))
        # Calls per iteration and Ir per call of the data-path verbs, from the N2 runs (the
        # few calls of the setup do not matter there; a difference would carry the waits
        # of two runs).
        per_call, calls_per = {}, {}
        for row in by_n[n2].values():
            prof = row.get("profile")
            if not prof:
                continue
            for verb, _label in CG_VERBS:
                calls = prof["calls"].get(verb, 0)
                if calls >= 16:
                    per_call.setdefault(verb, []).append(prof["inclusive"][verb] / float(calls))
                    calls_per.setdefault(verb, []).append(calls / float(n2))
        entry["per_iter"] = Stats(per) if per else None
        entry["verbs_per_iter"] = Stats(verbs_per) if verbs_per else None
        entry["calls_per_iter"] = {v: Stats(x) for v, x in calls_per.items()}
        entry["ir_per_call"] = {v: Stats(x) for v, x in per_call.items()}
    return out


CG_VERBS = [("PostSend", "ibv_post_send"), ("PostRecv", "ibv_post_recv"),
            ("PollCq", "ibv_poll_cq")]


def callgrind_section(res, cg):
    if not cg and not any(e[0] == "callgrind" for e in res.errors):
        return ["(not run)", ""]
    md = []
    md.append("Client of each test under `valgrind --tool=callgrind` (server native; server "
              "on CPU 0, client on CPU 1), run at two iteration counts; instructions per "
              "iteration = (Ir(N2) − Ir(N1)) / (N2 − N1), which cancels setup and teardown. "
              "**client**: every instruction of the client process (perftest's own loop and "
              "bookkeeping included, all threads); **in softrdma's verbs**: inclusive Ir of "
              "the calls perftest makes into softrdma's verbs. Empty polls while the client "
              "waits for its peer count too (`ibv_poll_cq` calls per iteration shows them; "
              "`ib_write_lat` waits reading its buffer, which only the client figure counts), "
              "so the latency tests' figures move with the machine's load; the Ir per call of "
              "`ibv_post_send` and `ibv_post_recv` (inclusive, N2 run) do not. Cells: median "
              "[min–max] over the repetitions.")
    md.append("")
    md.append("| test | N1 / N2 | client Ir per iteration | in softrdma's verbs per iteration | "
              + " | ".join("`%s` Ir per call" % v for _k, v in CG_VERBS)
              + " | `ibv_poll_cq` calls per iteration | top functions |")
    md.append("|---|---|---:|---:|" + "---:|" * len(CG_VERBS) + "---:|---|")
    if not cg:
        md[-2:] = ["(no measurements: see the failed measurements below)"]
    for (test, size), e in sorted(cg.items()):
        per = e.get("per_iter")
        verbs = e.get("verbs_per_iter")
        cells = ["`%s -s %d`" % (test, size), " / ".join(str(n) for n in e["iters"]),
                 per.cell() if per else "–", verbs.cell() if verbs else "–"]
        for key, _v in CG_VERBS:
            st = e.get("ir_per_call", {}).get(key)
            cells.append(st.cell() if st else "–")
        st = e.get("calls_per_iter", {}).get("PollCq")
        cells.append(st.cell() if st else "–")
        tops = sorted(f for f in os.listdir(os.path.join(res.out, "raw"))
                      if f.startswith("callgrind-%s-%d-" % (test, size)) and
                      f.endswith(".top.txt")) if os.path.isdir(os.path.join(res.out, "raw")) else []
        cells.append(", ".join("[%s](raw/%s)" % (f.rsplit("-", 1)[-1][:-len(".top.txt")], f)
                               for f in tops) or "–")
        md.append("| %s |" % " | ".join(cells))
    md.append("")
    return md


def targets_table(targets):
    md = ["| target | pinned | softrdma | reference | ratio | goal | result | "
          "cache-line RTT [ns] softrdma / reference |",
          "|---|---|---:|---:|---:|---|---|---|"]
    for name, pinned, metric, soft, ref, ratio, goal, verdict, note, state in targets:
        md.append("| %s | %s | %s | %s | %s | %s | **%s**%s | %s |" % (
            name, "yes" if pinned else "no", metric_cell(soft, metric),
            metric_cell(ref, metric) if ref else "–",
            ("%.2f×" % ratio) if ratio is not None else "–", goal, verdict,
            (" (%s)" % shorten(note.replace("|", "/"), 160)) if note else "", state_cell(state)))
    return md


# (label, suite, test, size) of the latency rows whose tails the report shows.
TAIL_ROWS = [
    ("softrdma ib_send_lat", "perftest", "ib_send_lat", 8),
    ("softrdma ib_send_lat", "perftest", "ib_send_lat", 64),
    ("UCX tag_lat", "ucx", "tag_lat", 8),
    ("UCX tag_lat", "ucx", "tag_lat", 64),
    ("UCX tag_lat", "ucx", "tag_lat", 1024),
    ("softrdma ib_write_lat", "perftest", "ib_write_lat", 8),
    ("softrdma ib_send_lat -e", "apps", "ib_send_lat_events", 8),
    ("softrdma ibv_rc_pingpong (round trip)", "apps", "ibv_rc_pingpong", 1024),
    ("softrdma ibv_ud_pingpong (round trip)", "apps", "ibv_ud_pingpong", 1024),
    ("TCP loopback tcp_lat", "tcp", "tcp_lat", 8),
]


def tails_section(res):
    """Median, average, 99th and 99.9th percentile of the latency rows, unpinned and pinned."""
    md = ["Latency, median / average / 99th / 99.9th percentile [µs] (each the median over the "
          "repetitions; UCX prints no percentiles but its median, see the CDF plot; the "
          "pingpongs only an average per run):", "",
          "| measurement | size | pinned | median | average | p99 | p99.9 | p99 / median |",
          "|---|---:|---|---:|---:|---:|---:|---:|"]
    for label, suite, test, size in TAIL_ROWS:
        for pinned in (False, True):
            cells = []
            for m in ("lat_typical_us", "lat_avg_us", "lat_p99_us", "lat_p999_us"):
                st = res.stats(suite, test, size, m, pinned)
                cells.append(fmt(st.median) if st else "–")
            med = res.stats(suite, test, size, "lat_typical_us", pinned)
            p99 = res.stats(suite, test, size, "lat_p99_us", pinned)
            if not med:
                continue
            tail = "%.1f×" % (p99.median / med.median) if p99 and med.median > 0 else "–"
            md.append("| %s | %s | %s | %s | %s |" % (label, human_size(size),
                                                      "yes" if pinned else "no",
                                                      " | ".join(cells), tail))
    md.append("")
    return md


def cdf_data(res):
    """(softrdma latencies sorted, [(rank %, UCX latency)]) for the CDF plot; None if absent."""
    soft = []
    path = os.path.join(res.out, "raw", "cdf-ib_send_lat-64-p0-r0.hist.txt.gz")
    if os.path.exists(path):
        with gzip.open(path, "rt", errors="replace") as f:
            soft = sorted(parsers.parse_histogram(f.read()))
    ucx = []
    for (suite, test, size, pinned), metrics in res.data.items():
        if suite == "cdf" and test.startswith("tag_lat_r") and not pinned and size == 64:
            vals = metrics.get("lat_typical_us")
            if vals:
                ucx.append((float(test[len("tag_lat_r"):]), vals[0]))
    return soft, sorted(ucx)


def write_cdf_plot(res, out, plt):
    soft, ucx = cdf_data(res)
    if not soft and not ucx:
        return ["no latency distribution measured (apps suite): no cdf.png"]
    fig, ax = plt.subplots(figsize=(8, 5))
    if soft:
        n = len(soft)
        ax.plot(soft, [100.0 * (i + 1) / n for i in range(n)], "-",
                label="softrdma ib_send_lat -s 64 (every iteration, %d)" % n)
    if ucx:
        ax.plot([v for _, v in ucx], [r for r, _ in ucx], "o",
                label="UCX tag_lat 64 B (one percentile per run, -R)")
    ax.set_xscale("log")
    ax.set_xlabel("one-way latency [µs] (half the round trip)")
    ax.set_ylabel("iterations at or below [%]")
    ax.set_title("Latency distribution, 64 B, unpinned")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "cdf.png"), dpi=110)
    plt.close(fig)
    return []


def write_plots(res, out):
    """latency.png and bandwidth.png; returns a list of notes (e.g. matplotlib missing)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return ["matplotlib is not installed (Debian: python3-matplotlib): no plots"]

    def draw(ax, series, metric, scale):
        drawn = 0
        for label, suite, test in series:
            xs, ys, lo, hi = [], [], [], []
            for sz in res.sizes(suite, test):
                st = res.stats(suite, test, sz, metric)
                if not st:
                    continue
                xs.append(sz)
                ys.append(st.median * scale)
                lo.append((st.median - st.min) * scale)
                hi.append((st.max - st.median) * scale)
            if not xs:
                continue
            style = {}
            if suite == "limits":
                style = {"color": "black" if test != "process_vm_writev" else "grey",
                         "linestyle": "--" if test == "memcpy_hot" else "-",
                         "linewidth": 1.2}
            elif suite == "perftest":
                style = {"linewidth": 2}
            else:
                style = {"linestyle": "-."}
            ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", markersize=3, capsize=2,
                        label=label, **style)
            drawn += 1
        ax.set_xscale("log", base=2)
        ticks = sorted({sz for _l, su, t in series for sz in res.sizes(su, t) if sz > 0})
        if ticks:
            ax.xaxis.set_major_locator(matplotlib.ticker.FixedLocator(ticks))
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(
            lambda x, _pos: human_size(x) if x >= 1 and float(x).is_integer() else ""))
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
        ax.set_xlabel("message size [bytes]")
        return drawn

    title = "softrdma vs UCX (posix,cma) vs TCP loopback — %s" % res.meta.get("date", "")
    fig, ax = plt.subplots(figsize=(9, 6))
    n = draw(ax, LAT_SERIES, "lat_typical_us", 1.0)
    rtt = res.stats("limits", "cacheline_rtt", 64, "rtt_ns")
    if rtt:
        ax.axhline(rtt.median / 2000.0, color="black", linestyle=":", linewidth=1,
                   label="cache-line round trip / 2 (%.2f µs)" % (rtt.median / 2000.0))
        n += 1
    ax.set_ylabel("latency, median [µs] (send/write/UCX/TCP: one way; read: round trip)")
    ax.set_title("Latency — " + title, fontsize=9)
    if n:
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "latency.png"), dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(9, 6))
    n = draw(ax, BW_SERIES, "bw_Bps", 1e-9)
    ax.set_ylabel("bandwidth, median [GB/s = 10^9 B/s]")
    ax.set_title("Bandwidth — " + title, fontsize=9)
    if n:
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "bandwidth.png"), dpi=110)
    plt.close(fig)
    return write_cdf_plot(res, out, plt)


def main(argv):
    if len(argv) != 2:
        print("usage: report.py RESULTS_DIR", file=sys.stderr)
        return 2
    out = argv[1]
    res = Results(out)
    targets = evaluate_targets(res)
    app_targets = evaluate_targets(res, APP_TARGETS)
    notes = write_plots(res, out)
    repeat = res.meta.get("repeat", "?")

    md = ["# softrdma benchmark report", ""]
    md.append("Run of `bench/run.sh` on %s, git `%s`; %s; kernel %s; load average at start %s. "
              "Each measurement repeated %s× (the paired targets, run back to back with their "
              "reference: %s×; quick run: %s); cells are **median [min–max]**; "
              "ratios are of medians measured in this run. Method: `docs/performance.md`."
              % (res.meta.get("date", "?"), res.meta.get("git", "?"), res.meta.get("cpu", "?"),
                 res.meta.get("kernel", "?"), res.meta.get("load", "?"), repeat,
                 res.meta.get("target_repeat", repeat),
                 "yes" if res.meta.get("quick") == "1" else "no"))
    md.append("")
    md.append("## Targets")
    md.append("")
    md += targets_table(targets)
    passed = sum(1 for t in targets if t[7] == "PASS")
    md.append("")
    md.append("%d of %d targets pass. Pinned: perftest and UCX server on CPU 0, client on CPU 1 "
              "(`taskset`); memcpy is single-threaded and unpinned." % (passed, len(targets)))
    md.append("")
    md += state_section(res, targets + app_targets)

    md.append("## What applications see (issue 15)")
    md.append("")
    md.append("Message rate of small SENDs, average and tail latency, the one-CQ ping-pong of "
              "rdma-core's examples (`ibv_rc_pingpong`/`ibv_ud_pingpong -s 1024`, one iteration "
              "= one round trip, averaged over the run) and blocking waits (`ib_send_lat -e`: "
              "both sides sleep in the completion channel; qperf `tcp_lat`: kernel TCP, "
              "blocking). Averages: perftest `t_avg`, UCX's overall latency, qperf's latency.")
    md.append("")
    md += targets_table(app_targets)
    passed = sum(1 for t in app_targets if t[7] == "PASS")
    md.append("")
    md.append("%d of %d pass." % (passed, len(app_targets)))
    md.append("")
    md += tails_section(res)

    md.append("## Latency [µs]")
    md.append("")
    md.append("perftest `t_typical` (median), UCX `tag_lat` 50th percentile, qperf `tcp_lat`: "
              "one way (half the round trip); `ib_read_lat` and `ib_atomic_lat` print the "
              "whole round trip.")
    md.append("")
    md += series_table(res, LAT_SERIES + [("softrdma ib_atomic_lat (round trip)", "perftest",
                                           "ib_atomic_lat")], "lat_typical_us", 1.0)
    rtt = res.stats("limits", "cacheline_rtt", 64, "rtt_ns")
    if rtt:
        md.append("Cross-core cache-line round trip (CPU %s): %s ns." % (
            ",".join(str(c) for c in res.limits_info.get("cpus", [0, 1])), rtt.cell()))
        md.append("")
    md.append("## Bandwidth [MB/s = 10^6 B/s]")
    md.append("")
    md += series_table(res, BW_SERIES, "bw_Bps", 1e-6)
    md.append("## Message rate [k messages/s]")
    md.append("")
    md += series_table(res, BW_SERIES[:5] + [("softrdma ib_atomic_bw", "perftest",
                                              "ib_atomic_bw")], "msg_rate", 1e-3)
    md += report_ucx_verbs.section(res, human_size, fmt)
    md.append("## Pinned runs (server `taskset -c 0`, client `taskset -c 1`)")
    md.append("")
    md.append("Latency [µs]:")
    md.append("")
    md += series_table(res, LAT_SERIES, "lat_typical_us", 1.0, pinned=True)
    md.append("Bandwidth [MB/s]:")
    md.append("")
    md += series_table(res, BW_SERIES[:5], "bw_Bps", 1e-6, pinned=True)
    md.append("Message rate [k messages/s]:")
    md.append("")
    md += series_table(res, BW_SERIES[:5], "msg_rate", 1e-3, pinned=True)

    md.append("## Scale")
    md.append("")
    md.append("### Many QPs in one process")
    md.append("")
    md += scale_program_section(res)
    md += scale_perftest_section(res)
    cg = callgrind_results(res)
    md.append("## Instructions per operation")
    md.append("")
    md += callgrind_section(res, cg)

    md.append("## Plots")
    md.append("")
    for n in notes:
        md.append("- " + n)
    if not any("matplotlib" in n for n in notes):
        md.append("![latency](latency.png)")
        md.append("")
        md.append("![bandwidth](bandwidth.png)")
        if os.path.exists(os.path.join(out, "cdf.png")):
            md.append("")
            md.append("![latency distribution](cdf.png)")
    md.append("")

    md.append("## Failed or unsupported measurements")
    md.append("")
    if res.errors:
        md.append("| suite | test | size | pinned | rep | error |")
        md.append("|---|---|---:|---|---|---|")
        for suite, test, size, pinned, rep, msg in res.errors:
            md.append("| %s | %s | %s | %s | %s | %s |" % (
                suite, test, human_size(size), "yes" if pinned else "no", rep,
                msg.replace("|", "/")[:300]))
    else:
        md.append("None.")
    md.append("")
    md.append("Raw outputs: `raw/` (one file per process), index `runs.tsv`, machine limits "
              "`limits.jsonl`, aggregates `results.json`.")
    md.append("")

    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(md))

    agg = {"meta": res.meta, "limits_info": res.limits_info, "results": [], "errors": [],
           "targets": [], "state_ratio": STATE_RATIO,
           "state_changes": [{"suite": su, "test": t, "size": sz, "pinned": p, "rep": rep,
                              "rtt_before_ns": b, "rtt_after_ns": a}
                             for su, t, sz, p, rep, b, a in res.state_changes]}
    for (suite, test, size, pinned), metrics in sorted(res.data.items()):
        agg["results"].append({"suite": suite, "test": test, "size": size, "pinned": pinned,
                               **{m: Stats(v).as_dict() for m, v in metrics.items()}})
    for suite, test, size, pinned, rep, msg in res.errors:
        agg["errors"].append({"suite": suite, "test": test, "size": size, "pinned": pinned,
                              "rep": rep, "error": msg})
    app_names = {t[0] for t in APP_TARGETS}
    for name, pinned, metric, soft, ref, ratio, goal, verdict, note, state in (
            targets + app_targets):
        agg["targets"].append({"target": name, "pinned": pinned, "metric": metric,
                               "group": "apps" if name in app_names else "main",
                               "softrdma": soft.median if soft else None,
                               "reference": ref.median if ref else None, "ratio": ratio,
                               "goal": goal, "result": verdict, "note": note})
        if state is not None:
            # Latency targets: the machine state (cache-line RTT, ns) of each side.
            agg["targets"][-1].update({
                "softrdma_machine_rtt_ns": state[0].as_dict() if state[0] else None,
                "reference_machine_rtt_ns": state[1].as_dict() if state[1] else None,
                "states_differ": state[2]})
    agg["scale"] = [{"config": c, "figure": fig, "unit": unit, "qps": res.scale_qps.get(c),
                     **Stats(v).as_dict()} for (c, fig), (unit, v) in sorted(res.scale.items())]
    agg["pairs_aggregate"] = []
    for sz in sorted({k[2] for k in res.by_rep if k[0] == "pairs"}):
        st, n = pairs_aggregate(res, sz)
        if st:
            agg["pairs_aggregate"].append({"size": sz, "pairs": n, "bw_Bps": st.as_dict()})
    agg["callgrind"] = []
    for (test, size), e in sorted(cg.items()):
        agg["callgrind"].append({
            "test": test, "size": size, "iters": list(e["iters"]),
            "ir": {str(n): st.as_dict() for n, st in e["ir"].items()},
            "ir_per_iteration": e["per_iter"].as_dict() if e.get("per_iter") else None,
            "verbs_ir_per_iteration": (e["verbs_per_iter"].as_dict()
                                       if e.get("verbs_per_iter") else None),
            "calls_per_iteration": {v: st.as_dict()
                                    for v, st in e.get("calls_per_iter", {}).items()},
            "ir_per_call": {v: st.as_dict() for v, st in e.get("ir_per_call", {}).items()}})
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(agg, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
