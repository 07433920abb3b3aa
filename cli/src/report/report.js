/* SPDX-License-Identifier: MIT */
/* The page of `mimprof report`: draws the run's data (the JSON in
 * #data, written by report_data.c) as SVG. No library, no network.
 *
 * Data: names[], stacks[] (name ids, leaf first), sites[] (name ids of
 * each band), moments[] in time order, each with its exact totals (tot,
 * obj, alloc, b: the bands, the last one the rest; ages: age seconds and
 * bytes, flat; top: name id, flat, cum, flat) and its kept stacks (st:
 * stack id, age seconds or -1, bytes, flat) with the merged rest (oth,
 * noth). */
'use strict';
var D = JSON.parse(document.getElementById('data').textContent);
var NS = 'http://www.w3.org/2000/svg';
var AGES = [0, 1, 3, 10, 30, 60, 180, 600, 1800, 3600, 10800, 21600, 43200, 86400, 259200, 604800];
var PALETTE = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1',
  '#ff9da7', '#9c755f', '#79706e', '#86bcb6', '#d37295', '#8cd17d', '#b6992d', '#499894'];
var REST = '#c8c8c8';
var state = {a: -1, b: -1, older: -1, draws: 0};
var reports = [];  /* indexes of the moments that are reports (not peaks) */

function $(id) { return document.getElementById(id); }
function esc(s) {
  return String(s).replace(/[&<>"']/g, function (c) {
    return {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c];
  });
}
function bytes(v) {
  var u = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'], a = Math.abs(v), i = 0;
  while (a >= 1024 && i < u.length - 1) { a /= 1024; i++; }
  return (v < 0 ? '-' : '') + (i ? a.toFixed(2) : String(a)) + u[i];
}
function age(s) {
  if (s < 0) return 'no age';
  if (s < 60) return s + 's';
  if (s < 3600) return Math.floor(s / 60) + 'm' + (s % 60 ? s % 60 + 's' : '');
  if (s < 86400) return Math.floor(s / 3600) + 'h' + (s % 3600 >= 60 ? Math.floor(s % 3600 / 60) + 'm' : '');
  return Math.floor(s / 86400) + 'd' + (s % 86400 >= 3600 ? Math.floor(s % 86400 / 3600) + 'h' : '');
}
function t0() { return D.moments.length ? D.moments[0].t : 0; }
function elapsed(t) {
  var s = (t - t0()) / 1000;
  if (s < 120) return '+' + s.toFixed(s < 10 ? 1 : 0) + 's';
  if (s < 7200) return '+' + (s / 60).toFixed(1) + 'm';
  return '+' + (s / 3600).toFixed(1) + 'h';
}
function clock(t) { return new Date(t).toISOString().replace('T', ' ').replace('Z', ' UTC'); }
function siteName(i) {
  return D.sites[i].map(function (n) { return D.names[n]; }).join(' < ') || '(no frames)';
}
function hue(name) {  /* warm, stable per name (as mimprof flame) */
  var h = 2166136261;
  for (var i = 0; i < name.length; i++) { h ^= name.charCodeAt(i); h = Math.imul(h, 16777619) >>> 0; }
  return 'rgb(' + (205 + h % 50) + ',' + ((h >>> 8) % 230) + ',' + ((h >>> 20) % 55) + ')';
}
function kindName(m) {
  return m.k === 'p' ? "the window's peak" : m.k === 'a' ? 'a threshold report' : 'a report';
}

