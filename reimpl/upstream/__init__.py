"""The pinned upstream: which upstream lines each of our sections mirrors, and the upstream text.

    manifest.py   reference/upstream.json (symbol -> upstream file and line range at the pin, our
                  section, docs anchor) and the check that source comments agree with it
    fetch.py      download the pinned upstream files into .cache/upstream/ and verify their sha256

    releases.py   each newer torch release's own layer_norm_kernel.cu kernels, read off its wheel
    dispatch.py   what is known of newer releases' host dispatch

Layer: upstream. May import: device.
(cubin reading, for releases.py; torch lazily, to read its bundled headers.)
"""
