"""Checks roomcast's webhook signatures with the `standardwebhooks` library from PyPI (WH-3).

Usage: python webhooks_verify.py ROOMCAST_BINARY

Starts a receiver on loopback and roomcast with a fresh data directory, adds an endpoint, causes
events, and verifies every delivery with standardwebhooks.Webhook(secret).verify(body, headers);
then rotates the secret and verifies a delivery with the old and with the new secret separately.
"""
import hashlib
import http.server
import json
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

APP, SECRET = "verifyapp", "verify-secret-0123456789"
received = []
lock = threading.Lock()


class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with lock:
            received.append((dict(self.headers), body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def call(port, method, path, body=None):
    nonce, ts = str(random.random()), str(int(time.time()))
    headers = {"App-Key": APP, "Nonce": nonce, "Timestamp": ts,
               "Signature": hashlib.sha1((SECRET + nonce + ts).encode()).hexdigest(), "Content-Type": "application/json"}
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method, headers=headers,
                                 data=json.dumps(body).encode() if body is not None else None)
    with urllib.request.urlopen(req) as r:
        return json.loads(r.read() or b"{}")


def wait_for(n, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        with lock:
            if len(received) >= n:
                return True
        time.sleep(0.05)
    return False


def main():
    receiver = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    port = free_port()
    data = tempfile.mkdtemp()
    proc = subprocess.Popen([sys.argv[1], "--port", str(port), "--data-dir", data, "--app", f"{APP}:{SECRET}", "--webhook-allow-private", APP, "--log-level", "warning"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        # Ready, not merely listening: until the node has started, signed calls get 503 (50300),
        # and /healthz answers 200 as soon as the port is open.
        for _ in range(300):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz")
                break
            except OSError:
                time.sleep(0.1)
        hook = f"http://127.0.0.1:{receiver.server_address[1]}/hook"
        endpoint = call(port, "POST", "/v1/webhooks", {"url": hook, "allowPrivateNetwork": True})["endpoint"]
        secret = endpoint["secret"]
        call(port, "POST", "/v1/rooms", {"roomId": "verify"})
        call(port, "POST", "/v1/rooms/verify/messages", {"content": "hello", "fromUserId": "server"})
        call(port, "POST", "/v1/rooms/verify/mutes", {"userIds": ["u1"], "minutes": 5})
        call(port, "POST", "/v1/rooms/verify/queue/batch", {"elements": {"k": "v"}})
        call(port, "DELETE", "/v1/rooms/verify")
        if not wait_for(4):
            print("webhooks-verify: FAIL, deliveries missing:", len(received))
            return 1
        time.sleep(0.3)
        verified = 0
        with lock:
            first = list(received)
        for headers, body in first:
            payload = Webhook(secret).verify(body, headers)
            assert payload["type"] and payload["data"]["appKey"] == APP, payload
            verified += 1
        # A tampered body must fail.
        headers, body = first[0]
        try:
            Webhook(secret).verify(body + b" ", headers)
            print("webhooks-verify: FAIL, a tampered body verified")
            return 1
        except WebhookVerificationError:
            pass
        # Rotation: the next delivery carries two signatures; each secret verifies it alone.
        new_secret = call(port, "POST", f"/v1/webhooks/{endpoint['id']}/rotate-secret")["endpoint"]["secret"]
        call(port, "POST", "/v1/rooms", {"roomId": "after-rotation"})
        if not wait_for(len(first) + 1):
            print("webhooks-verify: FAIL, no delivery after the rotation")
            return 1
        with lock:
            headers, body = received[-1]
        Webhook(secret).verify(body, headers)
        Webhook(new_secret).verify(body, headers)
        print(f"webhooks-verify: {verified + 1} deliveries verified with standardwebhooks (types: "
              f"{sorted({json.loads(b)['type'] for _, b in first})}); rotation verified with both secrets")
        return 0
    finally:
        proc.kill()
        receiver.shutdown()


if __name__ == "__main__":
    sys.exit(main())
