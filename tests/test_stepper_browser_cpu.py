"""CPU: the in-page trace player (docs/assets/stepper.js) in headless Chromium (Debian's /usr/bin/chromium,
driven by Playwright), both served from 127.0.0.1 and opened from file://. Clicking forward and back lands
on the right step: the highlighted line is the statement the step records, every lane's registers are the
emulator's bit for bit (recomputed here, not read from the page), the tree gains filled nodes on a merge
step, and no console error is logged and no request leaves the machine."""
from __future__ import annotations

import contextlib
import os
import tempfile
from urllib.parse import urlsplit

import numpy as np
import pytest

from reimpl import emulator
from reimpl.docsite import stepper as S
from reimpl.docsite.trace_tables import bits_hex, show
from reimpl.emulator import trace as T
from reimpl.emulator.trace import KINDS
from tests.site_helpers import CHROMIUM, CHROMIUM_ARGS, ROOT, built_site, serve

PAGE = "guide/stepping/index.html"


def emulated(name: str):
    """The preset's steps (block 0 of its statistics kernel, up to mean and rstd), emulated here."""
    x, offsets = S.inputs(name)
    with T.recording() as tr:
        emulator.native_layer_norm(x, (x.shape[-1],), None, None, 1e-5, offsets=offsets)
    kernel = tr.steps[0].kernel
    steps = [s for s in tr.steps if s.kernel == kernel and s.block == 0]
    return steps[:max(i for i, s in enumerate(steps) if s.kind in S.STATS_END) + 1]


def registers(steps, k: int, t: int) -> dict:
    """Thread t's register state after step k: its values at the last register step it executed."""
    regs = KINDS[steps[0].kind][3]
    for s in reversed(steps[:k + 1]):
        if KINDS[s.kind][3] == regs and s.active[t]:
            return {f: s.values[f][t] for f in regs}
    return {f: np.zeros((), steps[0].values[f].dtype) for f in regs}


def enc(v) -> str:
    return str(int(v)) if np.issubdtype(np.asarray(v).dtype, np.integer) else bits_hex(v)


def statement(file: str, a: int) -> str:
    return (ROOT / file).read_text().splitlines()[a - 1].strip()


