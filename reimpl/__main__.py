"""Command line: python -m reimpl {compile,plan,doctor,parity,bench,record-launches,trace,fetch-upstream} ..."""
from .cli import main

raise SystemExit(main())
