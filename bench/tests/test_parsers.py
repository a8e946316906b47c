#!/usr/bin/python3
"""Self-test of bench/parsers.py and bench/report.py on outputs captured from real runs of
perftest 4.5 (over softrdma), ucx_perftest 1.13 (UCX_TLS=posix,cma), qperf 0.4.11,
softrdma_bench_scale and valgrind 3.19's callgrind on this project's machines
(bench/tests/samples; the callgrind_*.out profiles are trimmed to the lines the parser
reads: the header, the lines that define a compressed function name, and the calls into
softrdma's verbs with their callers). Runs no benchmark; ctest: bench.parsers.

    /usr/bin/python3 bench/tests/test_parsers.py
"""

import gzip
import json
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES = os.path.join(HERE, "samples")
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(HERE))

import parsers  # noqa: E402
import report  # noqa: E402

MIB = 1 << 20


def sample(name):
    with open(os.path.join(SAMPLES, name)) as f:
        return f.read()


class PerftestTest(unittest.TestCase):
    def test_lat(self):
        (row,) = parsers.parse_perftest(sample("perftest_ib_send_lat_client.txt"))
        self.assertEqual(row["size"], 8)
        self.assertEqual(row["iterations"], 100)
        self.assertAlmostEqual(row["lat_typical_us"], 0.96)
        self.assertAlmostEqual(row["lat_avg_us"], 807.73)
        self.assertAlmostEqual(row["lat_min_us"], 0.76)
        self.assertAlmostEqual(row["lat_p999_us"], 15227.71)

    def test_lat_large(self):
        (row,) = parsers.parse_perftest(sample("perftest_ib_send_lat_1m_client.txt"))
        self.assertEqual(row["size"], 1048576)
        self.assertAlmostEqual(row["lat_typical_us"], 59.62)

    def test_bw(self):
        (row,) = parsers.parse_perftest(sample("perftest_ib_send_bw_client.txt"))
        self.assertEqual(row["size"], 65536)
        self.assertAlmostEqual(row["bw_Bps"], 10498.40 * MIB)
        self.assertAlmostEqual(row["msg_rate"], 167974.0)

    def test_bw_gbits_and_several_sizes(self):
        text = (" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
                " 2          5000           0.08               0.08   \t\t   4.937167\n"
                " 4          5000           0.16               0.16   \t\t   4.975000\n")
        rows = parsers.parse_perftest(text)
        self.assertEqual([r["size"] for r in rows], [2, 4])
        self.assertAlmostEqual(rows[1]["bw_Bps"], 0.16 * 125e6)

    def test_errors(self):
        with self.assertRaisesRegex(parsers.ParseError, "Couldn't post send"):
            parsers.parse_perftest(sample("perftest_ib_write_bw_error_client.txt"))
        with self.assertRaisesRegex(parsers.ParseError, "Couldn't post send"):
            parsers.parse_perftest(sample("perftest_ib_read_lat_error_client.txt"))
        with self.assertRaises(parsers.ParseError):
            parsers.parse_perftest("")


class UcxTest(unittest.TestCase):
    def test_lat_csv(self):
        (row,) = parsers.parse_ucx(sample("ucx_tag_lat_8_csv.txt"), 8)
        self.assertEqual(row["iterations"], 100000)
        self.assertAlmostEqual(row["lat_typical_us"], 0.516)
        self.assertAlmostEqual(row["lat_avg_us"], 0.589)

    def test_lat_table(self):
        (row,) = parsers.parse_ucx(sample("ucx_tag_lat_8_table.txt"), 8)
        self.assertAlmostEqual(row["lat_typical_us"], 0.541)
        self.assertAlmostEqual(row["msg_rate"], 595602)

    def test_bw(self):
        (row,) = parsers.parse_ucx(sample("ucx_tag_bw_1m_csv.txt"), MIB)
        self.assertAlmostEqual(row["bw_Bps"], 6000.38 * MIB)
        (row,) = parsers.parse_ucx(sample("ucx_tag_bw_8_csv.txt"), 8)
        self.assertAlmostEqual(row["msg_rate"], 4024761)
        # UCX's MB/s is 2^20 B/s: message rate x size = bandwidth.
        self.assertAlmostEqual(row["msg_rate"] * 8 / row["bw_Bps"], 1.0, places=2)

    def test_error(self):
        with self.assertRaises(parsers.ParseError):
            parsers.parse_ucx("Waiting for connection...\nconnect() failed: Connection refused\n", 8)