/* ---- header ---- */
function drawHeader() {
  var ms = D.moments, np = 0, na = 0;
  ms.forEach(function (m) { if (m.k === 'p') np++; else if (m.k === 'a') na++; });
  /* pid -1: the service's windows, every process of the tree merged */
  $('title').textContent = 'mimprof report: ' + (D.program || 'process') +
    (D.pid === -1 ? '' : ' (pid ' + D.pid + ')');
  $('summary').textContent = ms.length + ' profiles over ' +
    (ms.length ? elapsed(ms[ms.length - 1].t).slice(1) : '0s') + ' from ' +
    (ms.length ? clock(ms[0].t) : '-') + ': ' + reports.length + ' reports, ' + np +
    ' peaks, ' + na + ' threshold reports.';
  var notes = [];
  notes.push('<div>Reduced for size: the heap chart draws the ' + D.sites.length +
    ' sites (' + (D.opts.siteFrames === 1 ? 'allocating functions' : 'innermost ' +
    D.opts.siteFrames + ' frames') + ') with the most memory at any moment, the rest as one ' +
    'band; each moment keeps its ' + D.opts.stacks + ' largest stacks for its flame graph ' +
    'and merges the rest into one frame. Totals, bands, ages and the top table are exact.</div>');
  if (D.processes.length > 1)
    notes.push('<div>Other processes in the input (mimprof report --pid PID): ' +
      D.processes.filter(function (p) { return p[0] !== D.pid; }).map(function (p) {
        if (p[0] === -1)
          return esc('the service, all processes merged per window (without --pid; ' + p[2] +
            ' files)');
        return esc(p[0] + ' (' + (p[1] || '?') + ', ' + p[2] + ' files, ' + bytes(p[3]) + ')');
      }).join(', ') + '</div>');
  if (D.skipped.length)
    notes.push('<div class="skipped" id="skipped">Skipped ' + D.skipped.length +
      ' file(s): ' + D.skipped.map(function (s) {
        return '<span class="skip">' + esc(s[0]) + '</span> (' + esc(s[1]) + ')';
      }).join('; ') + '</div>');
  $('notes').innerHTML = notes.join('');
}

