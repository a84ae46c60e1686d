"""The reading site's build: MkDocs hooks and everything they generate at build time.

    hooks.py      the MkDocs hooks (mkdocs.yml names this file): source pages, directives
    render.py     the `{% ... %}` directives: symbol sections, upstream permalinks, result tables
    diagrams.py   inline SVG diagrams (no CDN, no JavaScript)
    traces.py     step traces of tiny examples, emulated while the site builds
    links.py      the built site's internal links and anchors, checked

Imports: every layer below (reimpl.checks, reimpl.emulator, the mirror, reimpl.upstream); nothing
imports this package but the MkDocs hook and the tests.
"""
