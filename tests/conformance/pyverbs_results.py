#!/usr/bin/python3
"""Runs rdma-core's pyverbs test suite the way its run_tests.py does, and
writes every test's outcome to a file, one line per test:

    <outcome>\t<test id>\t<detail>

outcome: pass, fail, error, skip, xfail (expected failure), xpass
(unexpected success); detail: the skip reason or the last line of the
traceback. The usual verbose unittest report goes to stderr.

Usage: pyverbs_results.py SUITE_DIR RESULTS_FILE [run_tests.py options...]
SUITE_DIR is a copy of /usr/share/doc/rdma-core/tests with its .gz files
gunzipped (pyverbs_suite.sh makes it).
"""
import importlib.util
import os
import sys
import unittest


def last_line(err_text):
    lines = [line for line in err_text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else ''


class RecordingResult(unittest.TextTestResult):
    """TextTestResult that also keeps (outcome, id, detail) per test."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.records = []
        self._failed_ids = set()

    def _record(self, outcome, test, detail=''):
        self.records.append((outcome, test.id(), detail.replace('\t', ' ').replace('\n', ' ')))

    def addSuccess(self, test):
        super().addSuccess(test)
        if test.id() not in self._failed_ids:  # a failed subtest already counts
            self._record('pass', test)

    def addError(self, test, err):
        super().addError(test, err)
        self._record('error', test, last_line(self.errors[-1][1]))

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record('fail', test, last_line(self.failures[-1][1]))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record('skip', test, reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record('xfail', test)

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record('xpass', test)

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            self._failed_ids.add(test.id())
            bad = 'fail' if issubclass(err[0], test.failureException) else 'error'
            self._record(bad, test, f'{subtest.id()}: {err[0].__name__}: {err[1]}')


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    suite_dir = os.path.abspath(sys.argv[1])
    results_file = sys.argv[2]
    # What run_tests.py does: its argument parser takes its own options out
    # of sys.argv, then the suite's package is loaded from __init__.py.
    sys.argv = [os.path.join(suite_dir, 'run_tests.py')] + sys.argv[3:]
    sys.path.insert(0, suite_dir)
    from args_parser import parser
    parser.parse_args()
    spec = importlib.util.spec_from_file_location(
        'tests', os.path.join(suite_dir, '__init__.py'),
        submodule_search_locations=[suite_dir])
    tests = importlib.util.module_from_spec(spec)
    sys.modules['tests'] = tests
    spec.loader.exec_module(tests)
    suite = unittest.defaultTestLoader.loadTestsFromModule(tests)
    runner = unittest.TextTestRunner(verbosity=2, resultclass=RecordingResult)
    result = runner.run(suite)
    with open(results_file, 'w') as out:
        for outcome, test_id, detail in result.records:
            out.write(f'{outcome}\t{test_id}\t{detail}\n')


if __name__ == '__main__':
    main()