class QperfTest(unittest.TestCase):
    def test_unified_units(self):
        (row,) = parsers.parse_qperf(sample("qperf_tcp_lat_8.txt"), 8)
        self.assertAlmostEqual(row["lat_typical_us"], 11.138)
        (row,) = parsers.parse_qperf(sample("qperf_tcp_bw_1m.txt"), MIB)
        self.assertAlmostEqual(row["bw_Bps"], 2099249152)
        self.assertAlmostEqual(row["msg_rate"], 2099249152 / MIB)

    def test_scaled_units(self):
        (row,) = parsers.parse_qperf(sample("qperf_tcp_lat_8_units.txt"), 8)
        self.assertAlmostEqual(row["lat_typical_us"], 12.7)
        (row,) = parsers.parse_qperf(sample("qperf_tcp_bw_1m_verbose.txt"), MIB)
        self.assertAlmostEqual(row["bw_Bps"], 2.37e9)
        self.assertAlmostEqual(row["msg_rate"], 2260)

    def test_error(self):
        with self.assertRaisesRegex(parsers.ParseError, "bad test"):
            parsers.parse_qperf(sample("qperf_error.txt"), 8)


class LimitsIdleTest(unittest.TestCase):
    def test_limits(self):
        results, errors, info = parsers.parse_limits(sample("limits.jsonl") +
                                                     '{"test":"process_vm_writev","size":8,'
                                                     '"error":"process_vm_writev: EPERM"}\n')
        self.assertEqual(info["cpus"], [0, 1])
        unit, values = results[("memcpy_cold", MIB)]
        self.assertEqual(unit, "B/s")
        self.assertEqual(len(values), 2)
        self.assertIn(("cacheline_rtt", 64), results)
        self.assertEqual(errors, [("process_vm_writev", 8, "process_vm_writev: EPERM")])

    def test_state_rtt(self):
        self.assertAlmostEqual(parsers.parse_state_rtt("412.5"), 412.5)
        self.assertAlmostEqual(parsers.parse_state_rtt(" 160\n"), 160.0)
        for bad in (None, "", "nan", "inf", "-3", "0", "error"):
            self.assertIsNone(parsers.parse_state_rtt(bad), bad)

    def test_machine_states(self):
        self.assertEqual(report.machine_states(None, None), (None, None, None))
        differ = report.machine_states(report.Stats([420.0]), report.Stats([300.0]))[2]
        self.assertFalse(differ)  # 1.4x apart: the same state
        self.assertTrue(report.machine_states(report.Stats([160.0]),
                                              report.Stats([420.0, 410.0]))[2])
        self.assertIsNone(report.machine_states(report.Stats([160.0]), None)[2])

    def test_idle(self):
        (row,) = parsers.parse_idle(sample("idle.txt"))
        self.assertEqual(row["cpu_pct"], 0.0)
        (row,) = parsers.parse_idle("idle_cpu_ticks: 5\nclk_tck: 100\nwindow_s: 5\n")
        self.assertAlmostEqual(row["cpu_pct"], 1.0)