/* ---- the heap over time ---- */
var X0 = 70, X1 = 1190, heapH = 320, Y0 = 10, Y1 = 290;
function xOf(t) {
  var ms = D.moments, a = ms[0].t, b = ms[ms.length - 1].t;
  return b > a ? X0 + (t - a) / (b - a) * (X1 - X0) : (X0 + X1) / 2;
}
function yScale(max) { return function (v) { return Y1 - (max > 0 ? v / max : 0) * (Y1 - Y0); }; }
function ticks(max) {
  var step = Math.pow(1024, Math.floor(Math.log(Math.max(max, 1)) / Math.log(1024)));
  while (max / step > 8) step *= 2;
  while (max / step < 3 && step > 1) step /= 2;
  var v = [];
  for (var x = 0; x <= max; x += step) v.push(x);
  return v;
}
function drawHeap() {
  var ms = D.moments, k = D.sites.length, max = 0, out = [];
  ms.forEach(function (m) { max = Math.max(max, m.tot, m.mem[0], m.mem[1]); });
  var y = yScale(max * 1.05);
  out.push('<g class="axis">');
  ticks(max * 1.05).forEach(function (v) {
    out.push('<line x1="' + X0 + '" x2="' + X1 + '" y1="' + y(v) + '" y2="' + y(v) + '"/>' +
      '<text x="' + (X0 - 4) + '" y="' + (y(v) + 4) + '" text-anchor="end">' + bytes(v) + '</text>');
  });
  var nt = Math.min(8, ms.length);
  for (var i = 0; i < nt; i++) {
    var t = ms[0].t + (ms[ms.length - 1].t - ms[0].t) * i / Math.max(1, nt - 1);
    out.push('<text x="' + xOf(t) + '" y="' + (Y1 + 16) + '" text-anchor="middle">' + elapsed(t) + '</text>');
  }
  out.push('</g>');
  /* Stacked bands over every moment, the peaks too (a spike freed
   * between two reports shows where it happened): band j between the
   * sums of bands 0..j-1 and 0..j. */
  var cum = ms.map(function () { return 0; });
  for (var j = 0; j <= k; j++) {
    var top = [], bot = [];
    ms.forEach(function (m, r) {
      var x = xOf(m.t).toFixed(1);
      bot.push(x + ',' + y(cum[r]).toFixed(1));
      cum[r] += m.b[j];
      top.push(x + ',' + y(cum[r]).toFixed(1));
    });
    var name = j < k ? siteName(j) : 'the rest';
    out.push('<polygon class="band" data-band="' + j + '" fill="' + (j < k ? PALETTE[j % PALETTE.length] : REST) +
      '" points="' + top.concat(bot.reverse()).join(' ') + '"><title>' + esc(name) + '</title></polygon>');
  }
  [[0, 'rss', '#000', 'RSS'], [1, 'resident', '#7b3294', "allocator's resident bytes"]].forEach(function (l) {
    var pts = reports.filter(function (mi) { return ms[mi].mem[l[0]] >= 0; }).map(function (mi) {
      return xOf(ms[mi].t).toFixed(1) + ',' + y(ms[mi].mem[l[0]]).toFixed(1);
    });
    if (pts.length)
      out.push('<polyline class="line-' + l[1] + '" fill="none" stroke="' + l[2] +
        '" stroke-width="1.5" points="' + pts.join(' ') + '"><title>' + l[3] + '</title></polyline>');
  });
  /* Hit areas: from midway to the previous report to midway to the next. */
  reports.forEach(function (mi, r) {
    var x = xOf(ms[mi].t), a = r ? (x + xOf(ms[reports[r - 1]].t)) / 2 : X0 - 4,
      b = r + 1 < reports.length ? (x + xOf(ms[reports[r + 1]].t)) / 2 : X1 + 4;
    out.push('<rect class="hit moment" data-i="' + mi + '" x="' + a.toFixed(1) + '" y="' + Y0 +
      '" width="' + Math.max(1, b - a).toFixed(1) + '" height="' + (Y1 - Y0) + '"><title>' +
      esc(ms[mi].f + ' ' + elapsed(ms[mi].t) + ': ' + bytes(ms[mi].tot) + ' in use') + '</title></rect>');
  });
  ms.forEach(function (m, mi) {
    var x = xOf(m.t).toFixed(1);
    if (m.k === 'a')
      out.push('<line class="above" x1="' + x + '" x2="' + x + '" y1="' + Y0 + '" y2="' + Y1 + '"/>' +
        '<text class="above-mark moment" data-i="' + mi + '" x="' + x + '" y="' + (Y0 + 12) +
        '" text-anchor="middle">&#9888;<title>' + esc((m.why || 'threshold report') + ' (' + m.f + ')') + '</title></text>');
    if (m.k === 'p') {
      var py = y(m.tot);
      out.push('<path class="peak moment" data-i="' + mi + '" d="M' + x + ',' + (py - 9).toFixed(1) +
        ' l-6,10 h12 z"><title>' + esc('peak ' + bytes(m.tot) + ' at ' + elapsed(m.t) + ' (' + m.f + ')') + '</title></path>');
    }
  });
  out.push('<g id="sel"></g>');
  $('heap').innerHTML = out.join('');
  var leg = [];
  for (var j2 = 0; j2 <= k; j2++)
    leg.push('<span><i style="background:' + (j2 < k ? PALETTE[j2 % PALETTE.length] : REST) + '"></i>' +
      esc(j2 < k ? siteName(j2) : 'the rest') + '</span>');
  leg.push('<span><i style="background:#000;height:2px"></i>RSS</span>');
  leg.push('<span><i style="background:#7b3294;height:2px"></i>allocator resident</span>');
  $('legend').innerHTML = leg.join('');
}
function drawSelection() {
  var out = [];
  [['a', state.a], ['b', state.b]].forEach(function (s) {
    if (s[1] < 0) return;
    var x = xOf(D.moments[s[1]].t).toFixed(1);
    out.push('<line class="sel-' + s[0] + '" x1="' + x + '" x2="' + x + '" y1="' + Y0 + '" y2="' + Y1 + '"/>');
  });
  $('sel').innerHTML = out.join('');
}
function drawRate() {
  var ms = D.moments, pts = [], max = 0;
  for (var r = 0; r < reports.length; r++) {
    /* bytes allocated in the report's interval (its duration, else the
     * time since the report before) */
    var m = ms[reports[r]], dt = m.dur > 0 ? m.dur / 1000 : r ? (m.t - ms[reports[r - 1]].t) / 1000 : 0;
    if (m.alloc >= 0 && dt > 0) { pts.push([m.t, m.alloc / dt]); max = Math.max(max, m.alloc / dt); }
  }
  var h = 90, y = function (v) { return h - 14 - (max > 0 ? v / max : 0) * (h - 24); }, out = [];
  out.push('<text x="' + (X0 - 4) + '" y="' + (y(max) + 4) + '" text-anchor="end">' + bytes(max) + '/s</text>');
  out.push('<text x="' + (X0 - 4) + '" y="' + (y(0) + 4) + '" text-anchor="end">0</text>');
  if (pts.length)
    out.push('<polyline fill="none" stroke="#4e79a7" stroke-width="1.5" points="' + pts.map(function (p) {
      return xOf(p[0]).toFixed(1) + ',' + y(p[1]).toFixed(1);
    }).join(' ') + '"/>');
  else
    out.push('<text x="' + X0 + '" y="40">no allocation figures (one report, or no alloc_space)</text>');
  $('rate').innerHTML = out.join('');
}

