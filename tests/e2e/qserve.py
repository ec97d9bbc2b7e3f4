"""`quarry serve` for end-to-end tests: started on 127.0.0.1 with free ports
(port 0, read back from the startup log), always stopped by the test."""
import http.client
import json
import os
import random
import re
import signal
import subprocess
import time

from qtest import BIN


class Server:
    def __init__(self, data, workdir, pg=False, config=None, extra=()):
        self.log_path = os.path.join(workdir, "serve-%d.log" % random.randint(0, 10**9))
        args = [BIN, "serve", "--data", data, "--http", "127.0.0.1:0"]
        if pg:
            args += ["--pg", "127.0.0.1:0"]
        if config is not None:
            cfg = os.path.join(workdir, "serve-%d.json" % random.randint(0, 10**9))
            with open(cfg, "w") as f:
                json.dump(config, f)
            args += ["--config", cfg]
        self.log = open(self.log_path, "w")
        self.p = subprocess.Popen(args + list(extra), stdout=self.log, stderr=self.log)
        self.port = self.pg_port = None
        deadline = time.time() + 30
        while time.time() < deadline and self.p.poll() is None:
            text = self.text()
            m = re.search(r"serve started .*http=https?://127\.0\.0\.1:(\d+)/", text)
            if m:
                self.port = int(m.group(1))
                pm = re.search(r"serve pg=127\.0\.0\.1:(\d+)", text)
                self.pg_port = int(pm.group(1)) if pm else None
                break
            time.sleep(0.05)

    def text(self):
        with open(self.log_path) as f:
            return f.read()

    def conn(self, timeout=30):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def call(self, method, path, body=None, headers=None, timeout=30):
        """One request; (status, parsed JSON or text)."""
        return self.call_h(method, path, body, headers, timeout)[:2]

    def call_h(self, method, path, body=None, headers=None, timeout=30):
        """One request; (status, parsed JSON or text, the answer's headers with
        lowercase names)."""
        c = self.conn(timeout=timeout)
        h = dict(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
            h.setdefault("Content-Type", "application/json")
        if isinstance(body, str):
            body = body.encode()
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            data = r.read()
            hdrs = {k.lower(): v for k, v in r.getheaders()}
        finally:
            c.close()
        try:
            return r.status, json.loads(data), hdrs
        except ValueError:
            return r.status, data.decode("utf-8", "replace"), hdrs

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.p.poll() is None:
            self.p.send_signal(sig)
        try:
            rc = self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            rc = self.p.wait()
        self.log.close()
        return rc