class AppsTest(unittest.TestCase):
    def test_pingpong(self):
        text = sample("ibv_rc_pingpong_1024_client.txt")
        (row,) = parsers.parse_pingpong(text, 1024)
        self.assertEqual(row, {"size": 1024, "iterations": 5000, "lat_typical_us": 8.41,
                               "lat_avg_us": 8.41})
        self.assertEqual(parsers.parse("apps", text, 1024), [row])
        with self.assertRaises(parsers.ParseError):
            parsers.parse_pingpong("Failed to modify QP to RTR\n", 1024)

    def test_send_lat_events_is_perftest(self):
        text = sample("perftest_ib_send_lat_client.txt")
        self.assertEqual(parsers.parse("apps", text, 8), parsers.parse_perftest(text))

    def test_histogram(self):
        text = "#, usec\n1, 0.68\n2, 0.707143\n3, 6876.04\n 8 1000 0.5 1 2 3 4 5 6\n"
        self.assertEqual(parsers.parse_histogram(text), [0.68, 0.707143, 6876.04])

    def test_ucx_percentile_rank(self):
        # ucx_perftest -R 99: the percentile column carries the rank asked for.
        text = sample("ucx_tag_lat_64_r99_csv.txt")
        (row,) = parsers.parse("cdf", text, 64)
        self.assertEqual(row["lat_typical_us"], 0.809)
        self.assertEqual(row["lat_avg_us"], 0.623)


class AppTargetsTest(unittest.TestCase):
    class FakeResults:
        """res.stats() over a dict (suite, test, size, metric, pinned) -> values."""

        def __init__(self, data):
            self.data = data

        def stats(self, suite, test, size, metric, pinned=False):
            v = self.data.get((suite, test, size, metric, pinned))
            return report.Stats(v) if v else None

        def error_for(self, *args, **kwargs):
            return None

    def test_reference_metric_and_factor(self):
        res = self.FakeResults({
            ("apps", "ibv_rc_pingpong", 1024, "lat_avg_us", False): [3.0],
            ("ucx", "tag_lat", 1024, "lat_avg_us", False): [1.0],
            ("perftest", "ib_send_lat", 64, "lat_p99_us", False): [1.2],
            ("perftest", "ib_send_lat", 64, "lat_typical_us", False): [0.5],
        })
        rows = {(r[0], r[1]): r for r in report.evaluate_targets(res, report.APP_TARGETS)}
        rc = rows[("ibv_rc_pingpong 1 KiB per iteration vs 2 × UCX tag_lat 1 KiB average",
                   False)]
        self.assertAlmostEqual(rc[5], 1.5)  # 3.0 / (2 x 1.0)
        self.assertEqual(rc[7], "PASS")
        tail = rows[("ib_send_lat 64 B 99th percentile vs its own median", False)]
        self.assertAlmostEqual(tail[5], 2.4)
        self.assertEqual(tail[7], "PASS")
        self.assertEqual(rows[("ib_send_bw 8 B msg/s vs UCX tag_bw 8 B msg/s", False)][7], "FAIL")
        self.assertEqual(len(rows), 2 * len(report.APP_TARGETS))  # no idle row here


class ScaleTest(unittest.TestCase):
    def test_scale_program(self):
        text = sample("scale_wr1.jsonl") + sample("scale_wr1.jsonl") + sample("scale_error.jsonl")
        results, errors, qps = parsers.parse_scale(text)
        self.assertEqual(qps, {"wr1": 10000, "wr20000-1": 100})
        unit, values = results[("wr1", "create_per_qp")]
        self.assertEqual(unit, "us")
        self.assertEqual(values, [6.18173, 6.18173])
        self.assertEqual(results[("wr1", "rss_per_qp_created")], ("B", [1925.94, 1925.94]))
        self.assertEqual(len(errors), 1)
        self.assertEqual(errors[0][0], "wr20000-1")
        self.assertIn("ibv_create_qp of the first QP", errors[0][1])
        self.assertIn("Invalid argument", errors[0][1])

    def test_perftest_duration_many_qps(self):
        # ib_write_bw -q 64 -D 1: no peak (0.00), iterations of all QPs together.
        (row,) = parsers.parse_perftest(sample("perftest_ib_write_bw_q64_duration_client.txt"))
        self.assertEqual(row["size"], 8)
        self.assertEqual(row["iterations"], 257600)
        self.assertAlmostEqual(row["bw_Bps"], 1.97 * MIB)
        self.assertAlmostEqual(row["msg_rate"], 257585)
        text = sample("perftest_ib_write_bw_q64_duration_client.txt")
        self.assertEqual(parsers.parse("qps", text, 8), [row])


