# SPDX-License-Identifier: MIT
"""A minimal W3C WebDriver client over chromedriver (standard library only),
for the browser tests: start a headless Chromium, load a page, find and
click elements, run a script, take screenshots, read the console."""
import base64
import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request

ELEMENT = "element-6066-11e4-a52e-4f735466cecf"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WebDriverError(Exception):
    pass


class Browser:
    def __init__(self, chromedriver, chromium, profile_dir, width=1250, height=1400):
        self.port = free_port()
        self.log = open(os.path.join(profile_dir, "chromedriver.log"), "w")
        self.proc = subprocess.Popen([chromedriver, "--port=%d" % self.port],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self.base = "http://127.0.0.1:%d" % self.port
        deadline = time.monotonic() + 30
        while True:
            try:
                self._call("GET", "/status")
                break
            except (OSError, WebDriverError):
                if time.monotonic() > deadline:
                    self.proc.kill()
                    raise
                time.sleep(0.1)
        caps = {"browserName": "chrome",
                "goog:loggingPrefs": {"browser": "ALL"},
                "goog:chromeOptions": {
                    "binary": chromium,
                    "args": ["--headless", "--no-sandbox", "--disable-gpu",
                             "--disable-dev-shm-usage", "--no-first-run",
                             "--disable-background-networking", "--disable-component-update",
                             "--disable-sync", "--user-data-dir=" + os.path.join(profile_dir, "p"),
                             "--window-size=%d,%d" % (width, height)]}}
        r = self._call("POST", "/session", {"capabilities": {"alwaysMatch": caps}})
        self.session = "/session/" + r["sessionId"]

    def _call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=120) as resp:
                out = json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as e:
            raise WebDriverError("%s %s: %s" % (method, path, e.read()[:2000])) from None
        return out.get("value")

    def cmd(self, method, path, body=None):
        return self._call(method, self.session + path, body)

    def get(self, url):
        self.cmd("POST", "/url", {"url": url})

    def find(self, css):
        return self.cmd("POST", "/element", {"using": "css selector", "value": css})[ELEMENT]

    def find_all(self, css):
        return [e[ELEMENT] for e in
                self.cmd("POST", "/elements", {"using": "css selector", "value": css})]

    def click(self, css):
        self.cmd("POST", "/element/%s/click" % self.find(css), {})

    def script(self, js, *args):
        return self.cmd("POST", "/execute/sync", {"script": js, "args": list(args)})

    def screenshot(self, path):
        with open(path, "wb") as f:
            f.write(base64.b64decode(self.cmd("GET", "/screenshot")))

    def console(self):
        """The browser's console entries since the last call: [{level, message}]."""
        return self.cmd("POST", "/se/log", {"type": "browser"}) or []

    def close(self):
        try:
            self.cmd("DELETE", "")
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            self.log.close()


def shift_click(browser, css):
    """Clicks the element with Shift held (the W3C actions API): one tick
    per action; Shift goes up a tick after the button, so that the click
    event sees it held."""
    eid = browser.find(css)
    shift = "\ue008"
    browser.cmd("POST", "/actions", {"actions": [
        {"type": "key", "id": "kbd", "actions": [
            {"type": "keyDown", "value": shift}, {"type": "pause", "duration": 0},
            {"type": "pause", "duration": 0}, {"type": "pause", "duration": 0},
            {"type": "keyUp", "value": shift}]},
        {"type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"}, "actions": [
            {"type": "pause", "duration": 0},
            {"type": "pointerMove", "origin": {ELEMENT: eid}, "x": 0, "y": 0},
            {"type": "pointerDown", "button": 0}, {"type": "pointerUp", "button": 0},
            {"type": "pause", "duration": 0}]}]})
    browser.cmd("DELETE", "/actions")


def type_into(browser, css, text):
    browser.cmd("POST", "/element/%s/value" % browser.find(css), {"text": text})


def click_at(browser, x, y):
    """A mouse click at viewport point (x, y), on whatever element is there."""
    browser.cmd("POST", "/actions", {"actions": [
        {"type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"}, "actions": [
            {"type": "pointerMove", "origin": "viewport", "x": int(x), "y": int(y)},
            {"type": "pointerDown", "button": 0}, {"type": "pointerUp", "button": 0}]}]})
    browser.cmd("DELETE", "/actions")
