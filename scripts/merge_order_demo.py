"""Print the merge-order demonstration (CPU only, no GPU): one float32 row's Welford (mean, variance)
merged along torch's tree and along other trees with the emulator's cuWelfordCombine, as bits.
The docs' pattern page renders the same at build time. Usage: python scripts/merge_order_demo.py [--json]"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reimpl.emulator import merge_order  # noqa: E402


def main(argv: list[str]) -> None:
    d = merge_order.demo()
    if "--json" in argv:
        print(json.dumps(d, indent=1))
        return
    print(f"row (seed {d['seed']}): {', '.join(f'{v:.9g}' for v in d['row'])}")
    for r in d["trees"].values():
        print(f"  {r['mean']} {r['var']}  {r['what']}")
    print(f"  {d['exact']['mean']} {d['exact']['var']}  exact, rounded once")


if __name__ == "__main__":
    main(sys.argv[1:])