class CallgrindTest(unittest.TestCase):
    def test_client(self):
        (row,) = parsers.parse_callgrind(sample("callgrind_ib_send_lat_n2000_client.txt"), 8)
        self.assertEqual(row, {"size": 8, "ir": 27987749, "iterations": 2000})
        (row,) = parsers.parse("callgrind", sample("callgrind_ib_send_lat_n6000_client.txt"), 8)
        self.assertEqual(row["ir"], 36092612)
        # Only valgrind's "I refs" line (e.g. -q not given, "Collected" cut off).
        (row,) = parsers.parse_callgrind("==1== I   refs:      1,234,567\n", 8)
        self.assertEqual(row["ir"], 1234567)
        with self.assertRaisesRegex(parsers.ParseError, "Couldn't post send"):
            parsers.parse_callgrind(sample("perftest_ib_write_bw_error_client.txt"), 8)

    def test_profile(self):
        prof = parsers.parse_callgrind_profile(sample("callgrind_ib_send_lat_n6000.out"))
        self.assertEqual(prof["total"], 36092612)
        self.assertEqual(prof["calls"]["PostSend"], 6000)
        self.assertEqual(prof["calls"]["PostRecv"], 6000)
        self.assertEqual(prof["calls"]["PollCq"], 44656)
        self.assertEqual(prof["inclusive"]["PostSend"], 6084140)
        self.assertEqual(prof["inclusive"]["PollCq"], 15854175)
        # Calls between softrdma's own functions are not counted: one QP, one device.
        self.assertEqual(prof["calls"]["CreateQp"], 1)
        self.assertEqual(prof["calls"]["OpenDevice"], 1)
        prof2 = parsers.parse_callgrind_profile(sample("callgrind_ib_send_lat_n2000.out"))
        self.assertEqual(prof2["calls"]["PostSend"], 2000)
        self.assertEqual(parsers.parse_callgrind_profile("")["calls"], {})


