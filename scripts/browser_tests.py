"""The browser checks (BX-3, BX-4, TR-3) against a live roomcast in headless Chromium: the client
library (browser_client.py), its transport fallback through a local proxy (browser_transport.py)
and the console (browser_console.py). Screenshots of the console go to
--screenshots. Exits non-zero on the first failure."""

import argparse
import os
import shutil
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import browser_client  # noqa: E402
import browser_console  # noqa: E402
import browser_transport  # noqa: E402
from browser_harness import Roomcast  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--screenshots", required=True)
    args = p.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.makedirs(args.screenshots, exist_ok=True)
    data = tempfile.mkdtemp(prefix="roomcast-browser-")
    grace = 3
    key, secret = "browserapp", "browser-secret-0123456789"
    # Webhook attempts to a closed local port: one quick retry, then a dead letter (the console replays it).
    gateway = Roomcast(args.bin, data, key, secret, extra=[
        "--token-grace", str(grace), "--webhook-allow-private", key, "--webhook-retry-schedule", "1s"])
    gateway.start()
    origin = browser_client.AppOrigin(gateway, os.path.join(root, "clients", "examples", "chat.html"))
    passed = 0

    def report(line):
        nonlocal passed
        passed += 1
        print(f"  ok  {line}", flush=True)

    started = time.time()
    try:
        browser_client.test_two_pages_exchange_messages(gateway, origin, report)
        browser_client.test_reconnect_resumes_every_missed_event(gateway, origin, report)
        browser_client.test_token_refresh_through_get_token(gateway, origin, report, grace)
        browser_client.test_readme_example_page(gateway, origin, report)
        browser_transport.run_all(gateway, origin, report, grace)
        browser_console.run_all(gateway, origin, report, args.screenshots)
        browser_console.run_moderation(gateway, origin, report, args.screenshots)
        browser_console.run_tags(gateway, origin, report, args.screenshots)
    except Exception:
        traceback.print_exc()
        print("roomcast log:\n" + open(gateway.log_path).read()[-4000:])
        sys.exit(1)
    finally:
        origin.close()
        gateway.stop()
        shutil.rmtree(data, ignore_errors=True)
    print(f"browser checks: {passed} passed in {time.time() - started:.0f} s; screenshots in {args.screenshots}")


if __name__ == "__main__":
    main()
