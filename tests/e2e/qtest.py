"""Small helpers shared by the end-to-end tests: run the real binary in a
temporary data directory, count checks, and report like the other runners."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

BIN = os.environ.get("QUARRY_BIN") or os.path.join(
    os.path.dirname(__file__), "..", "..", "build", "quarry")

_passed = 0
_failed = 0


def check(cond, what):
    global _passed, _failed
    if cond:
        _passed += 1
    else:
        _failed += 1
        print("FAILED: " + what, flush=True)
    return cond


def finish():
    print("%d passed, %d failed" % (_passed, _failed))
    sys.exit(1 if _failed else 0)


def wait_until(cond, secs=30):
    """Poll cond() until it holds (True) or secs pass (False): tests wait for
    what they need to see, and secs is only a bound that turns a hang into a
    failure, never a measure of speed."""
    end = time.monotonic() + secs
    while not cond():
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


def skip(reason):
    print("skip: " + reason)
    sys.exit(77)


class DataDir:
    def __init__(self):
        self.path = tempfile.mkdtemp(prefix="quarry-e2e-")

    def __enter__(self):
        return self

    def __exit__(self, *a):
        shutil.rmtree(self.path, ignore_errors=True)


def run(args, data, stdin=None, timeout=600):
    """Run quarry with --data; returns (rc, stdout, stderr)."""
    p = subprocess.run([BIN] + list(args) + ["--data", data], input=stdin,
                       capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def write_jsonl(path, docs):
    with open(path, "w") as f:
        for d in docs:
            f.write(d if isinstance(d, str) else json.dumps(d))
            f.write("\n")
