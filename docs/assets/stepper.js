/* The in-page trace player (reimpl/docsite/stepper.py writes its HTML and data at build time).
 *
 * Each .stepper box carries its presets' step traces as JSON in <script type="application/json"
 * class="stepper-data"> (inline, so the page works from file:// too), the CUDA source as one element per
 * line (.sl[data-line]), and one reduction tree per preset whose nodes, edges and labels carry data-pos,
 * the step that made them. This script moves a cursor over the steps: it highlights the step's
 * statement, fills the lane table with the registers as they stand after the step, and fills the tree
 * up to the step. No dependencies, no network.
 *
 * Values travel as bits: float32 as 8 hex digits, float64 as 16, integers in decimal. They are shown
 * as the shortest decimal that reads back to the same value (as the trace tables on the site show them).
 */
(function () {
  "use strict";
  if (window.ReimplStepper) return;

  var view = new DataView(new ArrayBuffer(8));

  function decode(enc, type) {
    if (type === "i64") return Number(enc);
    if (type === "f64") {
      view.setUint32(0, parseInt(enc.slice(0, 8), 16));
      view.setUint32(4, parseInt(enc.slice(8), 16));
      return view.getFloat64(0);
    }
    view.setUint32(0, parseInt(enc, 16));
    return view.getFloat32(0);
  }

  // The fewest significant digits that read back to v (positive) in its own type, as [digits, exponent]:
  // the nearest decimal of that length, a tie going to the even digit (as numpy's Dragon4 does; JavaScript's
  // toPrecision would round it up).
  function shortest(v, type) {
    var max = type === "f64" ? 17 : 9;
    var reads = function (s) { var b = parseFloat(s); return (type === "f64" ? b : Math.fround(b)) === v; };
    var exact = v.toExponential(99).split("e");          // enough digits to see a tie
    var all = exact[0].replace(".", ""), e0 = Number(exact[1]);
    for (var p = 1; p <= max; p++) {
      var s = v.toPrecision(p);
      if (!reads(s) && p < max) continue;
      var e = Number(Number(s).toExponential(p - 1).split("e")[1]);
      var d = Number(s).toExponential(p - 1).split("e")[0].replace(".", "");
      if (/^50*$/.test(all.slice(p)) && Number(all[p - 1]) % 2 === 0) {   // a tie, and the digit below is even
        var down = all.slice(0, p);
        if (reads(down[0] + "." + down.slice(1) + "e" + e0)) return [down, e0];
      }
      return [d, e];
    }
  }

  // numpy's format_float_positional / _scientific (unique, trim "-"), as trace_tables.show uses them
  function show(enc, type) {
    if (type === "i64") return String(enc);
    var v = decode(enc, type);
    if (isNaN(v)) return "nan";
    if (!isFinite(v)) return v > 0 ? "inf" : "-inf";
    var neg = v < 0 || Object.is(v, -0);
    var a = Math.abs(v);
    if (a === 0) return neg ? "-0" : "0";
    var sh = shortest(a, type);
    var digits = sh[0].replace(/0+$/, "") || "0";
    var exp = sh[1];
    var out;
    if (a < (type === "f64" ? 1e-4 : Math.fround(1e-4)) || a >= 1e7) {   // numpy compares in the value's type
      out = digits[0] + (digits.length > 1 ? "." + digits.slice(1) : "") + "e" + (exp < 0 ? "-" : "+") +
        (Math.abs(exp) < 10 ? "0" : "") + Math.abs(exp);
    } else if (exp >= 0) {
      var whole = digits.slice(0, exp + 1);
      while (whole.length < exp + 1) whole += "0";
      var frac = digits.slice(exp + 1);
      out = whole + (frac ? "." + frac : "");
    } else {
      out = "0." + new Array(-exp).join("0") + digits;
    }
    return (neg ? "-" : "") + out;
  }

  function bits(enc, type) {
    return type === "i64" ? "" : "0x" + enc;
  }

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  var ABBR = { count: "count", n: "n", nf: "nf", mean: "mean", sigma2: "sigma2", m2: "m2" };
  var AUX_HEAD = { partner: "partner", slot: "slot", element: "element", none: "" };

  function Player(box) {
    this.box = box;
    this.data = JSON.parse(box.querySelector("script.stepper-data").textContent).presets;
    this.names = box.getAttribute("data-presets").split(" ");
    this.select = box.querySelector(".stepper-preset");
    this.range = box.querySelector(".stepper-range");
    this.count = box.querySelector(".stepper-count");
    this.table = box.querySelector(".stepper-regs table");
    this.where = box.querySelector(".stepper-where");
    this.says = box.querySelector(".stepper-says");
    this.result = box.querySelector(".stepper-result");
    this.states = {};
    var self = this;
    var on = function (sel, fn) {
      box.querySelector(sel).addEventListener("click", function () { fn(); box.focus({ preventScroll: true }); });
    };
    on(".stepper-first", function () { self.go(0); });
    on(".stepper-back", function () { self.go(self.step - 1); });
    on(".stepper-fwd", function () { self.go(self.step + 1); });
    on(".stepper-last", function () { self.go(self.trace.steps.length - 1); });
    this.range.addEventListener("input", function () { self.go(Number(self.range.value)); });
    if (this.select) this.select.addEventListener("change", function () { self.load(self.select.value); });
    box.addEventListener("keydown", function (ev) {
      var t = ev.target.tagName;
      if (t === "SELECT" || t === "INPUT" || ev.altKey || ev.ctrlKey || ev.metaKey) return;
      var k = { ArrowRight: 1, ArrowLeft: -1 }[ev.key];
      if (k) self.go(self.step + k);
      else if (ev.key === "Home") self.go(0);
      else if (ev.key === "End") self.go(self.trace.steps.length - 1);
      else return;
      ev.preventDefault();
    });
    box.classList.add("stepper-ready");
    this.load(this.names[0]);
  }

  // The registers of every shown thread after each step: states[k][i] = [enc, ...] in trace.regs order
  Player.prototype.snapshots = function (tr) {
    var idx = {}, i, k;
    tr.tracked.forEach(function (t, j) { idx[t] = j; });
    var cur = tr.tracked.map(function () {
      return tr.regs.map(function (f) { return tr.types[f] === "i64" ? "0" : (tr.types[f] === "f64" ? "0000000000000000" : "00000000"); });
    });
    var out = [];
    out.zero = cur;   // before the first step: every register zero, as the kernels initialise them
    for (k = 0; k < tr.steps.length; k++) {
      var s = tr.steps[k];
      if (s.regs) {
        cur = cur.slice();
        var col = tr.regs.map(function (f) { return s.fields.indexOf(f); });
        for (i = 0; i < s.rows.length; i++) {
          var r = s.rows[i];
          cur[idx[r[0]]] = col.map(function (c) { return r[2 + c]; });
        }
      }
      out.push(cur);
    }
    return out;
  };

  Player.prototype.load = function (name) {
    var box = this.box, tr = this.data[name];
    this.name = name;
    this.trace = tr;
    if (!this.states[name]) this.states[name] = this.snapshots(tr);
    box.setAttribute("data-preset", name);
    if (this.select) this.select.value = name;
    var base = tr.kernel.split("<")[0];
    box.querySelectorAll(".stepper-caption, .stepper-tree").forEach(function (e) {
      e.hidden = e.getAttribute("data-preset") !== name;
    });
    box.querySelectorAll(".stepper-src").forEach(function (e) {
      e.hidden = e.getAttribute("data-src") !== base;
    });
    this.pane = box.querySelector('.stepper-src[data-src="' + base + '"]');
    this.tree = box.querySelector('.stepper-tree[data-preset="' + name + '"]');
    this.treeParts = Array.prototype.slice.call(this.tree.querySelectorAll("[data-pos]"));
    this.range.max = String(tr.steps.length - 1);
    var rest = tr.threads - tr.tracked.length;
    box.querySelector(".stepper-regs-head").textContent = "Each lane's registers after this step: " + tr.regs_say +
      ". Shown: the " + tr.tracked.length + " threads that hold data at some step" +
      (rest ? "; the other " + rest + " hold empty states throughout." : ".");
    this.buildTable();
    this.step = -1;
    this.go(0);
  };

  Player.prototype.buildTable = function () {
    var tr = this.trace;
    var head = el("tr");
    ["thread", "lane"].forEach(function (h) { head.appendChild(el("th", "", h)); });
    this.auxHead = head.appendChild(el("th", "stepper-aux"));
    tr.regs.forEach(function (f) { head.appendChild(el("th", "", ABBR[f] || f)); });
    var thead = this.table.tHead, tbody = this.table.tBodies[0];
    thead.textContent = "";
    thead.appendChild(head);
    tbody.textContent = "";
    this.rows = {};
    var warps = {}, ncol = head.children.length, self = this;
    tr.tracked.forEach(function (t) { warps[Math.floor(t / 32)] = 1; });
    var many = Object.keys(warps).length > 1, last = -1;
    tr.tracked.forEach(function (t) {
      var w = Math.floor(t / 32);
      if (many && w !== last) {
        var sep = el("tr", "stepper-warp");
        var td = el("td", "", "warp " + w);
        td.colSpan = ncol;
        sep.appendChild(td);
        tbody.appendChild(sep);
        last = w;
      }
      var row = el("tr");
      row.setAttribute("data-thread", t);
      var id = row.appendChild(el("td", "", String(t)));
      if (tr.blockDim[1] > 1) id.title = "threadIdx (" + (t % tr.blockDim[0]) + ", " + Math.floor(t / tr.blockDim[0]) + ")";
      row.appendChild(el("td", "", String(t % 32)));
      var aux = row.appendChild(el("td", "stepper-aux"));
      var cells = tr.regs.map(function (f) {
        var td = el("td", "stepper-val");
        td.setAttribute("data-field", f);
        td.appendChild(el("code"));
        td.appendChild(el("span", "stepper-bits"));
        row.appendChild(td);
        return td;
      });
      tbody.appendChild(row);
      self.rows[t] = { tr: row, aux: aux, cells: cells };
    });
  };

  Player.prototype.auxText = function (s, t, a) {
    if (s.aux === "partner") {
      if (a === t) return "← itself";
      return "← t" + a + (this.trace.tracked.indexOf(a) < 0 ? " (empty)" : "");
    }
    if (s.aux === "slot") {
      if (a < 0) return "identity";
      return (/write/.test(s.kind) ? "→ slot " : "← slot ") + a;
    }
    if (s.aux === "element") return "x[" + a + "]";
    return "";
  };

  Player.prototype.go = function (k) {
    var tr = this.trace, n = tr.steps.length;
    k = Math.max(0, Math.min(n - 1, k));
    if (k === this.step) return;
    this.step = k;
    var s = tr.steps[k], box = this.box, self = this;
    box.setAttribute("data-step", k);
    this.range.value = String(k);
    this.count.textContent = "step " + (k + 1) + " / " + n;
    box.querySelector(".stepper-first").disabled = box.querySelector(".stepper-back").disabled = k === 0;
    box.querySelector(".stepper-fwd").disabled = box.querySelector(".stepper-last").disabled = k === n - 1;

    // what the step is
    this.where.textContent = s.func + " · " + s.kind + " #" + s.index + (s.detail ? " · " + s.detail : "") +
      " · " + s.n_active + " of " + tr.threads + " threads";
    this.says.textContent = s.says;

    // the source: the statement, the function it calls, the REIMPL_TRACE that records it
    var pane = this.pane;
    pane.querySelectorAll(".sl.now, .sl.callee, .sl.site-now").forEach(function (e) {
      e.classList.remove("now", "callee", "site-now");
    });
    var mark = function (file, a, b, cls) {
      // a file's sections do not overlap, so (file, line) names one element
      var first = null;
      for (var i = a; i <= b; i++) {
        var line = pane.querySelector('.stepper-sec[data-file="' + file + '"] .sl[data-line="' + i + '"]');
        if (line) { line.classList.add(cls); first = first || line; }
      }
      return first;
    };
    s.src.callee.forEach(function (c) { mark(c[0], c[1], c[2], "callee"); });
    mark(s.src.file, s.src.site[0], s.src.site[1], "site-now");
    var now = mark(s.src.file, s.src.stmt[0], s.src.stmt[1], "now");
    if (now) {
      var top = now.offsetTop - pane.clientHeight / 3;
      if (now.offsetTop < pane.scrollTop + 8 || now.offsetTop > pane.scrollTop + pane.clientHeight - 40) {
        pane.scrollTop = Math.max(0, top);
      }
    }

    // the registers after this step
    var all = this.states[this.name], state = all[k], prev = k > 0 ? all[k - 1] : all.zero;
    var act = {};
    if (s.regs) s.rows.forEach(function (r) { act[r[0]] = r[1]; });
    this.auxHead.textContent = s.regs ? AUX_HEAD[s.aux] : "";
    tr.tracked.forEach(function (t, i) {
      var row = self.rows[t], on = Object.prototype.hasOwnProperty.call(act, t);
      row.tr.classList.toggle("act", on);
      row.aux.textContent = on ? self.auxText(s, t, act[t]) : "";
      tr.regs.forEach(function (f, j) {
        var td = row.cells[j], enc = state[i][j], type = tr.types[f];
        td.setAttribute("data-bits", enc);
        td.firstChild.textContent = show(enc, type);
        td.lastChild.textContent = bits(enc, type);
        td.classList.toggle("chg", prev[i][j] !== enc);
      });
    });

    // a result step (compute_stats' return, rstd, moments): its values
    this.result.textContent = "";
    if (!s.regs) {
      var line = function (who, vals) {
        var p = el("div", "stepper-res");
        p.appendChild(el("span", "stepper-who", who));
        s.fields.forEach(function (f, j) {
          var type = tr.types[f], v = p.appendChild(el("span", "stepper-rv"));
          v.setAttribute("data-field", f);
          v.setAttribute("data-bits", vals[j]);
          v.appendChild(document.createTextNode(f + " = "));
          v.appendChild(el("code", "", show(vals[j], type)));
          v.appendChild(el("span", "stepper-bits", bits(vals[j], type)));
        });
        self.result.appendChild(p);
      };
      if (s.all) line(s.n_active === tr.threads ? "every thread:" : s.n_active + " threads:", s.all);
      else s.rows.forEach(function (r) { line("thread " + r[0] + ":", r.slice(2)); });
    }

    // the tree, filled up to this step
    this.treeParts.forEach(function (e) {
      var p = Number(e.getAttribute("data-pos"));
      e.classList.toggle("filled", p >= 0 && p <= k);
      e.classList.toggle("now", p === k);
    });
    var first = this.tree.querySelector(".stt-node.now");
    if (first) {
      var tb = this.tree.getBoundingClientRect(), nb = first.getBoundingClientRect();
      if (nb.top < tb.top || nb.bottom > tb.bottom) this.tree.scrollTop += nb.top - tb.top - this.tree.clientHeight / 3;
      if (nb.left < tb.left || nb.right > tb.left + this.tree.clientWidth) {
        this.tree.scrollLeft += nb.left - tb.left - this.tree.clientWidth * 2 / 3;
      }
    }
  };

  function initAll() {
    document.querySelectorAll(".stepper:not(.stepper-ready)").forEach(function (box) {
      try {
        box.stepper = new Player(box);
      } catch (err) {
        box.classList.add("stepper-broken");
        throw err;
      }
    });
  }

  window.ReimplStepper = { show: show, init: initAll };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", initAll);
  else initAll();
  // Material's instant navigation swaps pages without a reload; it announces each one on document$
  if (window.document$ && typeof window.document$.subscribe === "function") window.document$.subscribe(initAll);
})();
