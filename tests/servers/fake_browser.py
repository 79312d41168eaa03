"""fake_browser: stands in for a person's browser in the OAuth login tests (`BROWSER="python fake_browser.py %s"`).

Opens the given authorization address with httpx and follows every redirect, as a browser would after the
person clicked "allow" (the fixture authorization server approves at once), which lands on the gateway's
loopback redirect. Exits 0 when the last page answered 200.
"""

import sys

import _common  # noqa: F401  (first: this folder has a numbers.py that shadows the standard one)
import httpx2 as httpx

response = httpx.get(sys.argv[1], follow_redirects=True, timeout=30)
sys.exit(0 if response.status_code == 200 else 1)
