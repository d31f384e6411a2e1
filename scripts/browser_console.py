"""BX-3 in a real browser: the console at /console/, in headless Chromium, against a live roomcast.

It signs in with the app key and secret (kept in sessionStorage only), finds a room by id prefix,
shows a live event within a second of a REST call while observing the room (never as a member),
mutes a member (whose own page, using the client library, receives the room.ban event), stops and
resumes the room's distribution (QS-6) and shows its drops (QS-7), replays a dead letter, draws the charts, and works in a narrow window. Screenshots of each page are saved;
any console error or failed request fails the run. Its moderation view (MO-8) recalls a member's message (the member's page
gets message.recalled, the audit trail lists the recall) and adds a sensitive word (the member's next send with it is refused).
Run by scripts/browser-tests.sh."""

import os
import socket
import time

from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By

import browser_client
from browser_harness import browser, page_problems, wait_until


def closed_port():
    """A local port nobody listens on (webhook attempts to it fail at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def shot(driver, directory, name):
    path = os.path.join(directory, f"console-{name}.png")
    driver.save_screenshot(path)
    return path


def visible(driver, css):
    """The first element matching `css` if it is displayed (views re-render their lists, so an
    element found a moment ago may be gone: that counts as not yet)."""
    try:
        found = driver.find_elements(By.CSS_SELECTOR, css)
        return found[0] if found and found[0].is_displayed() else None
    except StaleElementReferenceException:
        return None


def text_of(driver, css):
    return driver.execute_script("const e = document.querySelector(arguments[0]); return e ? e.textContent : null", css)


def click(driver, css):
    """Clicks the element now matching `css` (found again, not a reference from before a re-render)."""
    def attempt():
        try:
            element = visible(driver, css)
            if element:
                element.click()
                return True
        except StaleElementReferenceException:
            return False
        return False
    wait_until(attempt, what=f"a click on {css}")


def run_all(gateway, origin, report, shots):
    room = "console-room"
    gateway.ok("POST", "/v1/rooms", {"roomId": room, "name": "Console Room", "keepAlive": True})
    gateway.ok("POST", "/v1/rooms", {"roomId": "other-room", "name": "Elsewhere"})
    # A webhook endpoint that cannot be reached: its messages become dead letters after one retry.
    hook = gateway.ok("POST", "/v1/webhooks", {"url": f"http://127.0.0.1:{closed_port()}/hook", "allowPrivateNetwork": True})
    hook_id = hook["endpoint"]["id"]

    member = browser()  # erin's own page, with the client library
    console = browser()
    try:
        browser_client.open_page(member, origin, gateway, "erin", room)
        member.execute_script("window.rc.bans = []; window.rc.client.on('room.ban', (e) => window.rc.bans.push(e.data));")

        # Sign in: the key and secret go to sessionStorage, never to localStorage.
        console.get(gateway.base + "/console/")
        wait_until(lambda: visible(console, "#signin-view"), what="the sign-in form")
        shot(console, shots, "signin")
        console.find_element(By.ID, "signin-key").send_keys(gateway.key)
        console.find_element(By.ID, "signin-secret").send_keys(gateway.secret)
        console.find_element(By.ID, "signin-submit").click()
        wait_until(lambda: visible(console, "#rooms-view"), what="the rooms view after sign-in")
        stored = console.execute_script("return [JSON.stringify(sessionStorage), JSON.stringify(localStorage)]")
        assert gateway.secret in stored[0] and gateway.secret not in stored[1], stored
        report("console: signed in (secret in sessionStorage only)")

        # Find the room by id prefix.
        prefix = console.find_element(By.ID, "rooms-prefix")
        prefix.clear()
        prefix.send_keys("console")
        console.find_element(By.ID, "rooms-search").click()
        wait_until(lambda: visible(console, f'tr[data-room-id="{room}"]'), what="the room in the search results")
        wait_until(lambda: not console.find_elements(By.CSS_SELECTOR, 'tr[data-room-id="other-room"]'), what="only matching rooms")
        online = text_of(console, f'tr[data-room-id="{room}"] [data-field="onlineCount"]')
        assert online == "1", f"online count {online!r}"
        shot(console, shots, "rooms")
        click(console, f'tr[data-room-id="{room}"]')
        wait_until(lambda: visible(console, '[data-testid="member-row"][data-user-id="erin"]'), what="erin in the member list")
        wait_until(lambda: console.find_element(By.ID, "events-state").get_attribute("data-observing") == "true",
                   what="the live stream observing the room")
        # The observer is no member: the member list and the online count are unchanged.
        members = gateway.ok("GET", f"/v1/rooms/{room}/members")["members"]
        assert [m["userId"] for m in members] == ["erin"], members
        report("console: found the room by prefix and opened it; the observer is not a member")

        # A live event within a second of a REST call.
        sent = time.time()
        gateway.ok("POST", f"/v1/rooms/{room}/messages", {"content": "live from REST"})
        wait_until(lambda: visible(console, 'li[data-testid="event"][data-ev="room.message"]'), timeout=5, interval=0.02,
                   what="the message in the live stream")
        latency = time.time() - sent
        assert latency < 1.0, f"live event after {latency:.2f} s"
        assert "live from REST" in text_of(console, 'li[data-ev="room.message"]')
        report(f"console: live event shown {latency * 1000:.0f} ms after the REST call")

        # Mute erin with a notification: her page receives room.ban, the console lists the mute.
        user = console.find_element(By.ID, "mod-user")
        user.clear()
        user.send_keys("erin")
        minutes = console.find_element(By.ID, "mod-minutes")
        minutes.clear()
        minutes.send_keys("5")
        notify = console.find_element(By.ID, "mod-notify")
        if not notify.is_selected():
            notify.click()
        click(console, "#mod-mute")
        wait_until(lambda: console.find_element(By.ID, "mod-status").get_attribute("data-result") == "ok", what="the mute answered")
        bans = wait_until(lambda: member.execute_script("return window.rc.bans"), what="erin's page receives room.ban")
        assert bans[0]["banType"] == 1 and bans[0]["userIdList"] == ["erin"], bans
        wait_until(lambda: visible(console, '#mutes-list [data-user-id="erin"]'), what="erin in the mute list")
        wait_until(lambda: visible(console, 'li[data-testid="event"][data-ev="room.ban"]'), what="the ban in the live stream")
        shot(console, shots, "room")
        report("console: muted erin; her page received room.ban (banType 1)")

        # QS-6, QS-7: the room's distribution state, stopped and resumed from the console (erin's page
        # receives nothing while it is stopped), and the server's drops per class.
        wait_until(lambda: console.find_element(By.ID, "distribution-state").get_attribute("data-stopped") == "false",
                   what="the distribution state (running)")
        wait_until(lambda: len(console.find_elements(By.CSS_SELECTOR, '#drops-body [data-testid="drops-row"]')) == 4,
                   what="the drops table, one row per class")
        assert "not tracked per room" in " ".join(text_of(console, "#drops-note").split()), text_of(console, "#drops-note")
        member.execute_script("window.rc.texts = []; window.rc.client.on('room.message', (e) => window.rc.texts.push(e.data.message.content));")
        click(console, "#distribution-toggle")
        wait_until(lambda: console.find_element(By.ID, "distribution-state").get_attribute("data-stopped") == "true",
                   what="the distribution stopped")
        assert gateway.ok("GET", f"/v1/rooms/{room}")["room"].get("distributionStopped") is True
        assert console.find_element(By.ID, "distribution-toggle").text == "Resume distribution"
        gateway.ok("POST", f"/v1/rooms/{room}/messages", {"content": "while stopped"})
        shot(console, shots, "room-distribution-stopped")
        click(console, "#distribution-toggle")
        wait_until(lambda: console.find_element(By.ID, "distribution-state").get_attribute("data-stopped") == "false",
                   what="the distribution resumed")
        gateway.ok("POST", f"/v1/rooms/{room}/messages", {"content": "after resume"})
        texts = wait_until(lambda: member.execute_script("return window.rc.texts"), what="erin's page receives the next message")
        assert texts == ["after resume"], texts
        report("console: stopped and resumed the room's distribution (erin got nothing while stopped); drops shown per class")

        # A dead letter, replayed from the console.
        wait_until(lambda: gateway.ok("GET", f"/v1/webhooks/{hook_id}/deliveries?status=dead")["deliveries"], timeout=20,
                   what="a dead letter")
        click(console, "#nav-webhooks")
        button = f'[data-endpoint-id="{hook_id}"] [data-testid="replay-button"]'
        wait_until(lambda: visible(console, button), what="a dead letter with a replay button")
        message_id = console.execute_script("return document.querySelector(arguments[0]).dataset.messageId", button)
        shot(console, shots, "webhooks")
        click(console, button)
        result = wait_until(lambda: console.execute_script(
            "const e = document.querySelector(arguments[0]); return e && e.dataset.queued",
            f'[data-endpoint-id="{hook_id}"] [data-testid="replay-result"]'), what="the replay answer")
        assert result == "1", result
        # The server queued it again: it is attempted anew (and, unreachable, dies again later).
        def attempted_again():
            page = gateway.ok("GET", f"/v1/webhooks/{hook_id}/deliveries?limit=50")["deliveries"]
            entry = next((d for d in page if d["messageId"] == message_id), None)
            return entry and (entry["status"] == "pending" or entry["attempts"] > 2)
        wait_until(attempted_again, what="the replayed message attempted again")
        report("console: replayed a dead letter (queued 1)")

        # Charts from /metrics.
        click(console, "#nav-metrics")
        wait_until(lambda: visible(console, "#chart-events"), what="the charts")
        time.sleep(4.5)  # two polls: rates need two samples
        assert console.find_element(By.ID, "charts-unavailable").is_displayed() is False
        shot(console, shots, "metrics")
        report("console: charts drawn with Chart.js from the gateway")

        # A narrow window: one column, still usable.
        console.set_window_size(420, 900)
        console.get(gateway.base + f"/console/#/rooms/{room}")
        wait_until(lambda: visible(console, '[data-testid="member-row"][data-user-id="erin"]'), what="the room view, narrow")
        width = console.execute_script("return document.documentElement.scrollWidth")
        assert width <= 440, f"the page scrolls sideways in a narrow window ({width} px)"
        shot(console, shots, "room-narrow")
        report("console: works in a 420 px window")

        for d, who in ((console, "console"), (member, "member page")):
            problems = page_problems(d)
            assert problems == [], f"{who}: {problems}"
        requests = console.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name).filter(n => !n.startsWith(location.origin))")
        assert requests == [], f"the console reached other hosts: {requests}"
        report("console: no console error, no failed request, no other host reached")
    except Exception:
        shot(console, shots, "failure")
        raise
    finally:
        console.quit()
        member.quit()


def sign_in(console, gateway):
    console.get(gateway.base + "/console/")
    wait_until(lambda: visible(console, "#signin-view"), what="the sign-in form")
    console.find_element(By.ID, "signin-key").send_keys(gateway.key)
    console.find_element(By.ID, "signin-secret").send_keys(gateway.secret)
    console.find_element(By.ID, "signin-submit").click()
    wait_until(lambda: visible(console, "#rooms-view"), what="the rooms view after sign-in")


SEND = """
const [room, text, done] = arguments;
window.rc.client.sendMessage(room, text).then(() => done("sent"), (e) => done(e && e.code !== undefined ? e.code : String(e)));
"""


def run_moderation(gateway, origin, report, shots):
    """MO-8: the console's moderation view. A member's message is recalled from the view: the member's
    own page receives message.recalled and the audit trail lists the recall (native, by the app
    server). A sensitive word added from the view refuses the member's next send holding it (21501)."""
    room = "moderated-room"
    gateway.ok("POST", "/v1/rooms", {"roomId": room, "keepAlive": True})
    member = browser()  # gina's own page, with the client library
    console = browser()
    try:
        browser_client.open_page(member, origin, gateway, "gina", room)
        member.execute_script("window.rc.recalls = []; window.rc.client.on('message.recalled', (e) => window.rc.recalls.push(e.data));")
        sign_in(console, gateway)
        click(console, "#nav-moderation")
        wait_until(lambda: visible(console, "#moderation-view"), what="the moderation view")
        field = console.find_element(By.ID, "modview-room")
        field.clear()
        field.send_keys(room)
        click(console, "#modview-watch")
        wait_until(lambda: console.find_element(By.ID, "modview-state").get_attribute("data-observing") == "true",
                   what="the moderation view observing the room")

        # Gina sends; the view shows it live with a recall button; recalling it reaches her page.
        assert member.execute_async_script(SEND, room, "regrettable words") == "sent"
        row = 'li[data-testid="modview-message"][data-sender="gina"]'
        wait_until(lambda: visible(console, row), what="gina's message in the moderation view")
        assert text_of(console, row + ' [data-field="content"]') == "regrettable words"
        message_id = console.execute_script("return document.querySelector(arguments[0]).dataset.messageId", row)
        shot(console, shots, "moderation")
        click(console, row + ' [data-testid="recall-button"]')
        recalls = wait_until(lambda: member.execute_script("return window.rc.recalls"), what="gina's page receives message.recalled")
        assert recalls[0]["messageId"] == message_id and recalls[0]["sender"] == "gina", recalls
        wait_until(lambda: console.execute_script("return document.querySelector(arguments[0]).dataset.recalled", row) == "true",
                   what="the message shown as recalled")
        audit_row = f'tr[data-testid="audit-row"][data-action="recall"][data-message-id="{message_id}"]'
        wait_until(lambda: visible(console, audit_row), what="the recall in the audit trail")
        assert text_of(console, audit_row + ' [data-field="surface"]') == "native"
        assert text_of(console, audit_row + ' [data-field="actor"]') == "app server"
        history = gateway.ok("GET", f"/v1/rooms/{room}/messages")["messages"]
        assert [(m["messageId"], m.get("recalled"), m["content"]) for m in history] == [(message_id, True, "")], history
        report("console: recalled gina's message from the moderation view; her page got message.recalled; the audit trail lists it")

        # A blocking word added from the view: gina's send holding it is refused, nobody gets it.
        word = console.find_element(By.ID, "words-word")
        word.clear()
        word.send_keys("forbidden")
        click(console, "#words-add")
        wait_until(lambda: visible(console, '#words-list [data-word="forbidden"]'), what="the word in the list")
        assert [w["word"] for w in gateway.ok("GET", "/v1/sensitive-words")["words"]] == ["forbidden"]
        refused = member.execute_async_script(SEND, room, "this is forbidden here")
        assert refused == 21501, refused
        wait_until(lambda: visible(console, 'tr[data-testid="audit-row"][data-action="sensitiveWordAdd"]'),
                   what="the word's addition in the audit trail")
        assert not console.find_elements(By.CSS_SELECTOR, f'{row}:not([data-recalled="true"])'), "the refused message reached the view"
        assert member.execute_async_script(SEND, room, "this is fine") == "sent"
        shot(console, shots, "moderation-audit")
        report("console: added a sensitive word from the moderation view; gina's send holding it was refused (21501)")

        # From the room view's link: the view opens on the room with its recent messages, the recalled one as recalled.
        console.get(gateway.base + f"/console/#/rooms/{room}")
        wait_until(lambda: visible(console, "#room-view"), what="the room view")
        click(console, "#room-moderate")
        wait_until(lambda: console.find_element(By.ID, "modview-state").get_attribute("data-observing") == "true",
                   what="the moderation view observing the room again")
        assert console.find_element(By.ID, "modview-room").get_attribute("value") == room
        recalled = f'li[data-testid="modview-message"][data-message-id="{message_id}"][data-recalled="true"]'
        wait_until(lambda: visible(console, recalled), what="the recalled message, from history, shown as recalled")
        report("console: the room view links to its moderation view, which shows the room's recent messages")

        for d, who in ((console, "console"), (member, "member page")):
            problems = page_problems(d)
            assert problems == [], f"{who}: {problems}"
    except Exception:
        shot(console, shots, "moderation-failure")
        raise
    finally:
        console.quit()
        member.quit()