@pytest.fixture(scope="module")
def browser():
    assert os.path.exists(CHROMIUM), f"{CHROMIUM} is missing: apt-get install -y chromium (scripts/test.sh does)"
    from playwright.sync_api import sync_playwright
    with sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(tempfile.mkdtemp(prefix="reimpl-chromium-"),
                                                    executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield ctx
        finally:
            ctx.close()


@contextlib.contextmanager
def opened(browser, how: str, rel: str):
    """A built page, served from 127.0.0.1 or opened from file://; yields (page, errors, requests)."""
    site = built_site()
    errors, requests = [], []
    page = browser.new_page()
    # From file://, Material's search cannot load its index (search/search_index.js): the theme's, not ours
    theirs = lambda m: how == "file" and "/search/" in (m.location or {}).get("url", "") + m.text  # noqa: E731
    page.on("console", lambda m: m.type == "error" and not theirs(m) and errors.append(m.text))
    page.on("pageerror", lambda e: how == "file" and "/search/" in str(e) or errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    try:
        if how == "served":
            with serve(site) as base:
                page.goto(f"{base}/{rel}", wait_until="networkidle")
                yield page, errors, [u for u in requests if urlsplit(u).netloc != urlsplit(base).netloc]
        else:
            page.goto((site / rel).as_uri(), wait_until="load")
            yield page, errors, [u for u in requests if not u.startswith("file://") and not u.startswith("data:")]
    finally:
        page.close()


@pytest.fixture(params=["served", "file"])
def stepping(request, browser):
    """The stepping page, opened one way or the other; yields (page, errors, requests)."""
    with opened(browser, request.param, PAGE) as got:
        yield got


def state(page) -> dict:
    """What the player shows now: step, preset, the highlighted lines, the register cells, the tree."""
    return page.evaluate("""() => {
      const box = document.querySelector('.stepper');
      const pane = box.querySelector('.stepper-src:not([hidden])');
      const tree = box.querySelector('.stepper-tree:not([hidden])');
      const cells = {};
      box.querySelectorAll('.stepper-regs tbody tr[data-thread]').forEach(tr => {
        cells[tr.dataset.thread] = {
          act: tr.classList.contains('act'), aux: tr.querySelector('.stepper-aux').textContent,
          vals: Array.from(tr.querySelectorAll('td.stepper-val')).map(td =>
            [td.dataset.field, td.dataset.bits, td.querySelector('code').textContent])};
      });
      return {
        step: Number(box.dataset.step), preset: box.dataset.preset,
        count: box.querySelector('.stepper-count').textContent,
        now: Array.from(pane.querySelectorAll('.sl.now')).map(e => [e.closest('.stepper-sec').dataset.file,
                                                                   Number(e.dataset.line), e.textContent]),
        site: Array.from(pane.querySelectorAll('.sl.site-now')).map(e => Number(e.dataset.line)),
        callee: pane.querySelectorAll('.sl.callee').length,
        nowVisible: (() => { const e = pane.querySelector('.sl.now'); if (!e) return false;
          const a = e.getBoundingClientRect(), b = pane.getBoundingClientRect();
          return a.top >= b.top && a.bottom <= b.bottom; })(),
        cells,
        filled: tree.querySelectorAll('.stt-node.filled').length,
        nowNodes: tree.querySelectorAll('.stt-node.now').length,
        result: Array.from(box.querySelectorAll('.stepper-result .stepper-rv')).map(e =>
          [e.dataset.field, e.dataset.bits, e.querySelector('code').textContent]),
      };
    }""")


def check_step(page, name: str, steps, k: int):
    """The page shows step k of preset `name` as the emulator computes it."""
    got = state(page)
    data = S.export(name)
    s = steps[k]
    assert (got["step"], got["preset"]) == (k, name)
    assert got["count"] == f"step {k + 1} / {len(steps)}"
    src = S.source_map(S.run(name).base)[s.kind]
    a, b = src["stmt"]
    assert [(f, n) for f, n, _ in got["now"]] == [(src["file"], n) for n in range(a, b + 1)]
    assert statement(src["file"], a) in got["now"][0][2]        # the highlighted line's own text
    assert got["site"] == list(range(src["site"][0], src["site"][1] + 1)) and got["nowVisible"]
    regs = [f for f in data["regs"]]
    assert set(got["cells"]) == {str(t) for t in data["tracked"]}
    for t in data["tracked"]:
        want = registers(steps, k, t)
        cell = got["cells"][str(t)]
        assert cell["vals"] == [[f, enc(want[f]), show(want[f])] for f in regs], (name, k, t)
        is_reg = KINDS[s.kind][3] == KINDS[steps[0].kind][3]
        assert cell["act"] == bool(is_reg and s.active[t])
        if cell["act"] and KINDS[s.kind][2] == "partner":
            assert cell["aux"] in (f"← t{int(s.aux[t])}", f"← t{int(s.aux[t])} (empty)", "← itself")
    if KINDS[s.kind][3] != KINDS[steps[0].kind][3]:   # a result step: its values, every thread's the same here
        t = int(np.flatnonzero(s.active)[0])
        assert got["result"] == [[f, enc(s.values[f][t]), show(s.values[f][t])] for f in KINDS[s.kind][3]]
    return got


def test_step_forward_and_back(stepping):
    page, errors, external = stepping
    name = "path_aligned"
    steps = emulated(name)
    box = page.locator(".stepper")
    check_step(page, name, steps, 0)
    for _ in range(6):
        box.locator(".stepper-fwd").click()
    check_step(page, name, steps, 6)
    for _ in range(3):
        box.locator(".stepper-back").click()
    got = check_step(page, name, steps, 3)                       # the last online step: leaves done
    assert steps[3].kind == "online" and steps[4].kind == "shfl_down"
    box.locator(".stepper-fwd").click()                         # the first shuffle round merges
    after = check_step(page, name, steps, 4)
    assert after["filled"] > got["filled"] and after["nowNodes"] > 0
    page.keyboard.press("ArrowRight")                           # the box has focus after a click
    check_step(page, name, steps, 5)
    box.locator(".stepper-last").click()
    check_step(page, name, steps, len(steps) - 1)               # rstd, in every thread
    assert errors == [] and external == []


def test_other_presets(stepping):
    page, errors, external = stepping
    box = page.locator(".stepper")
    name = "path_offset"
    steps = emulated(name)
    box.locator(".stepper-preset").select_option(name)
    check_step(page, name, steps, 0)
    k = next(i for i, s in enumerate(steps) if s.kind == "block_read")
    for _ in range(k):
        box.locator(".stepper-fwd").click()
    got = check_step(page, name, steps, k)
    assert "shared[lid]" in got["now"][0][2]
    box.locator(".stepper-last").click()
    check_step(page, name, steps, len(steps) - 1)               # moments: thread 0's mean and rstd
    name = "merge_order"
    steps = emulated(name)
    box.locator(".stepper-preset").select_option(name)
    before = check_step(page, name, steps, 0)
    box.locator(".stepper-last").click()
    end = check_step(page, name, steps, len(steps) - 1)
    assert end["filled"] > before["filled"]
    box.locator(".stepper-first").click()
    check_step(page, name, steps, 0)
    assert errors == [] and external == []


def test_values_read_as_the_trace_tables_print_them(stepping):
    """stepper.js prints a value from its bits as trace_tables.show does (the shortest decimal that reads
    back to the same float32), over random bits and the edges: zeros, subnormals, 1e-4 and 1e7, inf, NaN."""
    page, errors, _ = stepping
    rng = np.random.default_rng(0)
    v = np.concatenate([rng.integers(0, 2**32, 3000, dtype=np.uint64).astype(np.uint32).view(np.float32),
                        rng.standard_normal(500).astype(np.float32),
                        np.float32([0, -0.0, 1, -2, 0.1, 1e-4, 9.999999e-5, 1e7, 9999999, 16777216, 1e-45, 3.4e38,
                                    np.inf, -np.inf, np.nan, 0.5, 1234.5678, 1 / 3])])
    encs = [bits_hex(x) for x in v]
    got = page.evaluate("encs => encs.map(e => window.ReimplStepper.show(e, 'f32'))", encs)
    want = [show(x) for x in v]
    bad = [(e, g, w) for e, g, w in zip(encs, got, want) if g != w]
    assert not bad, bad[:10]
    assert page.evaluate("window.ReimplStepper.show('-1', 'i64')") == "-1" and errors == []


def test_on_the_kernels_upstream_page(browser):
    """The player under compute_stats on upstream/layer_norm_kernel/ (one preset, no selector) steps the
    same way; its "explained" link to cuWelfordCombine jumps within that page to the heading."""
    with opened(browser, "served", "upstream/layer_norm_kernel/") as (page, errors, external):
        name = "path_aligned"
        steps = emulated(name)
        box = page.locator(".stepper")
        assert box.count() == 1 and box.locator(".stepper-preset").count() == 0
        check_step(page, name, steps, 0)
        for _ in range(4):
            box.locator(".stepper-fwd").click()
        check_step(page, name, steps, 4)                         # the first shuffle round
        page.evaluate("window.notReloaded = true")
        box.locator('.stepper-sec[data-section="cuWelfordCombine"] .stepper-sec-head span a').click()
        page.wait_for_url("**/upstream/layer_norm_kernel/#cuWelfordCombine")
        assert page.evaluate("window.notReloaded === true")       # a jump within the page
        assert page.evaluate("document.getElementById('cuWelfordCombine').getBoundingClientRect().top") < 200
        assert errors == [] and external == []
