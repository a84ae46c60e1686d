"""The pinned upstream: which upstream lines each of our sections mirrors, and the upstream text.

    manifest.py   reference/upstream.json (symbol -> upstream file and line range at the pin, our
                  section, docs anchor) and the check that source comments agree with it
    fetch.py      download the pinned upstream files into .cache/upstream/ and verify their sha256

Imports: the standard library only (torch, lazily, to read its bundled headers).
"""