/* ---- a moment ---- */
function entries(m, older) {
  /* The kept stacks passing the age filter, as {s: stack, v: bytes}. */
  var out = [], st = m.st;
  for (var i = 0; i < st.length; i += 3)
    if (older < 0 || (st[i + 1] >= 0 && st[i + 1] >= older)) out.push({s: D.stacks[st[i]], v: st[i + 2]});
  return out;
}
function withRest(m, older, list) {
  if (older < 0 && m.noth > 0) list.push({s: null, v: m.oth, rest: m.noth});
  return list;
}
function funcTotals(list) {
  var flat = new Map(), cum = new Map();
  list.forEach(function (e) {
    if (!e.s) return;
    if (e.s.length) flat.set(e.s[0], (flat.get(e.s[0]) || 0) + e.v);
    var seen = new Set();
    e.s.forEach(function (n) { if (!seen.has(n)) { seen.add(n); cum.set(n, (cum.get(n) || 0) + e.v); } });
  });
  return {flat: flat, cum: cum};
}
function drawRecon(m) {
  var rss = m.mem[0], res = m.mem[1], live = m.mem[3], prof = m.mem[4], terms, note = '';
  if (rss < 0) {
    $('recon').innerHTML = '<text x="8" y="30">no memory figures in this profile' +
      (m.k === 'p' ? " (a window's peak: see the reports around it)" : '') + '</text>';
    $('recon-note').textContent = '';
    return;
  }
  live = Math.max(live, 0); prof = Math.max(prof, 0);
  if (res >= 0) {
    var a = Math.min(res, rss);
    terms = [['live', 'live heap', Math.min(live, Math.max(0, a - prof)), '#4e79a7'],
      ['profiler', 'profiler', Math.min(prof, a), '#edc948'],
      ['slack', 'allocator slack', Math.max(0, a - live - prof), '#f28e2b'],
      ['outside', 'outside the allocator', rss - a, '#9c9c9c']];
    if (live + prof > a)
      note = 'The estimated live heap and the profiler exceed the allocator\'s resident bytes by ' +
        bytes(live + prof - a) + ' (blocks not written yet are not resident; the estimate has its ' +
        'tolerance): the bar shows the resident part.';
  } else {
    terms = [['live', 'live heap', Math.min(live, rss), '#4e79a7'],
      ['profiler', 'profiler', Math.min(prof, Math.max(0, rss - live)), '#edc948'],
      ['unexplained', 'unexplained', Math.max(0, rss - live - prof), '#bbb']];
    note = 'Not split into allocator slack and outside: this report gives no resident figure of the allocator.';
  }
  var W = 540, x = 10, out = ['<text x="10" y="14">RSS ' + bytes(rss) + (m.mem[5] ? ' (' + esc(m.mem[5]) + ')' : '') + '</text>'];
  terms.forEach(function (t) {
    var w = rss > 0 ? t[2] / rss * W : 0;
    out.push('<g class="term" data-term="' + t[0] + '" data-v="' + t[2] + '"><rect x="' + x.toFixed(1) +
      '" y="20" width="' + w.toFixed(1) + '" height="22" fill="' + t[3] + '"/><title>' + t[1] + ' ' +
      bytes(t[2]) + '</title></g>');
    x += w;
  });
  terms.forEach(function (t, i) {  /* the legend, two per row */
    var lx = 10 + (i % 2) * 270, ly = 52 + Math.floor(i / 2) * 15;
    out.push('<rect x="' + lx + '" y="' + ly + '" width="10" height="10" fill="' + t[3] + '"/><text x="' +
      (lx + 13) + '" y="' + (ly + 9) + '">' + t[1] + ' ' + bytes(t[2]) + '</text>');
  });
  $('recon').innerHTML = out.join('');
  $('recon-note').textContent = note;
}
function drawAges(m) {
  var a = m.ages, max = 0, out = [], n = a.length / 2;
  for (var i = 0; i < a.length; i += 2) max = Math.max(max, a[i + 1]);
  var bw = Math.min(60, 520 / Math.max(1, n));
  for (var j = 0; j < n; j++) {
    var v = a[2 * j + 1], h = max > 0 ? v / max * 70 : 0, x = 20 + j * bw;
    out.push('<g class="age" data-age="' + a[2 * j] + '" data-v="' + v + '"><rect x="' + x + '" y="' + (80 - h) +
      '" width="' + (bw - 4) + '" height="' + h + '" fill="' + (state.older >= 0 && a[2 * j] >= state.older ? '#e15759' : '#76b7b2') +
      '"/><text x="' + (x + bw / 2 - 2) + '" y="94" text-anchor="middle">' + age(a[2 * j]) +
      '</text><title>' + bytes(v) + ' ' + (a[2 * j] < 0 ? 'without an age' : 'at least ' + age(a[2 * j]) + ' old') + '</title></g>');
  }
  if (!n) out.push('<text x="10" y="40">nothing in use</text>');
  $('ages').innerHTML = out.join('');
}
function drawTop(m, list) {
  var rows = [], total = m.tot, note;
  if (state.older < 0) {
    for (var i = 0; i < m.top.length; i += 3) rows.push([m.top[i], m.top[i + 1], m.top[i + 2]]);
    note = '(exact; ' + rows.length + ' rows)';
  } else {
    var ft = funcTotals(list);
    total = 0; list.forEach(function (e) { total += e.v; });
    ft.cum.forEach(function (c, n) { rows.push([n, ft.flat.get(n) || 0, c]); });
    rows.sort(function (x, y) { return y[1] - x[1] || y[2] - x[2] || (D.names[x[0]] < D.names[y[0]] ? -1 : 1); });
    rows = rows.slice(0, D.opts.topRows);
    note = '(in use at least ' + age(state.older) + ' old, from the kept stacks)';
  }
  var out = ['<tr><th>flat</th><th>flat%</th><th>sum%</th><th>cum</th><th>cum%</th><th class="name">function</th></tr>'],
    sum = 0, pct = function (v) { return total ? (100 * v / total).toFixed(2) + '%' : '-'; };
  rows.forEach(function (r) {
    sum += r[1];
    out.push('<tr data-name="' + esc(D.names[r[0]]) + '" data-flat="' + r[1] + '" data-cum="' + r[2] + '"><td>' +
      bytes(r[1]) + '</td><td>' + pct(r[1]) + '</td><td>' + pct(sum) + '</td><td>' + bytes(r[2]) +
      '</td><td>' + pct(r[2]) + '</td><td class="name">' + esc(D.names[r[0]]) + '</td></tr>');
  });
  $('top').innerHTML = out.join('');
  $('top-note').textContent = 'total ' + bytes(total) + ' ' + note;
}
function drawMoment() {
  var m = D.moments[state.a];
  $('moment').hidden = false;
  $('m-title').textContent = m.f + ': ' + kindName(m) + ' at ' + elapsed(m.t) + ' (' + clock(m.t) + '), ' +
    bytes(m.tot) + ' in use';
  $('m-why').textContent = m.why || '';
  drawRecon(m);
  drawAges(m);
  var list = entries(m, state.older);
  withRest(m, state.older, list);
  var shown = 0; list.forEach(function (e) { shown += e.v; });
  $('fg-note').textContent = state.older >= 0 ? '(at least ' + age(state.older) + ' old: ' + bytes(shown) + ')' :
    m.noth ? '(' + m.noth + ' smaller stacks merged into one frame)' : '';
  $('older-note').textContent = state.older >= 0 ? bytes(shown) + ' of the kept stacks' : '';
  FG.main.set(list, null);
  drawTop(m, list);
}

