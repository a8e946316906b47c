#!/usr/bin/python3
"""Write report.md, results.json and the PNG plots for one bench/run.sh results directory.

    /usr/bin/python3 bench/report.py DIR

Reads DIR/runs.tsv (one row per measurement, raw outputs in DIR/raw), DIR/limits.jsonl and
DIR/meta.txt. Medians and min-max over the repetitions; ratios from medians measured in the
same run. Uses Debian's python3-matplotlib for the plots (skipped with a note if missing).
"""

import csv
import json
import os
import statistics
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parsers  # noqa: E402

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
IDLE_CPU_GOAL_PCT = 1.0

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
        for r in rows:
            if r.get("size", size) == size or suite == "idle":
                self.add(key, r)

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


def evaluate_targets(res):
    """Rows: (name, pinned, soft Stats|None, ref Stats|None, ratio|None, goal text, verdict, note)."""
    rows = []
    for pinned in (False, True):
        for name, soft_key, ref_key, metric, goal, op in TARGETS:
            soft_pinned = pinned
            ref_pinned = pinned and ref_key[0] != "limits"
            soft = res.stats(*soft_key, metric, pinned=soft_pinned)
            ref = res.stats(*ref_key, metric, pinned=ref_pinned)
            ratio = None
            note = ""
            if soft and ref and ref.median > 0:
                ratio = soft.median / ref.median
                ok = ratio <= goal if op == "<=" else ratio >= goal
                verdict = "PASS" if ok else "FAIL"
            else:
                verdict = "FAIL"
                missing = soft_key if not soft else ref_key
                err = res.error_for(*missing, pinned=(soft_pinned if not soft else ref_pinned))
                note = "no data for %s %s %s%s" % (missing[0], missing[1], human_size(missing[2]),
                                                    ": " + err if err else "")
            rows.append((name, pinned, metric, soft, ref, ratio, "%s %g×" % (op, goal), verdict,
                         note))
    idle = res.stats("idle", "idle_cpu", 0, "cpu_pct")
    if idle:
        verdict = "PASS" if idle.median <= IDLE_CPU_GOAL_PCT else "FAIL"
        note = ""
    else:
        verdict = "FAIL"
        err = res.error_for("idle", "idle_cpu", 0)
        note = "no data" + (": " + err if err else "")
    rows.append(("idle CPU, process holding a QP, no traffic (% of a core)", False, "cpu_pct",
                 idle, None, None, "<= %g %%" % IDLE_CPU_GOAL_PCT, verdict, note))
    return rows


def metric_cell(stats, metric):
    if stats is None:
        return "–"
    if metric == "bw_Bps":
        return stats.cell(1e-9) + " GB/s"
    if metric == "msg_rate":
        return stats.cell(1e-6) + " M/s"
    if metric == "lat_typical_us":
        return stats.cell() + " µs"
    if metric == "cpu_pct":
        return stats.cell() + " %"
    return stats.cell()


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
    return []


def main(argv):
    if len(argv) != 2:
        print("usage: report.py RESULTS_DIR", file=sys.stderr)
        return 2
    out = argv[1]
    res = Results(out)
    targets = evaluate_targets(res)
    notes = write_plots(res, out)
    repeat = res.meta.get("repeat", "?")

    md = ["# softrdma benchmark report", ""]
    md.append("Run of `bench/run.sh` on %s, git `%s`; %s; kernel %s; load average at start %s. "
              "Each measurement repeated %s× (quick run: %s); cells are **median [min–max]**; "
              "ratios are of medians measured in this run. Method: `docs/performance.md`."
              % (res.meta.get("date", "?"), res.meta.get("git", "?"), res.meta.get("cpu", "?"),
                 res.meta.get("kernel", "?"), res.meta.get("load", "?"), repeat,
                 "yes" if res.meta.get("quick") == "1" else "no"))
    md.append("")
    md.append("## Targets")
    md.append("")
    md.append("| target | pinned | softrdma | reference | ratio | goal | result |")
    md.append("|---|---|---:|---:|---:|---|---|")
    for name, pinned, metric, soft, ref, ratio, goal, verdict, note in targets:
        md.append("| %s | %s | %s | %s | %s | %s | **%s**%s |" % (
            name, "yes" if pinned else "no", metric_cell(soft, metric),
            metric_cell(ref, metric) if ref else ("–" if note or metric == "cpu_pct" else "–"),
            ("%.2f×" % ratio) if ratio is not None else "–", goal, verdict,
            (" (%s)" % shorten(note.replace("|", "/"), 160)) if note else ""))
    passed = sum(1 for t in targets if t[7] == "PASS")
    md.append("")
    md.append("%d of %d targets pass. Pinned: perftest and UCX server on CPU 0, client on CPU 1 "
              "(`taskset`); memcpy is single-threaded and unpinned." % (passed, len(targets)))
    md.append("")

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

    md.append("## Plots")
    md.append("")
    for n in notes:
        md.append("- " + n)
    if not notes:
        md.append("![latency](latency.png)")
        md.append("")
        md.append("![bandwidth](bandwidth.png)")
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
           "targets": []}
    for (suite, test, size, pinned), metrics in sorted(res.data.items()):
        agg["results"].append({"suite": suite, "test": test, "size": size, "pinned": pinned,
                               **{m: Stats(v).as_dict() for m, v in metrics.items()}})
    for suite, test, size, pinned, rep, msg in res.errors:
        agg["errors"].append({"suite": suite, "test": test, "size": size, "pinned": pinned,
                              "rep": rep, "error": msg})
    for name, pinned, metric, soft, ref, ratio, goal, verdict, note in targets:
        agg["targets"].append({"target": name, "pinned": pinned, "metric": metric,
                               "softrdma": soft.median if soft else None,
                               "reference": ref.median if ref else None, "ratio": ratio,
                               "goal": goal, "result": verdict, "note": note})
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(agg, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
