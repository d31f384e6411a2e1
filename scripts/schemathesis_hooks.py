"""Schemathesis hook: signs every request with the RongCloud header scheme so the fuzzer reaches
the handlers (an unsigned request only ever gets 401)."""
import hashlib
import os
import time
import uuid

import schemathesis

KEY = os.environ["ROOMCAST_APP_KEY"]
SECRET = os.environ["ROOMCAST_APP_SECRET"]


@schemathesis.hook
def before_call(context, case, **kwargs):
    nonce = uuid.uuid4().hex
    ts = str(int(time.time()))
    sig = hashlib.sha1((SECRET + nonce + ts).encode()).hexdigest()
    # Schemathesis fills the declared security headers with generated values; drop every
    # credential header (in any case) and sign for real.
    auth = {"app-key", "appkey", "nonce", "timestamp", "signature", "curtime", "checksum",
            "rc-app-key", "rc-nonce", "rc-timestamp", "rc-signature"}
    headers = {k: v for k, v in dict(case.headers or {}).items()
               if k.lower() not in auth and not k.lower().startswith("x-roomcast-")}
    headers.update({"App-Key": KEY, "Nonce": nonce, "Timestamp": ts, "Signature": sig})
    case.headers = headers
    # A before-send hook (PX-4) would make the server post every message to whatever host the
    # fuzzer invents (as a webhook endpoint would); the end-to-end tests cover it instead.
    if case.path == "/v1/settings" and isinstance(case.body, dict):
        case.body.pop("beforeSend", None)
        # A generated restCallsPerSecond of 1 or 2 makes every later call of the run a 429 (PX-1),
        # and a tiny roomMessagesPerSecond every later send a 42902 (QS-2): the fuzzer would rate
        # limit itself out of the handlers it is there to reach. Both bounds are tested in-process.
        case.body.pop("restCallsPerSecond", None)
        case.body.pop("roomMessagesPerSecond", None)


if os.environ.get("ROOMCAST_FUZZ_DEBUG"):
    @schemathesis.hook
    def after_call(context, case, response):
        if response.status_code == 401:
            print("401", case.method, case.formatted_path, dict(case.headers or {}).get("Nonce"), response.text[:200])