/* ---- flame graphs ---- */
function Flame(svgId, detailsId, diff) {
  this.svg = $(svgId); this.details = $(detailsId); this.diff = diff; this.zoom = null; this.term = '';
  var self = this;
  this.svg.addEventListener('click', function (e) {
    var g = e.target.closest('g.f');
    if (g) { self.zoom = self.nodes[+g.getAttribute('data-k')]; self.draw(); }
  });
  this.svg.addEventListener('mouseover', function (e) {
    var g = e.target.closest('g.f');
    if (g) self.details.textContent = g.querySelector('title').textContent;
  });
}
Flame.prototype.set = function (list, base) {
  /* A tree from the root: node {n: name, v: value, b: base value, kids: Map, up}. */
  var root = {n: 'all', v: 0, b: 0, kids: new Map(), up: null, d: 0};
  function add(e, key) {
    root[key] += e.v;
    var cur = root, s = e.s === null ? [] : e.s;
    var path = e.s === null ? ['[' + e.rest + ' other stacks]'] : s.slice().reverse().map(function (n) { return D.names[n]; });
    path.forEach(function (name) {
      var c = cur.kids.get(name);
      if (!c) { c = {n: name, v: 0, b: 0, kids: new Map(), up: cur, d: cur.d + 1, rest: e.s === null}; cur.kids.set(name, c); }
      c[key] += e.v;
      cur = c;
    });
  }
  list.forEach(function (e) { if (e.v > 0) add(e, 'v'); });
  if (base) base.forEach(function (e) { if (e.v > 0) add(e, 'b'); });
  this.root = root; this.zoom = null;
  this.draw();
};
Flame.prototype.draw = function () {
  var W = 1200, H = 16, PAD = 10, z = this.zoom || this.root, out = [], nodes = [], maxd = 0, self = this;
  var total = z.v, scale = total > 0 ? (W - 2 * PAD) / total : 0, re = null, low = this.term.toLowerCase();
  if (this.term) { try { re = new RegExp(this.term, 'i'); } catch (err) { re = null; } }
  var frames = [], matched = 0;
  /* Parents of the zoomed node, full width. */
  for (var p = z.up; p; p = p.up) frames.push({node: p, x: 0, w: W - 2 * PAD, parent: true});
  (function walk(n, x) {
    var w = n.v * scale;
    frames.push({node: n, x: x, w: w});
    var kids = Array.from(n.kids.values()).sort(function (a, b) { return a.n < b.n ? -1 : a.n > b.n ? 1 : 0; });
    var cx = x, tiny = 0, tn = 0;
    kids.forEach(function (c) {
      if (c.v <= 0) return;
      if (c.v * scale < 0.5) { tiny += c.v; tn++; return; }
      walk(c, cx); cx += c.v * scale;
    });
    if (tn) frames.push({merged: tn, v: tiny, d: n.d + 1, x: cx, w: tiny * scale});
  })(z, 0);
  frames.forEach(function (f) { var d = f.node ? f.node.d : f.d; if (d > maxd) maxd = d; });
  var height = (maxd + 1) * H + 4;
  frames.forEach(function (f) {
    var n = f.node, d = n ? n.d : f.d, name = n ? n.n : '[' + f.merged + ' frames merged]';
    var y = height - (d + 1) * H, v = n ? n.v : f.v, fill;
    if (!n) fill = '#aaa';
    else if (self.diff) {
      var delta = n.v - n.b, rel = Math.min(1, Math.abs(delta) / Math.max(n.v, n.b, 1));
      var c = Math.round(255 - 200 * rel);
      fill = delta > 0 ? 'rgb(255,' + c + ',' + c + ')' : delta < 0 ? 'rgb(' + c + ',' + c + ',255)' : 'rgb(235,235,235)';
    } else fill = n.rest ? '#bbb' : hue(name);
    var hit = n && self.term && (re ? re.test(name) : name.toLowerCase().indexOf(low) >= 0);
    if (hit) fill = 'rgb(230,0,230)';
    if (hit && !f.parent) {
      var covered = false;
      for (var q = n.up; q && q !== z.up; q = q.up) if (q.hit) covered = true;
      if (!covered) matched += n.v;
    }
    if (n) n.hit = hit && !f.parent;
    var k = nodes.length; nodes.push(n || z);
    var tip = name + ' (' + bytes(v) + ', ' + (total ? (100 * v / total).toFixed(2) : '0') + '%' +
      (self.diff && n ? '; was ' + bytes(n.b) + ', ' + (n.v - n.b >= 0 ? '+' : '') + bytes(n.v - n.b) : '') + ')';
    var chars = Math.floor((f.w - 6) / 7), label = chars < 3 ? '' : name.length <= chars ? name : name.slice(0, chars - 2) + '..';
    out.push('<g class="f' + (f.parent ? ' parent' : '') + (hit ? ' hit' : '') + '" data-k="' + k + '" data-name="' + esc(name) +
      '" data-v="' + v + '"><title>' + esc(tip) + '</title><rect x="' + (PAD + f.x).toFixed(2) + '" y="' + y +
      '" width="' + Math.max(0, f.w).toFixed(2) + '" height="' + (H - 1) + '" rx="2" fill="' + fill + '"/><text x="' +
      (PAD + f.x + 3).toFixed(2) + '" y="' + (y + H - 4.5) + '">' + esc(label) + '</text></g>');
  });
  if (total <= 0) out.push('<text x="10" y="14">nothing in use here</text>');
  this.nodes = nodes;
  this.svg.setAttribute('height', Math.max(height, 24));
  this.svg.innerHTML = out.join('');
  if (this === FG.main) {
    $('unzoom').hidden = !this.zoom;
    $('matched').textContent = this.term ? 'Matched: ' + (total ? (100 * matched / total).toFixed(2) : '0.00') + '%' : '';
  }
};
var FG = {};