def run_tags(gateway, origin, report, shots):
    """AU-1 in the console: a room's tags with how many present members carry each, and a message
    sent from the console to one tag, which reaches the member carrying it and not the other."""
    room = "tagged-room"
    gateway.ok("POST", "/v1/rooms", {"roomId": room, "keepAlive": True})
    vip, plain = browser(), browser()
    console = browser()
    try:
        browser_client.open_page(vip, origin, gateway, "vera", room)
        browser_client.open_page(plain, origin, gateway, "paul", room)
        gateway.ok("PUT", f"/v1/rooms/{room}/members/vera/tags", {"tags": ["vip", "cn"]})
        gateway.ok("PUT", f"/v1/rooms/{room}/members/paul/tags", {"tags": ["cn"]})
        sign_in(console, gateway)
        console.get(gateway.base + f"/console/#/rooms/{room}")
        wait_until(lambda: visible(console, "#room-view"), what="the room view")
        vip_row = 'tr[data-testid="tag-row"][data-tag="vip"]'
        cn_row = 'tr[data-testid="tag-row"][data-tag="cn"]'
        wait_until(lambda: visible(console, vip_row) and visible(console, cn_row), what="the room's tags")
        assert text_of(console, vip_row + ' [data-field="count"]') == "1"
        assert text_of(console, cn_row + ' [data-field="count"]') == "2"
        click(console, vip_row + ' [data-testid="tag-pick"]')
        assert console.find_element(By.ID, "tag-send-tag").get_attribute("value") == "vip"
        content = console.find_element(By.ID, "tag-send-content")
        content.send_keys("for vip only")
        click(console, "#tag-send")
        wait_until(lambda: "for vip only" in browser_client.rc(vip, "messages"), what="vera receives the message to vip")
        wait_until(lambda: text_of(console, "#tag-send-status").startswith("Sent"), what="the console's confirmation")
        # A message to everyone after it: paul gets that one and never the one to vip.
        gateway.ok("POST", f"/v1/rooms/{room}/messages", {"content": "for everyone"})
        wait_until(lambda: "for everyone" in browser_client.rc(plain, "messages"), what="paul receives the message to everyone")
        assert browser_client.rc(plain, "messages") == ["for everyone"], browser_client.rc(plain, "messages")
        shot(console, shots, "tags")
        for d, who in ((console, "console"), (vip, "vip page"), (plain, "plain page")):
            problems = page_problems(d)
            assert problems == [], f"{who}: {problems}"
        report("console: a room's tags with their member counts; a message sent to tag vip reached vera and not paul")
    except Exception:
        shot(console, shots, "tags-failure")
        raise
    finally:
        console.quit()
        vip.quit()
        plain.quit()
