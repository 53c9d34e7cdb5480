#!/usr/bin/env python3
"""The Message Hub portal in a real headless Chromium (Debian's chromium + chromium-driver,
driven by Selenium from PyPI; nothing is downloaded at run time).

An admin signs in, builds a channel -> area -> subject hierarchy, edits and deletes parts of it,
sends an Alert message that reaches the FCM emulator and the archive, and reads its delivery
status; a communicator sends an Information message and is kept out of the admin pages.
Then a web app on another origin (a page served from another port) registers a device with a
user token through the browser's fetch, as `server.cors_origins` lists its origin, and a page on
an origin not listed is refused by the browser. Every page is saved as a screenshot in --artifacts.

Usage: portal_test.py --herald .build/debug/herald --artifacts .build/browser-artifacts
"""
import argparse
import functools
import http.server
import json
import threading
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.support import expected_conditions as EC


class Process:
    """A herald subcommand on a free port, found by the URL it prints."""

    def __init__(self, argv, banner, env=None):
        self.log = tempfile.TemporaryFile()
        environment = {k: v for k, v in os.environ.items() if not k.startswith("HERALD_")}
        environment.update(env or {})
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.log, env=environment, text=True)
        deadline = time.time() + 60
        while time.time() < deadline:
            line = self.process.stdout.readline()
            match = re.search(r"http://127\.0\.0\.1:(\d+)", line) if line.startswith(banner) else None
            if match:
                self.url = f"http://127.0.0.1:{match.group(1)}"
                return
            if self.process.poll() is not None:
                break
        self.log.seek(0)
        raise RuntimeError(f"{argv} did not start: {self.log.read().decode()}")

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()


def page_server(directory):
    """A static page server on a free port: another origin than Herald's."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=directory)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


FETCH = """
const [url, token, done] = arguments;
fetch(url, {method: "POST", headers: {"Authorization": "Bearer " + token, "Content-Type": "application/json"},
            body: JSON.stringify({fcm_token: "browser-" + location.port})})
  .then(r => r.text().then(t => done(r.status + " " + t)), e => done("refused: " + e));