/* ---- two moments ---- */
function drawDiff() {
  var A = D.moments[state.a], B = D.moments[state.b];
  $('diff').hidden = false;
  $('d-title').textContent = 'From ' + A.f + ' (' + elapsed(A.t) + ') to ' + B.f + ' (' + elapsed(B.t) + '): ' +
    (B.tot - A.tot >= 0 ? '+' : '') + bytes(B.tot - A.tot) + ' in use (' + bytes(A.tot) + ' to ' + bytes(B.tot) + ')';
  var la = withRest(A, state.older, entries(A, state.older)), lb = withRest(B, state.older, entries(B, state.older));
  var fa = funcTotals(la), fb = funcTotals(lb), rows = [];
  var names = new Set(Array.from(fa.cum.keys()).concat(Array.from(fb.cum.keys())));
  names.forEach(function (n) {
    var a = fa.flat.get(n) || 0, b = fb.flat.get(n) || 0, ca = fa.cum.get(n) || 0, cb = fb.cum.get(n) || 0;
    if (a !== b || ca !== cb) rows.push([n, b - a, cb - ca, a, b]);
  });
  rows.sort(function (x, y) { return Math.abs(y[1]) - Math.abs(x[1]) || Math.abs(y[2]) - Math.abs(x[2]); });
  var out = ['<tr><th>flat delta</th><th>cum delta</th><th>flat before</th><th>flat after</th><th class="name">function</th></tr>'];
  rows.slice(0, 40).forEach(function (r) {
    out.push('<tr class="' + (r[1] > 0 || (r[1] === 0 && r[2] > 0) ? 'grew' : 'shrank') + '" data-name="' + esc(D.names[r[0]]) +
      '" data-delta="' + r[1] + '"><td>' + (r[1] >= 0 ? '+' : '') + bytes(r[1]) + '</td><td>' + (r[2] >= 0 ? '+' : '') +
      bytes(r[2]) + '</td><td>' + bytes(r[3]) + '</td><td>' + bytes(r[4]) + '</td><td class="name">' + esc(D.names[r[0]]) + '</td></tr>');
  });
  $('diff-table').innerHTML = out.join('');
  $('d-note').textContent = 'Per function, from the stacks each moment keeps (' + (A.noth + B.noth) +
    ' smaller stacks merged' + (state.older >= 0 ? '; at least ' + age(state.older) + ' old' : '') + ').';
  FG.diff.set(lb, la);
}

