"""Write reference/torch_versions.json: for torch 2.11.0, 2.12.1, 2.13.0 and 2.14.1, the kernels
layer_norm_kernel.cu instantiates in the wheel's sm_90 cubin (reimpl/upstream/releases.py), and
how each release's set compares with the pin's. Downloads the wheels (about 530 MB each) and
PyPI's cuobjdump into the ignored .cache/torch-releases/. Runs on any x86-64 Linux machine.
Usage: python scripts/torch_versions.py [--out reference/torch_versions.json]"""
import argparse
import datetime
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reimpl.upstream import releases  # noqa: E402
from reimpl.upstream.dispatch import DISPATCH_DIFFERENCES, SOURCES  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(releases.JSON))
    args = ap.parse_args()
    entries = {v: releases.describe(v) for v in releases.RELEASES}
    pin = entries[releases.PIN]
    doc = {"what": "layer_norm_kernel.cu's kernels in each torch release's sm_90 cubin, read off the PyPI "
                   "Linux x86-64 wheel; SASS and FP fingerprints are sha256 prefixes of the instructions "
                   "without addresses and encodings",
           "made_by": "python scripts/torch_versions.py", "date": datetime.date.today().isoformat(),
           "arch": releases.ARCH, "pin": releases.PIN, "dispatch_sources": SOURCES, "releases": {}}
    for v, e in entries.items():
        e["versus_pin"] = releases.compare(pin, e)
        e["dispatch_differences"] = DISPATCH_DIFFERENCES.get(v, [])
        doc["releases"][v] = e
        c = e["versus_pin"]
        print(f"{v}: {c['kernels']} kernels, -{len(c['removed'])} +{len(c['added'])}, "
              f"{len(c['signature_changed'])} signatures changed, SASS identical {c['sass_identical']}/{c['common']}, "
              f"FP sequence identical {c['fp_identical']}/{c['common']}")
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
