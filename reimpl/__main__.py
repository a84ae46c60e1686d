"""Command line: python -m reimpl {compile,plan,parity,bench,record-launches} ..."""
from .cli import main

raise SystemExit(main())
