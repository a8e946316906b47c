#!/usr/bin/python3
"""Self-test of report.py's "UCX over softrdma against UCX over shared memory" section
(bench/report_ucx_verbs.py) on a results directory made of captured ucx_perftest outputs:
run.sh's ucx_verbs and ucx_posix suites, one measurement that timed out."""

import os
import shutil
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES = os.path.join(HERE, "samples")
sys.path.insert(0, os.path.dirname(HERE))
import report  # noqa: E402

MIB = 1 << 20
# suite, test, size, rep, rc, sample, rtt before, rtt after
ROWS = [("ucx_verbs", "tag_lat", 8, 0, 0, "ucx_tag_lat_8_table.txt", "170", "180"),
        ("ucx_posix", "tag_lat", 8, 0, 0, "ucx_tag_lat_8_csv.txt", "160", "150"),
        ("ucx_verbs", "tag_bw", MIB, 0, 0, "ucx_tag_bw_1m_csv.txt", "", ""),
        ("ucx_posix", "tag_bw", MIB, 0, 124, "ucx_tag_bw_8_csv.txt", "", "")]


class UcxVerbsSectionTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="bench-ucx-verbs-test.")
        os.mkdir(os.path.join(self.dir, "raw"))
        with open(os.path.join(self.dir, "runs.tsv"), "w") as f:
            f.write("suite\ttest\tsize\tpinned\trep\trc\tclient\tserver\tcmd\t"
                    "rtt_before_ns\trtt_after_ns\n")
            for suite, test, size, rep, rc, name, before, after in ROWS:
                raw = "%s-%s-%d-p0-r%d.client.txt" % (suite, test, size, rep)
                shutil.copy(os.path.join(SAMPLES, name), os.path.join(self.dir, "raw", raw))
                f.write("%s\t%s\t%d\t0\t%d\t%d\traw/%s\t\tcmd\t%s\t%s\n"
                        % (suite, test, size, rep, rc, raw, before, after))
        with open(os.path.join(self.dir, "meta.txt"), "w") as f:
            f.write("date: test\nrepeat: 1\nquick: 1\n")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_section(self):
        self.assertEqual(report.main(["report.py", self.dir]), 0)
        with open(os.path.join(self.dir, "report.md")) as f:
            md = f.read()
        self.assertIn("## UCX over softrdma against UCX over shared memory", md)
        # 0.541 / 0.516 us; 6000.38 MiB/s = 6291.86 MB/s against a timed-out run.
        self.assertIn("| tag_lat | 8 B | 0.541 µs | 0.516 µs | 1.05× |", md)
        self.assertIn("| tag_bw | 1 MiB | 6292 MB/s | error | – |", md)
        self.assertIn("| tag_bw message rate | 1 MiB | 6 k msg/s | error | – |", md)
        # No tag_bw at 8 B and no tag_lat at 1 MiB were run: no empty rows for them.
        self.assertNotIn("| tag_lat | 1 MiB |", md)
        self.assertIn("median 165 ns over 4 probes", md)
        self.assertIn("| ucx_posix | tag_bw | 1 MiB | no | 0 | timed out", md)

    def test_no_section_without_the_suite(self):
        os.remove(os.path.join(self.dir, "runs.tsv"))
        self.assertEqual(report.main(["report.py", self.dir]), 0)
        with open(os.path.join(self.dir, "report.md")) as f:
            self.assertNotIn("UCX over softrdma", f.read())


if __name__ == "__main__":
    unittest.main()