/* ---- interaction ---- */
function redraw() {
  var t = performance.now();
  drawSelection();
  if (state.a >= 0) drawMoment();
  if (state.a >= 0 && state.b >= 0) drawDiff(); else $('diff').hidden = true;
  state.draws++;
  document.body.setAttribute('data-draws', state.draws);
  document.body.setAttribute('data-draw-ms', (performance.now() - t).toFixed(1));
}
function pick(i, second) {
  if (second && state.a >= 0 && i !== state.a) state.b = i;
  else { state.a = i; state.b = -1; }
  redraw();
}
function init() {
  D.moments.forEach(function (m, i) { if (m.k !== 'p') reports.push(i); });
  drawHeader();
  if (!D.moments.length) return;
  FG.main = new Flame('flame', 'details', false);
  FG.diff = new Flame('dflame', 'ddetails', true);
  drawHeap();
  drawRate();
  $('heap').addEventListener('click', function (e) {
    var g = e.target.closest('.moment');
    if (g) pick(+g.getAttribute('data-i'), e.shiftKey || $('cmp').checked);
  });
  var sel = $('older');
  sel.innerHTML = '<option value="-1">(all ages)</option>' + AGES.map(function (a) {
    return '<option value="' + a + '">' + age(a) + '</option>';
  }).join('');
  sel.addEventListener('change', function () { state.older = +sel.value; redraw(); });
  $('search').addEventListener('input', function () { FG.main.term = $('search').value; FG.main.draw(); });
  $('unzoom').addEventListener('click', function () { FG.main.zoom = null; FG.main.draw(); });
  document.addEventListener('keydown', function (e) {
    if ((e.ctrlKey || e.metaKey) && e.key === 'f') { e.preventDefault(); $('search').focus(); }
  });
  /* Open on the last report (a leak shows at the end). */
  pick(reports.length ? reports[reports.length - 1] : D.moments.length - 1, false);
}
init();
document.body.setAttribute('data-ready-ms', performance.now().toFixed(0));
document.body.setAttribute('data-ready', '1');
