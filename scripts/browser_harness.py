"""Shared pieces of the real-browser tests (BX-3, BX-4): a roomcast process the tests can stop and
start again on the same port and data directory, signed REST calls (the native X-Roomcast-*
scheme), headless Chromium through Selenium, and a check that a page logged no error and no
failed request."""

import hashlib
import hmac
import json
import os
import secrets
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Roomcast:
    """One roomcast process on a fixed port and data directory, restartable."""

    def __init__(self, binary, data_dir, key, secret, extra=()):
        self.binary, self.data_dir, self.key, self.secret = binary, data_dir, key, secret
        self.extra = list(extra)
        self.port = free_port()
        self.proc = None
        self.log_path = os.path.join(data_dir, "roomcast.log")

    @property
    def base(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        log = open(self.log_path, "a")
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--data-dir", self.data_dir, "--app", f"{self.key}:{self.secret}",
             "--log-level", "warning", *self.extra], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 15
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(self.base + "/readyz", timeout=1) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            if self.proc.poll() is not None:
                raise RuntimeError("roomcast exited: " + open(self.log_path).read())
            time.sleep(0.05)
        raise RuntimeError("roomcast did not become ready")

    def stop(self, kill=False):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            self.proc.wait(timeout=15)
        self.proc = None

    def rest(self, method, path, body=None):
        """A signed call; returns (status, parsed JSON or None)."""
        data = b"" if body is None else json.dumps(body).encode()
        ts = str(int(time.time() * 1000))
        nonce = secrets.token_hex(12)
        canonical = "\n".join([method, path, ts, nonce, hashlib.sha256(data).hexdigest()])
        sig = hmac.new(self.secret.encode(), canonical.encode(), hashlib.sha256).hexdigest()
        headers = {"X-Roomcast-Key": self.key, "X-Roomcast-Timestamp": ts, "X-Roomcast-Nonce": nonce,
                   "X-Roomcast-Signature": sig}
        if body is not None:
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(self.base + path, data=data if body is not None else None, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                raw = r.read()
                return r.status, (json.loads(raw) if raw else None)
        except urllib.error.HTTPError as e:
            raw = e.read()
            return e.code, (json.loads(raw) if raw else None)

    def ok(self, method, path, body=None, expect=(200, 201)):
        status, answer = self.rest(method, path, body)
        assert status in expect, f"{method} {path}: {status} {answer}"
        return answer

    def token(self, user, ttl=3600, **extra):
        return self.ok("POST", f"/v1/users/{user}/tokens", {"ttlSeconds": ttl, **extra})["token"]


def browser(width=1280, height=900):
    """Headless Chromium (Debian's chromium and chromium-driver) with its console log kept."""
    options = Options()
    options.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={width},{height}", "--no-first-run", "--disable-extensions"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"))
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_script_timeout(30)
    return driver


def page_problems(driver, allow=()):
    """Console errors and failed requests the page logged since the last call (SEVERE entries:
    uncaught exceptions, console.error, and every failed network request)."""
    problems = []
    for entry in driver.get_log("browser"):
        if entry.get("level") != "SEVERE":
            continue
        message = entry.get("message", "")
        if any(a in message for a in allow):
            continue
        problems.append(message)
    return problems


def wait_until(predicate, timeout=10.0, interval=0.05, what="condition"):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")
