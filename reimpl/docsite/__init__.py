"""The reading site's build: MkDocs hooks and everything they generate at build time.

    hooks.py            the MkDocs hooks (mkdocs.yml names this file): source pages, directives
    render.py           the `{% ... %}` directives, dispatched to the modules that draw them
    source_links.py     symbol sections, upstream permalinks, links to our source pages
    parity_tables.py    the parity and numerics pages' tables from results/
    diagrams.py         inline SVG diagrams (no CDN, no JavaScript)
    traces.py           the trace and code directives of a page, and the trace CLI
    trace_collect.py    a trace directive's case, emulated, and its kernel's steps
    trace_tables.py     the step tables
    trace_trees.py      the reduction tree, built from a trace
    trace_tree_svg.py   the reduction tree, drawn
    code_excerpts.py    our code included by line range; the emulator's source pages
    links.py            the built site's internal links and anchors, checked

Layer: docsite. May import: testing, checks, emulator, ladder, mirror, upstream.
Nothing imports this package but the MkDocs hook and the tests.
"""
