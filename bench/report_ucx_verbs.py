"""report.py's section for run.sh's ucx_verbs suite: UCX's ucx_perftest over softrdma
(suite ucx_verbs: UCX_TLS=rc_verbs,ud_verbs under `softrdma run`) against UCX over its own
shared memory (suite ucx_posix: UCX_TLS=posix), measured back to back in one run."""

import statistics

# (label, test, metric, scale, unit)
ROWS = [
    ("tag_lat", "tag_lat", "lat_typical_us", 1.0, "µs"),
    ("tag_bw", "tag_bw", "bw_Bps", 1e-6, "MB/s"),
    ("tag_bw message rate", "tag_bw", "msg_rate", 1e-3, "k msg/s"),
]


def section(res, human_size, fmt):
    """Markdown lines (empty when the suite did not run). res: report.Results; human_size
    and fmt: report.py's formatting helpers."""
    keys = [k for k in res.data if k[0] in ("ucx_verbs", "ucx_posix")]
    errs = [e for e in res.errors if e[0] in ("ucx_verbs", "ucx_posix")]
    if not keys and not errs:
        return []
    sizes = sorted({k[2] for k in keys} | {e[2] for e in errs})
    md = ["## UCX over softrdma against UCX over shared memory", "",
          "Debian's `ucx_perftest` (UCP), the same client and server: over softrdma "
          "(`UCX_TLS=rc_verbs,ud_verbs`, `UCX_NET_DEVICES=softrdma0:1`, each process under "
          "`softrdma run`) and over UCX's own shared-memory transport (`UCX_TLS=posix`), run "
          "back to back for each size and repetition. `tag_lat`: 50th percentile, one way; "
          "`tag_bw`: overall. Ratio: softrdma / posix (latency: below 1 is better; bandwidth "
          "and message rate: above 1 is better).", "",
          "| measurement | size | softrdma (rc_verbs) | UCX posix | ratio |",
          "|---|---:|---:|---:|---:|"]
    for label, test, metric, scale, unit in ROWS:
        for sz in sizes:
            cells = []
            medians = []
            for suite in ("ucx_verbs", "ucx_posix"):
                st = res.stats(suite, test, sz, metric)
                if st:
                    cells.append("%s %s" % (st.cell(scale), unit))
                    medians.append(st.median)
                else:
                    cells.append("error" if res.error_for(suite, test, sz) else "–")
                    medians.append(None)
            if all(c == "–" for c in cells):
                continue
            ratio = ("%.2f×" % (medians[0] / medians[1])
                     if None not in medians and medians[1] else "–")
            md.append("| %s | %s | %s | %s | %s |" % (label, human_size(sz), cells[0], cells[1],
                                                     ratio))
    md.append("")
    rtts = [v for k in keys if k[1] == "tag_lat"
            for v in res.data[k].get("machine_rtt_ns", [])]
    if rtts:
        md.append("Cache-line round trip around these latency runs: median %s ns over %d "
                  "probes." % (fmt(statistics.median(rtts)), len(rtts)))
        md.append("")
    return md