class ReportTest(unittest.TestCase):
    """report.py end to end on a results directory assembled from the samples."""

    # The machine state run.sh records around latency measurements (runs.tsv rtt_before_ns,
    # rtt_after_ns): softrdma's ib_send_lat in the slow state, UCX's tag_lat in the fast one
    # (its repetition 1 changed state during the measurement), a row with a lost probe.
    STATES = {("perftest", "ib_send_lat", 0): ("410.0", "420.5"),
              ("ucx", "tag_lat", 0): ("160.2", "158.0"),
              ("ucx", "tag_lat", 1): ("165", "400"),
              ("tcp", "tcp_lat", 0): ("", "150")}

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="bench-report-test.")
        os.mkdir(os.path.join(self.dir, "raw"))
        self.write_runs(with_state=True)
        for n in (2000, 6000):
            with open(os.path.join(SAMPLES, "callgrind_ib_send_lat_n%d.out" % n), "rb") as src, \
                    gzip.open(os.path.join(self.dir, "raw", "callgrind-ib_send_lat-n%d-8-p1-r0"
                                           ".callgrind.out.gz" % n), "wb") as dst:
                dst.write(src.read())
        with open(os.path.join(self.dir, "raw", "callgrind-ib_send_lat-8-p1-r0.top.txt"), "w") as f:
            f.write("top\n")
        shutil.copy(os.path.join(SAMPLES, "limits.jsonl"), self.dir)
        with open(os.path.join(self.dir, "scale.jsonl"), "w") as f:
            f.write(sample("scale_wr1.jsonl") + sample("scale_error.jsonl"))
        with open(os.path.join(self.dir, "meta.txt"), "w") as f:
            f.write("date: test\nrepeat: 1\nquick: 1\n")

    def write_runs(self, with_state):
        """runs.tsv and raw/; without the state columns: as run.sh wrote it before them."""
        rows = [("perftest", "ib_send_lat", 8, 0, 0, 0, "perftest_ib_send_lat_client.txt"),
                ("perftest", "ib_send_bw", 65536, 0, 0, 0, "perftest_ib_send_bw_client.txt"),
                ("perftest", "ib_write_bw", MIB, 0, 0, 1, "perftest_ib_write_bw_error_client.txt"),
                ("ucx", "tag_lat", 8, 0, 0, 0, "ucx_tag_lat_8_csv.txt"),
                ("ucx", "tag_lat", 8, 0, 1, 0, "ucx_tag_lat_8_table.txt"),
                ("ucx", "tag_bw", 65536, 0, 0, 0, "ucx_tag_bw_1m_csv.txt"),
                ("tcp", "tcp_lat", 8, 0, 0, 0, "qperf_tcp_lat_8.txt"),
                ("idle", "idle_cpu", 0, 0, 0, 0, "idle.txt"),
                ("qps", "ib_write_bw-q64", 8, 0, 0, 0,
                 "perftest_ib_write_bw_q64_duration_client.txt"),
                ("qps", "ib_write_bw-q1", 8, 0, 0, 0,
                 "perftest_ib_write_bw_q64_duration_client.txt"),
                ("pairs", "ib_write_bw-pair0", 8, 0, 0, 0,
                 "perftest_ib_write_bw_q64_duration_client.txt"),
                ("pairs", "ib_write_bw-pair1", 8, 0, 0, 0,
                 "perftest_ib_write_bw_q64_duration_client.txt"),
                ("pairs", "ib_write_bw-pair0", 8, 0, 1, 0,
                 "perftest_ib_write_bw_q64_duration_client.txt"),
                ("pairs", "ib_write_bw-pair1", 8, 0, 1, 1,
                 "perftest_ib_write_bw_error_client.txt"),
                ("callgrind", "ib_send_lat-n2000", 8, 1, 0, 0,
                 "callgrind_ib_send_lat_n2000_client.txt"),
                ("callgrind", "ib_send_lat-n6000", 8, 1, 0, 0,
                 "callgrind_ib_send_lat_n6000_client.txt")]
        with open(os.path.join(self.dir, "runs.tsv"), "w") as f:
            f.write("suite\ttest\tsize\tpinned\trep\trc\tclient\tserver\tcmd%s\n"
                    % ("\trtt_before_ns\trtt_after_ns" if with_state else ""))
            for suite, test, size, pinned, rep, rc, name in rows:
                # One file per row, named as run.sh names them.
                raw = "%s-%s-%d-p%d-r%d.client.txt" % (suite, test, size, pinned, rep)
                shutil.copy(os.path.join(SAMPLES, name), os.path.join(self.dir, "raw", raw))
                f.write("%s\t%s\t%d\t%d\t%d\t%d\traw/%s\t\tcmd" % (suite, test, size, pinned,
                                                                  rep, rc, raw))
                if with_state:
                    f.write("\t%s\t%s" % self.STATES.get((suite, test, rep), ("", "")))
                f.write("\n")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_report(self):
        self.assertEqual(report.main(["report.py", self.dir]), 0)
        with open(os.path.join(self.dir, "report.md")) as f:
            md = f.read()
        with open(os.path.join(self.dir, "results.json")) as f:
            agg = json.load(f)
        t = {(x["target"], x["pinned"]): x for x in agg["targets"]}
        lat = t[("ib_send_lat 8 B vs UCX tag_lat 8 B", False)]
        # softrdma 0.96 us vs the median of UCX's two runs (0.516, 0.541).
        self.assertAlmostEqual(lat["ratio"], 0.96 / ((0.516 + 0.541) / 2))
        self.assertEqual(lat["result"], "FAIL")  # 1.82x > 1.5x
        send = t[("ib_send_bw 64 KiB vs UCX tag_bw 64 KiB", False)]
        self.assertAlmostEqual(send["ratio"], 10498.40 / 6000.38)
        self.assertEqual(send["result"], "PASS")
        wbw = t[("ib_write_bw 1 MiB vs memcpy 1 MiB (out of cache)", False)]
        self.assertEqual(wbw["result"], "FAIL")
        self.assertIn("Couldn't post send", wbw["note"])
        self.assertEqual(t[("idle CPU, process holding a QP, no traffic (% of a core)",
                            False)]["result"], "PASS")
        self.assertIn("## Targets", md)
        self.assertIn("**PASS**", md)
        self.assertIn("| perftest | ib_write_bw | 1 MiB | no | 0 | exit code 1", md)
        self.check_state(md, agg)
        self.check_scale(md, agg)
        self.check_callgrind(md, agg)
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            self.assertIn("no plots", md)
            return
        for png in ("latency.png", "bandwidth.png"):
            with open(os.path.join(self.dir, png), "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def check_state(self, md, agg):
        t = {(x["target"], x["pinned"]): x for x in agg["targets"]}
        lat = t[("ib_send_lat 8 B vs UCX tag_lat 8 B", False)]
        self.assertAlmostEqual(lat["softrdma_machine_rtt_ns"]["median"], (410.0 + 420.5) / 2)
        self.assertEqual(lat["softrdma_machine_rtt_ns"]["n"], 2)
        # UCX: both probes of both repetitions, 158 160.2 165 400.
        self.assertEqual(lat["reference_machine_rtt_ns"]["values"], [158.0, 160.2, 165.0, 400.0])
        self.assertAlmostEqual(lat["reference_machine_rtt_ns"]["median"], (160.2 + 165.0) / 2)
        self.assertIs(lat["states_differ"], True)
        self.assertIn("| ib_send_lat 8 B vs UCX tag_lat 8 B | no | 0.96 µs | "
                      "0.528 [0.516–0.541] µs | 1.82× | <= 1.5× | **FAIL** | "
                      "415 / 163 **states differ** |", md)
        # No softrdma ib_write_lat at all: no state for that side, nothing to compare.
        wlat = t[("ib_write_lat 8 B vs UCX tag_lat 8 B", False)]
        self.assertIsNone(wlat["states_differ"])
        self.assertIsNone(wlat["softrdma_machine_rtt_ns"])
        self.assertRegex(md, r"\| ib_write_lat 8 B vs UCX tag_lat 8 B \| no \|.*\| – / 163 \|\n")
        # Targets that are not latencies carry no state.
        bw = t[("ib_send_bw 64 KiB vs UCX tag_bw 64 KiB", False)]
        self.assertNotIn("states_differ", bw)
        self.assertRegex(md, r"\| ib_send_bw 64 KiB vs UCX tag_bw 64 KiB \| no \|"
                             r".*\*\*PASS\*\* \|  \|\n")
        # The probes of every latency measurement, and the one that saw the state change.
        self.assertIn("Machine state:", md)
        self.assertIn("(7 probes in this run: 165 [150–420] ns)", md)
        self.assertIn("1 latency target row is affected", md)
        self.assertIn("1 measurement saw the state change during the run (before / after): "
                      "ucx tag_lat 8 B r1 165 / 400 ns.", md)
        self.assertEqual(agg["state_changes"], [{"suite": "ucx", "test": "tag_lat", "size": 8,
                                                 "pinned": False, "rep": "1",
                                                 "rtt_before_ns": 165.0, "rtt_after_ns": 400.0}])
        res = {(x["suite"], x["test"], x["size"], x["pinned"]): x for x in agg["results"]}
        self.assertEqual(res[("tcp", "tcp_lat", 8, False)]["machine_rtt_ns"]["values"], [150.0])
        self.assertNotIn("machine_rtt_ns", res[("perftest", "ib_send_bw", 65536, False)])

    def test_report_without_state_columns(self):
        self.write_runs(with_state=False)
        self.assertEqual(report.main(["report.py", self.dir]), 0)
        with open(os.path.join(self.dir, "report.md")) as f:
            md = f.read()
        with open(os.path.join(self.dir, "results.json")) as f:
            agg = json.load(f)
        t = {(x["target"], x["pinned"]): x for x in agg["targets"]}
        lat = t[("ib_send_lat 8 B vs UCX tag_lat 8 B", False)]
        self.assertAlmostEqual(lat["ratio"], 0.96 / ((0.516 + 0.541) / 2))
        self.assertIsNone(lat["states_differ"])
        self.assertIsNone(lat["softrdma_machine_rtt_ns"])
        self.assertNotIn("states differ", md)
        self.assertNotIn("Machine state:", md)
        self.assertIn("| ib_send_lat 8 B vs UCX tag_lat 8 B | no | 0.96 µs | "
                      "0.528 [0.516–0.541] µs | 1.82× | <= 1.5× | **FAIL** | – |", md)
        self.assertEqual(agg["state_changes"], [])

    def check_scale(self, md, agg):
        self.assertIn("## Scale", md)
        self.assertIn("| `ibv_create_qp`, mean per QP | µs | 6.18 | – |", md)
        self.assertIn("| resident memory per QP, created (VmRSS growth / QPs) | B | 1926 | – |",
                      md)
        self.assertIn("**wr20000-1 failed:** ibv_create_qp of the first QP", md)
        self.assertIn("| scale | wr20000-1 | 0 B | no |  | ibv_create_qp of the first QP", md)
        # -q 64 and -q 1 from the same sample: ratio 1.
        self.assertIn("| 8 B | 2.07 | 2.07 | 1.00× | 258 | 258 |", md)
        # Two pairs; repetition 1 lost pair 1, so the aggregate is repetition 0's sum only.
        self.assertIn("| 8 B | 2.07 [2.07–2.07] | 2.07 | 4.13 | 2.07 | 2.00× |", md)
        (pa,) = agg["pairs_aggregate"]
        self.assertEqual(pa["pairs"], 2)
        self.assertEqual(pa["bw_Bps"]["n"], 1)
        self.assertAlmostEqual(pa["bw_Bps"]["median"], 2 * 1.97 * MIB)
        fig = {(x["config"], x["figure"]): x for x in agg["scale"]}
        self.assertEqual(fig[("wr1", "create_per_qp")]["qps"], 10000)

    def check_callgrind(self, md, agg):
        self.assertIn("## Instructions per operation", md)
        (cg,) = agg["callgrind"]
        self.assertEqual(cg["test"], "ib_send_lat")
        self.assertEqual(cg["iters"], [2000, 6000])
        self.assertAlmostEqual(cg["ir_per_iteration"]["median"], (36092612 - 27987749) / 4000.0)
        self.assertAlmostEqual(cg["ir_per_call"]["PostSend"]["median"], 6084140 / 6000.0)
        self.assertAlmostEqual(cg["calls_per_iteration"]["PollCq"]["median"], 44656 / 6000.0)
        self.assertIn("| `ib_send_lat -s 8` | 2000 / 6000 | 2026 |", md)
        self.assertIn("[r0](raw/callgrind-ib_send_lat-8-p1-r0.top.txt)", md)


if __name__ == "__main__":
    unittest.main(verbosity=1)