"""


def get_json(url):
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def post_json(url, key, body):
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST", headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


class Portal:
    def __init__(self, base, artifacts):
        options = webdriver.ChromeOptions()
        options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
        for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1000", "--disable-gpu"):
            options.add_argument(flag)
        service = Service(executable_path=shutil.which("chromedriver") or "/usr/bin/chromedriver")
        self.driver = webdriver.Chrome(service=service, options=options)
        self.base = base
        self.artifacts = artifacts
        self.shots = 0

    def open(self, path):
        self.driver.get(self.base + path)

    def shot(self, name):
        self.shots += 1
        path = os.path.join(self.artifacts, f"{self.shots:02d}-{name}.png")
        # Full page: grow the window to the document's height first.
        height = self.driver.execute_script("return document.documentElement.scrollHeight")
        self.driver.set_window_size(1280, max(1000, min(height + 40, 6000)))
        self.driver.save_screenshot(path)
        self.driver.set_window_size(1280, 1000)

    def click(self, css):
        """Clicks a button that loads a new page, and waits for that page."""
        page = self.driver.find_element(By.TAG_NAME, "html")
        self.find(css).click()
        WebDriverWait(self.driver, 10).until(lambda _: self.is_stale(page))

    @staticmethod
    def is_stale(element):
        """Whether the element's page was replaced. Chromedriver may answer a check made during the
        navigation with a generic error ("Node ... does not belong to the document") rather than a
        stale-element one: both mean the old page is gone."""
        try:
            element.is_enabled()
            return False
        except (StaleElementReferenceException, WebDriverException):
            return True

    def find(self, css):
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def text(self):
        return self.driver.find_element(By.TAG_NAME, "body").text

    def submit(self, form_css, fields):
        form = self.find(form_css)
        for name, value in fields.items():
            element = form.find_element(By.NAME, name)
            if element.tag_name == "select":
                Select(element).select_by_value(value)
            else:
                element.clear()
                element.send_keys(value)
        form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        # Every portal form loads a new page: wait for it before looking at it.
        WebDriverWait(self.driver, 10).until(lambda _: self.is_stale(form))

    def sign_in(self, key):
        self.open("/portal/login")
        self.find("#key").send_keys(key)
        self.find("#sign-in").click()
        WebDriverWait(self.driver, 10).until(EC.url_contains("/portal/send"))

    def sign_out(self):
        self.find("form.logout button").click()
        WebDriverWait(self.driver, 10).until(EC.url_contains("/portal/login"))


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--herald", required=True)
    parser.add_argument("--artifacts", required=True)
    args = parser.parse_args()
    args.herald = os.path.abspath(args.herald)
    os.makedirs(args.artifacts, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="herald-portal-")
    database = "sqlite:" + os.path.join(workdir, "herald.sqlite")
    account = os.path.join(workdir, "fcm.json")

    emulator = Process([args.herald, "fcm-emulator", "--port", "0", "--write-service-account", account], "FCM emulator listening on")
    admin_key = subprocess.run([args.herald, "keys", "generate"], capture_output=True, text=True, check=True).stdout.split()[-1]
    created = subprocess.run(
        [args.herald, "keys", "create", "--role", "communicator", "--name", "comms-team", "--database", database],
        capture_output=True, text=True, check=True, cwd=workdir,
    )
    communicator_key = created.stdout.split()[-1]
    pages = os.path.join(workdir, "pages")
    os.makedirs(pages)
    with open(os.path.join(pages, "app.html"), "w") as page:
        page.write("<!doctype html><title>A web app</title><p>A web app on another origin</p>")
    app_server, app_origin = page_server(pages)
    other_server, other_origin = page_server(pages)
    user_token_secret = "browser-test-user-token-secret-0123456789"
    herald = Process(
        [args.herald, "serve", "--port", "0", "--database", database],
        "Herald listening on",
        env={
            "HERALD_BOOTSTRAP_ADMIN_KEY": admin_key, "HERALD_FCM_CREDENTIALS": account, "HERALD_FCM_ENDPOINT": emulator.url,
            "HERALD_USER_TOKEN_SECRET": user_token_secret, "HERALD_SERVER_CORS_ORIGINS": app_origin,
        },
    )
    portal = Portal(herald.url, args.artifacts)
    try:
        # Sign-in: a wrong key is an error on the page, not a stack trace.
        portal.open("/portal/")
        check("/portal/login" in portal.driver.current_url, "an anonymous visitor lands on the login page")
        portal.shot("login")
        portal.find("#key").send_keys("hk_not_a_real_key_0000000000000000000000")
        portal.click("#sign-in")
        check("unknown or revoked" in portal.find("#login-error").text, "a wrong key shows an error")
        check("Traceback" not in portal.text() and "Fatal" not in portal.text(), "no stack trace")
        portal.shot("login-wrong-key")
        cookies = {cookie["name"]: cookie for cookie in portal.driver.get_cookies()}
        check("herald_session" not in cookies, "no session for a wrong key")

        portal.sign_in(admin_key)
        session = {cookie["name"]: cookie for cookie in portal.driver.get_cookies()}["herald_session"]
        check(session["httpOnly"] and session.get("sameSite") == "Strict", f"the session cookie is HttpOnly and SameSite=Strict: {session}")
        check(admin_key not in portal.driver.page_source and admin_key not in portal.driver.current_url, "the key is not in the page or URL")

        # Admin: build the hierarchy.
        portal.open("/portal/channels")
        check(not portal.driver.find_elements(By.CSS_SELECTOR, "#hierarchy-error"), "no error banner without an error")
        portal.shot("channels-empty")
        portal.submit("form[action$='create-channel']", {"name": "Campus", "desc": "Everything on campus"})
        portal.submit("form[aria-label='Add an area to Campus']", {"name": "Library", "desc": "Opening hours and news"})
        portal.submit("form[aria-label='Add a subject to Library']", {"name": "Opening hours", "desc": "When the doors open", "level": "Recommended", "distribution": "Alert"})
        portal.submit("form[aria-label='Add a subject to Library']", {"name": "Quiet notes", "desc": "Silent updates", "level": "", "distribution": "Information"})
        portal.submit("form[aria-label='Add a subject to Library']", {"name": "Temporary", "desc": "to delete", "level": "", "distribution": "Alert"})
        check("Opening hours" in portal.text() and "Quiet notes" in portal.text(), "the subjects are listed")
        # Validation: an empty name is refused with a message.
        portal.driver.execute_script("document.querySelector(\"form[aria-label='Add an area to Campus'] input[name=name]\").removeAttribute('required')")
        portal.submit("form[aria-label='Add an area to Campus']", {"name": " "})
        check("'name' is required" in portal.find("#hierarchy-error").text, "an empty area name is refused")
        portal.shot("channels-error")
        # Edit the area, and delete the temporary subject (the page asks first).
        portal.open("/portal/channels")
        portal.submit("form[aria-label='Edit area Library']", {"name": "Main library"})
        check("Main library" in portal.text(), "the area was renamed")
        row = [r for r in portal.driver.find_elements(By.CSS_SELECTOR, "tr[id^=subject-]") if r.find_element(By.NAME, "name").get_attribute("value") == "Temporary"][0]
        row.find_element(By.CSS_SELECTOR, "button.danger").click()
        WebDriverWait(portal.driver, 5).until(EC.alert_is_present()).accept()
        WebDriverWait(portal.driver, 10).until(lambda d: "Temporary" not in [e.get_attribute("value") for e in d.find_elements(By.CSS_SELECTOR, "tr[id^=subject-] input[name=name]")])
        portal.shot("channels")

        # Send an Alert message with the cascading selects.
        portal.open("/portal/send")
        Select(portal.find("#channel")).select_by_visible_text("Campus")
        Select(portal.find("#area")).select_by_visible_text("Main library")
        subject = Select(portal.find("#topic_key"))
        visible = [o.text for o in subject.options if o.is_displayed() and o.get_attribute("value")]
        check(len(visible) == 2, f"the area's two subjects are offered: {visible}")
        alert_option = [o for o in subject.options if "Opening hours" in o.text][0]
        subject.select_by_value(alert_option.get_attribute("value"))
        check(portal.find("#desc-field").is_displayed(), "an Alert subject asks for the push description")
        # A missing title is shown next to the field.
        portal.find("#desc").send_keys("Doors open at 8")
        portal.click("#send")
        check("must not be empty" in portal.find("#title-error").text, "the title error is next to the field")
        portal.shot("send-error")
        check(portal.find("#desc").get_attribute("value") == "Doors open at 8", "what was typed is kept")
        portal.find("#title").send_keys("Library opens early")
        portal.find("#message").send_keys("From Monday the library opens at 8:00.")
        portal.shot("send")
        portal.click("#send")
        msi_key = portal.find("#msi-key").text
        check(re.fullmatch(r"[0-9a-f]{24}", msi_key), f"the confirmation shows the msi_key: {msi_key}")
        check(portal.find("#send-another").get_attribute("href").endswith("/portal/send"), "a link back to the form")
        portal.shot("sent-alert")

        # It reached the FCM emulator: an Alert goes to both topic components.
        deadline = time.time() + 20
        pushed = []
        while time.time() < deadline:
            requests = get_json(emulator.url + "/emulator/messages")["requests"]
            pushed = [r["request"]["message"] for r in requests if r["status"] == 200 and r["request"]["message"].get("data", {}).get("msi_key") == msi_key]
            if len(pushed) >= 2:
                break
            time.sleep(0.2)
        check(len(pushed) == 2 and all("topic" in m for m in pushed), f"two topic pushes for the Alert at the emulator: {pushed}; the emulator saw {get_json(emulator.url + '/emulator/messages')}")
        check(any(m.get("notification", {}).get("title") == "Library opens early" for m in pushed), "the visible component carries the title")

        # The archive and the delivery status.
        portal.open("/portal/messages")
        check("Library opens early" in portal.find("#archive").text, "the archive lists the message")
        portal.shot("archive")
        Select(portal.find("#topic")).select_by_visible_text("Campus / Main library / Quiet notes")
        portal.click("form[aria-label=Filter] button")
        check("Library opens early" not in portal.text(), "the filter narrows the archive")
        portal.open(f"/portal/status?id={msi_key}")
        WebDriverWait(portal.driver, 20).until(lambda d: "delivered" in d.find_element(By.ID, "deliveries").text or d.refresh())
        check("fcm" in portal.find("#summary").text, "the status lists the fcm sink")
        check("fcm" in portal.find("#sinks").text and "ok" in portal.find("#sinks").text, "the status page shows each sink's health")
        # Each sink's last hour, drawn on the server: the fcm sink's deliveries just made show as bars.
        charts = portal.driver.find_elements(By.CSS_SELECTOR, "#timelines svg.timeline")
        check(len(charts) >= 2, f"a chart per sink on the status page, found {len(charts)}")
        check(len(portal.driver.find_elements(By.CSS_SELECTOR, "#timelines svg.timeline rect.delivered")) >= 1, "the deliveries just made are drawn")
        check(all(chart.size["width"] > 300 and chart.size["height"] > 100 for chart in charts), "the charts are drawn at a readable size")
        portal.shot("status")
        # A notification to a user: each user's delivery links to why it went where it did.
        sent = post_json(herald.url + "/api/notifications", admin_key, {"type": "comment", "title": "Why me", "user_ids": ["reader&co#1"]})
        portal.open(f"/portal/status?id={sent['id']}")
        WebDriverWait(portal.driver, 20).until(lambda d: "delivered" in d.find_element(By.ID, "deliveries").text or d.refresh())
        links = portal.driver.find_elements(By.CSS_SELECTOR, "#deliveries a.why")
        check(len(links) >= 1, "each user's delivery links to its explanation")
        links[0].click()
        check("reader&co#1" in portal.find("h1").text, "the link names the user, escaped")
        check("history" in portal.find("#why-sinks").text and "in_app" in portal.find("#why-sinks").text, "the why page lists every sink with its reasons")
        check("delivered" in portal.find("#why-deliveries").text, "and the user's deliveries with their outcomes")
        portal.shot("why")
        portal.sign_out()

        # A communicator sends an Information message and cannot manage the hierarchy.
        portal.sign_in(communicator_key)
        Select(portal.find("#topic_key")).select_by_visible_text("Campus / Main library / Quiet notes (Information)")
        check(not portal.find("#desc-field").is_displayed(), "no push description for Information")
        portal.find("#title").send_keys("Printer fixed")
        portal.find("#message").send_keys("The second-floor printer works again.")
        portal.click("#send")
        info_key = portal.find("#msi-key").text
        portal.shot("sent-information")
        deadline = time.time() + 20
        while time.time() < deadline:
            requests = get_json(emulator.url + "/emulator/messages")["requests"]
            info = [r["request"]["message"] for r in requests if r["status"] == 200 and r["request"]["message"].get("data", {}).get("msi_key") == info_key]
            if info:
                break
            time.sleep(0.2)
        check(len(info) == 1 and "notification" not in info[0], f"one silent topic push for Information: {info}")
        portal.open("/portal/channels")
        check("Admins only" in portal.text(), "communicators cannot manage the hierarchy")
        portal.shot("communicator-forbidden")
        portal.sign_out()
        portal.open("/portal/send")
        check("/portal/login" in portal.driver.current_url, "after sign-out the portal asks to sign in again")

        # A web app on another origin registers a device from the browser (CORS preflight and
        # all); one on an origin Herald does not list is refused by the browser.
        token = subprocess.run(
            [args.herald, "user-token", "--user", "web-ana"], capture_output=True, text=True, check=True,
            env={**{k: v for k, v in os.environ.items() if not k.startswith("HERALD_")}, "HERALD_USER_TOKEN_SECRET": user_token_secret},
        ).stdout.split()[-1]
        portal.driver.set_script_timeout(20)
        portal.driver.get(app_origin + "/app.html")
        answer = portal.driver.execute_async_script(FETCH, herald.url + "/api/notifications/register", token)
        check(answer.startswith("200 "), f"a listed origin registers through fetch: {answer}")
        portal.shot("cross-origin-app")
        portal.driver.get(other_origin + "/app.html")
        answer = portal.driver.execute_async_script(FETCH, herald.url + "/api/notifications/register", token)
        check(answer.startswith("refused: "), f"an origin not listed is refused by the browser: {answer}")
        print(f"portal browser test passed; {portal.shots} screenshots in {args.artifacts}")
    finally:
        portal.driver.quit()
        app_server.shutdown()
        other_server.shutdown()
        herald.stop()
        emulator.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except AssertionError as failure:
        print(f"portal browser test FAILED: {failure}", file=sys.stderr)
        sys.exit(1)
