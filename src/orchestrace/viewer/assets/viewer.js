// orchestrace trace viewer: swimlane timeline and event DAG on one canvas.
// Trace data is read with JSON.parse and shown only through textContent and fillText:
// nothing from the trace is ever parsed as markup, a URL or code.
"use strict";
(function () {
  const timing = { script: performance.now() };
  const $ = (id) => document.getElementById(id);
  const D = JSON.parse($("trace-data").textContent);
  timing.parsed = performance.now();
  const N = D.n, L = D.lanes.length, M = D.es.length;
  for (const [k, v] of Object.entries(D.uniform)) D[k] = new Array(N).fill(v); // one value everywhere
  const S = D.S;
  const t = Float64Array.from(D.t), te = Float64Array.from(D.te);
  const type = Uint8Array.from(D.type), lane = Int32Array.from(D.lane);
  const es = Int32Array.from(D.es), ed = Int32Array.from(D.ed), et = Uint8Array.from(D.et);
  const cp = Int32Array.from(D.cp);
  const onCp = new Uint8Array(N);
  for (let i = 0; i < cp.length; i++) onCp[cp[i]] = 1;
  const taintState = new Uint8Array(N); // 1 = untrusted source, 2 = tainted
  for (const i of D.taint_src) taintState[i] = 1;
  for (const i of D.tainted) taintState[i] = 2;
  const tes = Int32Array.from(D.taint_es), ted = Int32Array.from(D.taint_ed);
  const err = Uint8Array.from(D.err);

  // ---------------------------------------------------------------- colours
  const TYPE_COLOUR = {
    orchestrator_decision: "#364fc7", spawn: "#2b8a3e", despawn: "#94d82d", message: "#1c7ed6",
    tool_call: "#0ca678", tool_result: "#66d9e8", return: "#9c36b5", aggregate: "#f783ac",
    human_intervention: "#fab005", safety_event: "#495057",
  };
  const EDGE_COLOUR = {
    temporal: "rgba(134,142,150,0.35)", causal: "rgba(134,142,150,0.75)", spawn: "#2b8a3e",
    message: "#1c7ed6", tool_dependency: "#0ca678", return: "#9c36b5", aggregate: "#e64980",
    safety_flow: "#343a40",
  };
  const CP_COLOUR = "#ff6b00", TAINT_COLOUR = "#e03131", SEL_COLOUR = "#111";
  const SHAPE = { orchestrator_decision: "diamond", spawn: "right", despawn: "square", message: "circle",
    tool_call: "square", tool_result: "square", return: "left", aggregate: "diamond",
    human_intervention: "circle", safety_event: "square" };
  const NB = 32; // buckets of a continuous colour scale

  function lerpColour(stops, x) {
    x = Math.max(0, Math.min(1, x));
    const p = x * (stops.length - 1), i = Math.min(stops.length - 2, Math.floor(p)), f = p - i;
    const a = stops[i], b = stops[i + 1];
    const c = [0, 1, 2].map((k) => Math.round(a[k] + (b[k] - a[k]) * f));
    return "rgb(" + c.join(",") + ")";
  }
  const SEQ = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
  const DIV = [[118, 42, 131], [194, 165, 207], [247, 247, 247], [166, 219, 160], [27, 120, 55]];
  const NONE_COLOUR = "#dee2e6";

  // colour modes: bucket per event, palette per bucket
  const bucket = new Uint8Array(N);
  let palette = [], scale = null;
  function colourModes() {
    const modes = [["type", "event type"], ["tokens", "tokens (log)"], ["cost", "cost (USD, log)"]];
    for (const k of Object.keys(D.credit)) modes.push(["credit:" + k, "credit " + k]);
    return modes;
  }
  function setColour(mode) {
    if (mode === "type") {
      palette = D.types.map((n) => TYPE_COLOUR[n] || "#888");
      for (let i = 0; i < N; i++) bucket[i] = type[i];
      scale = null;
      return;
    }
    let vals;
    if (mode === "tokens") vals = D.tin.map((a, i) => (a == null && D.tout[i] == null ? null : (a || 0) + (D.tout[i] || 0)));
    else if (mode === "cost") vals = D.cost;
    else vals = D.credit[mode.slice(7)];
    const diverging = mode.startsWith("credit:");
    let lo = Infinity, hi = -Infinity;
    for (const v of vals) if (v != null) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
    palette = [];
    for (let b = 0; b < NB; b++) palette.push(lerpColour(diverging ? DIV : SEQ, b / (NB - 1)));
    palette.push(NONE_COLOUR);
    const amax = Math.max(Math.abs(lo), Math.abs(hi)) || 1;
    const logLo = Math.log1p(Math.max(0, lo)), logHi = Math.log1p(Math.max(0, hi));
    for (let i = 0; i < N; i++) {
      const v = vals[i];
      let x;
      if (v == null) { bucket[i] = NB; continue; }
      if (diverging) x = 0.5 + 0.5 * v / amax;
      else x = logHi > logLo ? (Math.log1p(Math.max(0, v)) - logLo) / (logHi - logLo) : 1;
      bucket[i] = Math.round(x * (NB - 1));
    }
    scale = { mode, diverging, lo: diverging ? -amax : lo, hi: diverging ? amax : hi };
  }

  // ---------------------------------------------------------------- indexes
  let tmin = Infinity, tmax = -Infinity;
  for (let i = 0; i < N; i++) { if (t[i] < tmin) tmin = t[i]; if (te[i] > tmax) tmax = te[i]; }
  if (!isFinite(tmin)) { tmin = 0; tmax = 1; }
  if (tmax <= tmin) tmax = tmin + 1;

  // events per lane sorted by start time (CSR), with the longest duration per lane
  const laneStart = new Int32Array(L + 1);
  for (let i = 0; i < N; i++) laneStart[lane[i] + 1]++;
  for (let l = 0; l < L; l++) laneStart[l + 1] += laneStart[l];
  const laneEv = new Int32Array(N);
  {
    // bucket in trace order; sort only the lanes whose events are not already in time order
    const fill = laneStart.slice(0, L);
    for (let i = 0; i < N; i++) laneEv[fill[lane[i]]++] = i;
    for (let l = 0; l < L; l++) {
      const lo = laneStart[l], hi = laneStart[l + 1];
      let sorted = true;
      for (let k = lo + 1; k < hi; k++) if (t[laneEv[k]] < t[laneEv[k - 1]]) { sorted = false; break; }
      if (!sorted) {
        const part = laneEv.slice(lo, hi), order = sortedBy((k) => t[part[k]], hi - lo);
        for (let k = 0; k < hi - lo; k++) laneEv[lo + k] = part[order[k]];
      }
    }
  }
  const laneMaxDur = new Float64Array(L);
  for (let i = 0; i < N; i++) laneMaxDur[lane[i]] = Math.max(laneMaxDur[lane[i]], te[i] - t[i]);
  const laneDepth = new Int32Array(L);
  for (let l = 0; l < L; l++) { let d = 0, p = D.lane_parent[l]; while (p >= 0 && d < 64) { d++; p = D.lane_parent[p]; } laneDepth[l] = d; }

  function sortedBy(key, n) { // stable order of 0..n-1 by key (native numeric sort of packed keys)
    const k = new Float64Array(n);
    let sorted = true, lo = Infinity, hi = -Infinity;
    for (let i = 0; i < n; i++) {
      const v = key(i);
      k[i] = v;
      if (i && v < k[i - 1]) sorted = false;
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
    const idx = new Int32Array(n);
    if (sorted) { for (let i = 0; i < n; i++) idx[i] = i; return idx; }
    // rank keys on 2^31 levels and pack (rank, index) into one exact float64
    const q = hi > lo ? 2147483647 / (hi - lo) : 0, B = 2097152;
    for (let i = 0; i < n; i++) k[i] = Math.floor((k[i] - lo) * q) * B + i;
    k.sort();
    for (let i = 0; i < n; i++) idx[i] = k[i] % B;
    return idx;
  }
  function lowerBound(arr, lo, hi, key, x) { // first position in arr[lo,hi) with key(arr[p]) >= x
    while (lo < hi) { const m = (lo + hi) >> 1; if (key(arr[m]) < x) lo = m + 1; else hi = m; }
    return lo;
  }

  // Edge sets bucketed by their earliest time on a grid of NBK buckets (a counting sort, linear);
  // edges longer than `span` are kept apart and checked on every query.
  const NBK = 4096;
  const bucketOf = (x) => Math.max(0, Math.min(NBK - 1, Math.floor((x - tmin) / (tmax - tmin) * NBK)));
  function edgeSet(src, dst) {
    const n = src.length, span = (tmax - tmin) / 40;
    const lo = new Float64Array(n), hi = new Float64Array(n);
    const start = new Int32Array(NBK + 1), long = [];
    for (let j = 0; j < n; j++) {
      const a = te[src[j]], b = t[dst[j]];
      lo[j] = Math.min(a, b, t[src[j]]); hi[j] = Math.max(a, b);
      if (hi[j] - lo[j] > span) long.push(j); else start[bucketOf(lo[j]) + 1]++;
    }
    for (let b = 0; b < NBK; b++) start[b + 1] += start[b];
    const fill = start.slice(0, NBK), list = new Int32Array(start[NBK]);
    for (let j = 0; j < n; j++) if (hi[j] - lo[j] <= span) list[fill[bucketOf(lo[j])]++] = j;
    return { src, dst, lo, hi, span, start, list, long: Int32Array.from(long) };
  }
  const EDGES = edgeSet(es, ed), TAINT = edgeSet(tes, ted);
  function edgesIn(set, t0, t1, visit) {
    const b1 = bucketOf(t1), { lo, hi, list } = set;
    for (let k = set.start[bucketOf(t0 - set.span)]; k < set.start[b1 + 1]; k++) {
      const j = list[k];
      if (lo[j] <= t1 && hi[j] >= t0) visit(j);
    }
    for (const j of set.long) if (lo[j] <= t1 && hi[j] >= t0) visit(j);
  }

  // adjacency lists (CSR) for the details panel and the graph view
  function csr(from, to) {
    const start = new Int32Array(N + 1);
    for (let j = 0; j < M; j++) start[from[j] + 1]++;
    for (let i = 0; i < N; i++) start[i + 1] += start[i];
    const fill = start.slice(0, N), list = new Int32Array(M);
    for (let j = 0; j < M; j++) list[fill[from[j]]++] = j;
    return { start, list };
  }
  let OUT = null, IN = null; // built on first use (details, selection, graph view)
  function adjacency() { if (!OUT) { OUT = csr(es, ed); IN = csr(ed, es); } }
  let idMap = null;
  function findId(id) { // event index of an id, or -1; the map is built on first use
    if (!idMap) { idMap = new Map(); for (let i = N - 1; i >= 0; i--) idMap.set(D.id[i], i); }
    const i = idMap.get(id);
    return i === undefined ? -1 : i;
  }

  // ---------------------------------------------------------------- canvas and state
  const canvas = $("canvas"), stage = $("stage"), tip = $("tip");
  const ctx = canvas.getContext("2d", { alpha: false });
  let W = 0, H = 0, DPR = 1;
  const GW = 180, AH = 26, LH = 24;
  const TL = { x0: tmin, k: 1, sy: 0 };
  const GR = { ox: 40, oy: 40, s: 1, built: false };
  const state = { view: "timeline", edges: true, cp: true, taint: true, selected: -1 };
  const frame = { events: 0, edges: 0, cp: 0, taint: 0, lanes: [0, -1], ms: 0, count: 0, lastEvents: 0 };

  function resize() {
    const dpr = window.devicePixelRatio || 1;
    if (stage.clientWidth === W && stage.clientHeight === H && dpr === DPR) return;
    DPR = dpr; W = stage.clientWidth; H = stage.clientHeight;
    canvas.width = Math.max(1, Math.round(W * DPR)); canvas.height = Math.max(1, Math.round(H * DPR));
    redraw();
  }
  function fitTimeline() {
    const w = Math.max(50, W - GW - 24);
    TL.k = w / (tmax - tmin); TL.x0 = tmin - 8 / TL.k; TL.sy = 0;
  }
  const X = (tm) => GW + (tm - TL.x0) * TL.k;
  const Y = (l) => AH + l * LH - TL.sy + LH / 2;

  let pending = false;
  function redraw() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; draw(); });
  }
  function draw(flush) {
    const s = performance.now();
    ctx.setTransform(DPR, 0, 0, DPR, 0, 0);
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, W, H);
    frame.events = frame.edges = frame.cp = frame.taint = frame.hiddenEdges = frame.hiddenFlows = 0;
    if (state.view === "timeline") drawTimeline(); else drawGraph();
    frame.jsMs = performance.now() - s;
    if (flush) ctx.getImageData(0, 0, 1, 1); // canvas work is deferred: make it happen now, to time it
    frame.ms = performance.now() - s;
    frame.count++;
  }

  // ---------------------------------------------------------------- drawing helpers
  // Subpaths end with an explicit lineTo back to their start: closing them with closePath
  // made building a Path2D of thousands of marks quadratic in Chromium.
  function shapePath(p, shape, x, y, r) {
    switch (shape) {
      case "diamond": p.moveTo(x, y - r); p.lineTo(x + r, y); p.lineTo(x, y + r); p.lineTo(x - r, y); p.lineTo(x, y - r); break;
      case "right": p.moveTo(x - r, y - r); p.lineTo(x + r, y); p.lineTo(x - r, y + r); p.lineTo(x - r, y - r); break;
      case "left": p.moveTo(x + r, y - r); p.lineTo(x - r, y); p.lineTo(x + r, y + r); p.lineTo(x + r, y - r); break;
      case "circle": p.moveTo(x + r, y); p.arc(x, y, r, 0, 6.2832); break;
      default: p.rect(x - r * 0.85, y - r * 0.85, r * 1.7, r * 1.7);
    }
  }
  function arrowHead(p, x1, y1, x2, y2, size) {
    const a = Math.atan2(y2 - y1, x2 - x1);
    p.moveTo(x2, y2);
    p.lineTo(x2 - size * Math.cos(a - 0.45), y2 - size * Math.sin(a - 0.45));
    p.lineTo(x2 - size * Math.cos(a + 0.45), y2 - size * Math.sin(a + 0.45));
    p.lineTo(x2, y2);
  }
  const lightCache = new Map();
  function lightFill(colour) { // is a fill light enough for dark text? (relative luminance)
    if (!lightCache.has(colour)) {
      let r, g, b;
      if (colour[0] === "#") [r, g, b] = [1, 3, 5].map((k) => parseInt(colour.slice(k, k + 2), 16));
      else [r, g, b] = colour.match(/\d+/g).map(Number);
      lightCache.set(colour, 0.2126 * r + 0.7152 * g + 0.0722 * b > 150);
    }
    return lightCache.get(colour);
  }
  function clipText(s, maxW) {
    if (ctx.measureText(s).width <= maxW) return s;
    let lo = 0, hi = s.length;
    while (lo < hi) { const m = (lo + hi + 1) >> 1; if (ctx.measureText(s.slice(0, m) + "…").width <= maxW) lo = m; else hi = m - 1; }
    return s.slice(0, lo) + "…";
  }
  function niceStep(range, px) {
    const raw = range / Math.max(1, px / 110), p = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
    return 10 * p;
  }
  function fmtTime(s) {
    const a = Math.abs(s);
    if (a >= 3600) return (s / 3600).toFixed(2) + " h";
    if (a >= 60) return (s / 60).toFixed(a >= 600 ? 0 : 1) + " min";
    if (a >= 1 || a === 0) return +s.toFixed(3) + " s";
    return +(s * 1000).toFixed(3) + " ms";
  }

  // ---------------------------------------------------------------- timeline
  function visibleLanes() {
    const a = Math.max(0, Math.floor(TL.sy / LH)), b = Math.min(L - 1, Math.floor((TL.sy + H - AH) / LH));
    return [a, b];
  }
  function drawTimeline() {
    const [la, lb] = visibleLanes();
    frame.lanes = [la, lb];
    const t0 = TL.x0, t1 = TL.x0 + (W - GW) / TL.k;
    // lane backgrounds
    for (let l = la; l <= lb; l++) {
      const y = AH + l * LH - TL.sy;
      ctx.fillStyle = l % 2 ? "#f6f7f9" : "#ffffff";
      ctx.fillRect(0, y, W, LH);
    }
    // time grid
    const step = niceStep(t1 - t0, W - GW);
    ctx.strokeStyle = "#eceef2"; ctx.lineWidth = 1;
    ctx.beginPath();
    for (let g = Math.ceil(t0 / step) * step; g <= t1; g += step) { const x = Math.round(X(g)) + 0.5; ctx.moveTo(x, AH); ctx.lineTo(x, H); }
    ctx.stroke();
    ctx.save();
    ctx.beginPath(); ctx.rect(GW, AH, W - GW, H - AH); ctx.clip();
    if (state.edges) drawTimelineEdges(t0, t1, la, lb);
    if (state.taint && TAINT.src.length) drawTimelineFlows(TAINT, t0, t1, la, lb, TAINT_COLOUR);
    const rings = state.cp && cp.length ? drawTimelineCp(t0, t1, la, lb) : null; // path under the events
    drawTimelineEvents(t0, t1, la, lb);
    if (rings) { ctx.strokeStyle = CP_COLOUR; ctx.lineWidth = 2.5; ctx.stroke(rings); } // rings over them
    drawSelection();
    ctx.restore();
    // gutter with lane names (indented by spawn depth)
    ctx.fillStyle = "#fafbfc"; ctx.fillRect(0, AH, GW, H - AH);
    ctx.strokeStyle = "#d9dce3"; ctx.beginPath(); ctx.moveTo(GW - 0.5, AH); ctx.lineTo(GW - 0.5, H); ctx.stroke();
    ctx.font = "12px system-ui, sans-serif"; ctx.textBaseline = "middle";
    for (let l = la; l <= lb; l++) {
      const ind = Math.min(laneDepth[l], 8) * 10;
      ctx.fillStyle = "#1d2330";
      ctx.fillText(clipText(D.lanes[l], GW - 12 - ind), 6 + ind, Y(l));
    }
    // axis
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, W, AH);
    ctx.strokeStyle = "#d9dce3"; ctx.beginPath(); ctx.moveTo(0, AH - 0.5); ctx.lineTo(W, AH - 0.5); ctx.stroke();
    ctx.fillStyle = "#6b7385"; ctx.font = "11px system-ui, sans-serif"; ctx.textBaseline = "middle";
    for (let g = Math.ceil(t0 / step) * step; g <= t1; g += step) {
      const x = X(g);
      if (x > GW + 2) ctx.fillText(fmtTime(g), x + 3, AH / 2);
    }
    ctx.fillStyle = "#1d2330"; ctx.font = "600 12px system-ui, sans-serif";
    ctx.fillText("agent \u2193  time \u2192", 6, AH / 2);
    const hidden = (state.edges ? frame.hiddenEdges : 0) + (state.taint ? frame.hiddenFlows : 0);
    if (hidden) {
      const msg = "zoom in to see " + hidden + " more edges to agents off screen";
      ctx.font = "11px system-ui, sans-serif";
      const w = ctx.measureText(msg).width + 12;
      ctx.fillStyle = "rgba(255,244,230,0.95)"; ctx.fillRect(W - w - 6, AH + 4, w, 18);
      ctx.fillStyle = "#8a4b08"; ctx.fillText(msg, W - w, AH + 13);
    }
  }

  function drawTimelineEvents(t0, t1, la, lb) {
    const paths = palette.map(() => new Path2D());
    const errPath = new Path2D(), taintPath = new Path2D(), srcPath = new Path2D();
    let drawn = 0;
    const dense = frame.lastEvents > 2500; // many marks: plain rectangles, no outlines
    for (let l = la; l <= lb; l++) {
      const y = Y(l), lo = laneStart[l], hi = laneStart[l + 1];
      let k = lowerBound(laneEv, lo, hi, (i) => t[i], t0 - laneMaxDur[l]);
      let lastPx = -1e9, lastB = -1;
      for (; k < hi; k++) {
        const i = laneEv[k];
        if (t[i] > t1) break;
        if (te[i] < t0) continue;
        const x0 = X(t[i]), x1 = X(te[i]), b = bucket[i];
        const w = x1 - x0;
        if (w < 3) {
          const px = Math.round(x0);
          if (px - lastPx < 2 && b === lastB) continue;
          lastPx = px; lastB = b;
          if (dense) paths[b].rect(x0 - 2, y - 6, 4, 12);
          else shapePath(paths[b], SHAPE[D.types[type[i]]], x0, y, 5.5);
        } else {
          paths[b].rect(x0, y - LH / 2 + 4, w, LH - 8);
          lastPx = Math.round(x1); lastB = b;
        }
        drawn++;
        if (err[i]) { errPath.moveTo(x0 - 3, y - LH / 2 + 2); errPath.lineTo(x0 + 3, y - LH / 2 + 8); errPath.moveTo(x0 + 3, y - LH / 2 + 2); errPath.lineTo(x0 - 3, y - LH / 2 + 8); }
        if (state.taint && taintState[i]) {
          if (taintState[i] === 1) { srcPath.moveTo(x0, y + LH / 2 - 7); srcPath.lineTo(x0 + 5, y + LH / 2 - 1); srcPath.lineTo(x0 - 5, y + LH / 2 - 1); srcPath.lineTo(x0, y + LH / 2 - 7); }
          else taintPath.rect(x0 - 1, y + LH / 2 - 3, Math.max(w, 2) + 2, 2.5);
        }
      }
    }
    for (let b = 0; b < palette.length; b++) { ctx.fillStyle = palette[b]; ctx.fill(paths[b]); }
    if (!dense) {
      ctx.strokeStyle = "rgba(0,0,0,0.25)"; ctx.lineWidth = 0.6;
      for (let b = 0; b < palette.length; b++) ctx.stroke(paths[b]);
    }
    ctx.fillStyle = TAINT_COLOUR; ctx.fill(taintPath); ctx.fill(srcPath);
    ctx.strokeStyle = "#c92a2a"; ctx.lineWidth = 1.6; ctx.stroke(errPath);
    frame.events = frame.lastEvents = drawn;
  }

  function laneVisible(a, b, la, lb) { return !((a < la && b < la) || (a > lb && b > lb)); }

  const SEG_CAP = 4000;
  // Clip a segment to the canvas (plus a margin), Liang-Barsky. Lines to lanes far off screen
  // would otherwise be rasterised (and dashed) over their whole length. Returns null when
  // nothing is visible, else [x1, y1, x2, y2, 1 if the end point was kept].
  function clipLine(x1, y1, x2, y2) {
    const xmin = GW - 30, xmax = W + 30, ymin = AH - 30, ymax = H + 30;
    const dx = x2 - x1, dy = y2 - y1;
    let u0 = 0, u1 = 1;
    const p = [-dx, dx, -dy, dy], q = [x1 - xmin, xmax - x1, y1 - ymin, ymax - y1];
    for (let k = 0; k < 4; k++) {
      if (p[k] === 0) { if (q[k] < 0) return null; continue; }
      const r = q[k] / p[k];
      if (p[k] < 0) { if (r > u1) return null; if (r > u0) u0 = r; }
      else { if (r < u0) return null; if (r < u1) u1 = r; }
    }
    return [x1 + u0 * dx, y1 + u0 * dy, x1 + u1 * dx, y1 + u1 * dy, u1 === 1 ? 1 : 0];
  }

  // Line segments of an edge set in the window: (edge, x1, y1, x2, y2, head?), one per pixel
  // pair. Edges with both ends in visible lanes are drawn whole. Edges to lanes off screen are
  // drawn whole while there are few; beyond that as short stubs pointing at the other end (a
  // wall of long lines is unreadable and slow to rasterise); past SEG_CAP they are only counted.
  const STUB = 14, FEW_OUTER = 300;
  // key of a clipped segment at pixel resolution: segments that would paint the same pixels
  // (e.g. lines to different lanes below the view, clipped at its bottom) are drawn once
  const pixKey = (c) => (((Math.round(c[0]) + 64) * 4096 + Math.round(c[1]) + 64) * 4096 + Math.round(c[2]) + 64) * 4096 + Math.round(c[3]) + 64;

  function collectSegs(set, t0, t1, la, lb, sameLane) {
    const segs = [], outer = [], seen = new Set();
    const emit = (j, c, head) => {
      const k = pixKey(c);
      if (!seen.has(k)) { seen.add(k); segs.push(j, c[0], c[1], c[2], c[3], head); }
    };
    edgesIn(set, t0, t1, (j) => {
      const s = set.src[j], d = set.dst[j], ls = lane[s], ld = lane[d];
      if (ls === ld && !sameLane) return;
      const vs = ls >= la && ls <= lb, vd = ld >= la && ld <= lb;
      if (!vs && !vd) return;
      const x1 = X(te[s] <= t[d] ? te[s] : t[s]), x2 = X(t[d]);
      if (!(vs && vd)) { outer.push(j, x1, Y(ls), x2, Y(ld), vd ? 1 : 0); return; }
      if (ls === ld) {
        if (x2 - x1 >= 6) emit(j, [Math.max(x1, GW - 30), Y(ls), Math.min(x2, W + 30), Y(ld)], x2 <= W + 30 ? 1 : 0);
        return; // same lane and too close to show otherwise
      }
      const c = clipLine(x1, Y(ls), x2, Y(ld));
      if (c) emit(j, c, c[4]);
    });
    const nOut = outer.length / 6;
    if (nOut > SEG_CAP) return { segs, hidden: nOut };
    for (let q = 0; q < outer.length; q += 6) {
      let x1 = outer[q + 1], y1 = outer[q + 2], x2 = outer[q + 3], y2 = outer[q + 4];
      const toVisible = outer[q + 5];
      if (nOut > FEW_OUTER) {
        const len = Math.hypot(x2 - x1, y2 - y1) || 1, ux = (x2 - x1) / len, uy = (y2 - y1) / len;
        if (toVisible) { x1 = x2 - ux * STUB; y1 = y2 - uy * STUB; } else { x2 = x1 + ux * STUB; y2 = y1 + uy * STUB; }
      }
      const c = clipLine(x1, y1, x2, y2);
      if (c) emit(outer[q], c, c[4] && toVisible);
    }
    return { segs, hidden: 0 };
  }

  function drawTimelineEdges(t0, t1, la, lb) {
    const paths = D.edge_types.map(() => new Path2D()), heads = D.edge_types.map(() => new Path2D());
    const { segs, hidden } = collectSegs(EDGES, t0, t1, la, lb, true);
    const headsOn = segs.length / 6 < SEG_CAP;
    for (let q = 0; q < segs.length; q += 6) {
      const j = segs[q], x1 = segs[q + 1], y1 = segs[q + 2], x2 = segs[q + 3], y2 = segs[q + 4];
      const p = paths[et[j]], head = headsOn && segs[q + 5];
      if (y1 === y2) { // same lane: an arc above the events
        const mx = (x1 + x2) / 2, lift = Math.min(7, 3 + (x2 - x1) / 10);
        p.moveTo(x1, y1 - 4); p.quadraticCurveTo(mx, y1 - 4 - lift * 2, x2, y1 - 4);
        if (head) arrowHead(heads[et[j]], (mx + x2) / 2, y1 - 4 - lift, x2, y1 - 4, 6);
      } else {
        p.moveTo(x1, y1); p.lineTo(x2, y2);
        if (head) arrowHead(heads[et[j]], x1, y1, x2, y2 + (y2 > y1 ? -5 : 5), 7);
      }
    }
    for (let c = 0; c < paths.length; c++) {
      const col = EDGE_COLOUR[D.edge_types[c]] || "#888";
      ctx.strokeStyle = col; ctx.lineWidth = c === 1 || c === 0 ? 1 : 1.4;
      ctx.stroke(paths[c]);
      ctx.fillStyle = col; ctx.fill(heads[c]);
    }
    frame.edges = segs.length / 6;
    frame.hiddenEdges = hidden;
  }

  function drawTimelineFlows(set, t0, t1, la, lb, colour) {
    // cross-lane flows as lines; within a lane the tainted marks under the events show it
    const p = new Path2D(), h = new Path2D();
    const { segs, hidden } = collectSegs(set, t0, t1, la, lb, false);
    const n = segs.length / 6, few = n < 400;
    for (let q = 0; q < segs.length; q += 6) {
      const x1 = segs[q + 1], y1 = segs[q + 2] + 3, x2 = segs[q + 3], y2 = segs[q + 4] + 3;
      p.moveTo(x1, y1); p.lineTo(x2, y2);
      if (few && segs[q + 5]) arrowHead(h, x1, y1, x2, y2 + (y2 > y1 ? -5 : 5), 7);
    }
    ctx.save();
    if (few) ctx.setLineDash([6, 3]); // dashing is slow in software rendering
    ctx.strokeStyle = colour; ctx.lineWidth = few ? 2 : 1.2; ctx.stroke(p);
    ctx.restore();
    ctx.fillStyle = colour; ctx.fill(h);
    frame.taint = n;
    frame.hiddenFlows = hidden;
  }

  function drawTimelineCp(t0, t1, la, lb) {
    // one polyline through the path: along each event (start to the moment the next one could
    // use it) and across to the next event; segments outside the view are skipped, the rest
    // clipped, and points closer than a pixel to the previous one dropped
    const line = new Path2D(), boxes = new Path2D();
    let n = 0, px = NaN, py = NaN, nseg = 0;
    const drawn = new Set();
    const lastBox = new Float64Array(L).fill(-Infinity);
    const cand = []; // x1, y1, x2, y2, 0 | 1 (leaves the visible lanes) | 2 (enters them)
    let nOuter = 0;
    const seg = (ta, la_, tb, lb_) => {
      if (Math.max(ta, tb) < t0 || Math.min(ta, tb) > t1 || !laneVisible(la_, lb_, la, lb)) return;
      const kind = la_ >= la && la_ <= lb ? (lb_ >= la && lb_ <= lb ? 0 : 1) : 2;
      if (kind) nOuter++;
      cand.push(X(ta), Y(la_), X(tb), Y(lb_), kind);
    };
    for (let q = 0; q < cp.length; q++) {
      const i = cp[q], l = lane[i];
      const x0 = X(t[i]), x1 = Math.max(X(te[i]), x0), y = Y(l);
      if (te[i] >= t0 && t[i] <= t1 && l >= la - 1 && l <= lb + 1 && x0 > lastBox[l] + 4) {
        // one ring per few pixels: rasterising them is the cost
        if (x1 - x0 < 3) { boxes.moveTo(x0 + 8.5, y); boxes.arc(x0, y, 8.5, 0, 6.2832); lastBox[l] = x0 + 8; }
        else { boxes.rect(x0 - 2, y - LH / 2 + 2, x1 - x0 + 4, LH - 4); lastBox[l] = x1; }
        n++;
      }
      const next = q + 1 < cp.length ? cp[q + 1] : -1;
      const out = next >= 0 && te[i] > t[next] ? t[i] : te[i]; // still running: the next one used its start
      seg(t[i], l, out, l);
      if (next >= 0) seg(out, l, t[next], lane[next]);
    }
    // many hops to lanes off screen: draw them as stubs, like edges (a fence of long lines)
    const stubs = nOuter > FEW_OUTER;
    for (let q = 0; q < cand.length; q += 5) {
      let x1 = cand[q], y1 = cand[q + 1], x2 = cand[q + 2], y2 = cand[q + 3];
      const kind = cand[q + 4];
      if (stubs && kind) {
        const len = Math.hypot(x2 - x1, y2 - y1) || 1, ux = (x2 - x1) / len, uy = (y2 - y1) / len;
        if (kind === 2) { x1 = x2 - ux * STUB; y1 = y2 - uy * STUB; } else { x2 = x1 + ux * STUB; y2 = y1 + uy * STUB; }
      }
      const c = clipLine(x1, y1, x2, y2);
      if (!c) continue;
      const k = pixKey(c);
      if (drawn.has(k)) continue;
      drawn.add(k);
      if (Math.abs(c[0] - px) > 0.5 || Math.abs(c[1] - py) > 0.5) line.moveTo(c[0], c[1]);
      else if (Math.abs(c[2] - px) < 0.7 && Math.abs(c[3] - py) < 0.7) continue;
      line.lineTo(c[2], c[3]);
      px = c[2]; py = c[3];
      nseg++;
    }
    // round joins and the white halo only while the line is short: stroking thousands of
    // round joins is most of a frame in software rendering
    const few = nseg < 1500;
    ctx.lineJoin = few ? "round" : "bevel"; ctx.lineCap = few ? "round" : "butt";
    if (few) { ctx.strokeStyle = "rgba(255,255,255,0.85)"; ctx.lineWidth = 6; ctx.stroke(line); }
    ctx.strokeStyle = CP_COLOUR; ctx.lineWidth = 3.5; ctx.stroke(line);
    ctx.lineJoin = "miter"; ctx.lineCap = "butt";
    frame.cp = n;
    frame.cpSegments = nseg;
    return boxes;
  }

  function eventBox(i) { // screen box of an event in the current view
    if (state.view === "timeline") {
      const x0 = X(t[i]), x1 = X(te[i]), y = Y(lane[i]);
      return x1 - x0 < 3 ? { x: x0 - 6, y: y - 6, w: 12, h: 12, cx: x0, cy: y } : { x: x0, y: y - LH / 2 + 4, w: x1 - x0, h: LH - 8, cx: (x0 + x1) / 2, cy: y };
    }
    const x = GX(i), y = GY(i), w = NODE_W * GR.s, h = NODE_H * GR.s;
    return { x: x - w / 2, y: y - h / 2, w, h, cx: x, cy: y };
  }
  function drawSelection() {
    const i = state.selected;
    if (i < 0) return;
    adjacency();
    // edges of the selected event, bold
    ctx.lineWidth = 2.2; ctx.strokeStyle = SEL_COLOUR;
    ctx.beginPath();
    const link = (s, d) => {
      const a = eventBox(s), b = eventBox(d), c = state.view === "timeline" ? clipLine(a.cx, a.cy, b.cx, b.cy) : [a.cx, a.cy, b.cx, b.cy];
      if (c) { ctx.moveTo(c[0], c[1]); ctx.lineTo(c[2], c[3]); }
    };
    for (let k = OUT.start[i]; k < OUT.start[i + 1]; k++) link(i, ed[OUT.list[k]]);
    for (let k = IN.start[i]; k < IN.start[i + 1]; k++) link(es[IN.list[k]], i);
    ctx.stroke();
    const b = eventBox(i);
    ctx.lineWidth = 2.5; ctx.strokeStyle = SEL_COLOUR;
    ctx.strokeRect(b.x - 4, b.y - 4, b.w + 8, b.h + 8);
  }

  function hitTimeline(x, y) {
    if (x < GW || y < AH) return -1;
    const l = Math.floor((y - AH + TL.sy) / LH);
    if (l < 0 || l >= L) return -1;
    const tm = TL.x0 + (x - GW) / TL.k, tol = 7 / TL.k;
    const lo = laneStart[l], hi = laneStart[l + 1];
    let k = lowerBound(laneEv, lo, hi, (i) => t[i], tm - laneMaxDur[l] - tol);
    let best = -1, bestD = Infinity;
    for (let n = 0; k < hi && n < 20000; k++, n++) {
      const i = laneEv[k];
      if (t[i] > tm + tol) break;
      const x0 = X(t[i]), x1 = X(te[i]);
      const d = x < x0 ? x0 - x : x > x1 ? x - x1 : 0;
      const dc = Math.abs(x - (x0 + x1) / 2) * 1e-3;
      if (d <= 7 && d + dc < bestD) { best = i; bestD = d + dc; }
    }
    return best;
  }

  // ---------------------------------------------------------------- graph view (layered DAG)
  const NODE_W = 86, NODE_H = 22, COL_W = 130, ROW_H = 34;
  let layer, slot, layerStart, layerNodes, nLayers = 0;
  function buildGraph() {
    adjacency();
    // longest-path layering over the explicit edges, in a topological order (Kahn)
    layer = new Int32Array(N);
    const indeg = new Int32Array(N);
    for (let j = 0; j < M; j++) indeg[ed[j]]++;
    const order = sortedBy((i) => t[i], N), queue = new Int32Array(N);
    let qh = 0, qt = 0;
    for (let k = 0; k < N; k++) if (indeg[order[k]] === 0) queue[qt++] = order[k];
    const done = new Uint8Array(N);
    while (qh < qt) {
      const v = queue[qh++]; done[v] = 1;
      for (let k = OUT.start[v]; k < OUT.start[v + 1]; k++) {
        const w = ed[OUT.list[k]];
        if (layer[v] + 1 > layer[w]) layer[w] = layer[v] + 1;
        if (--indeg[w] === 0) queue[qt++] = w;
      }
    }
    for (let i = 0; i < N; i++) if (!done[i]) layer[i] = 0; // edges with a cycle: not a DAG, keep visible
    for (let i = 0; i < N; i++) if (layer[i] + 1 > nLayers) nLayers = layer[i] + 1;
    // nodes of each layer ordered by lane then time
    layerStart = new Int32Array(nLayers + 1);
    for (let i = 0; i < N; i++) layerStart[layer[i] + 1]++;
    for (let c = 0; c < nLayers; c++) layerStart[c + 1] += layerStart[c];
    layerNodes = new Int32Array(N);
    const byLane = sortedBy((i) => lane[i] * 1e12 + (t[i] - tmin) / (tmax - tmin + 1) * 1e11, N);
    const fill = layerStart.slice(0, nLayers);
    slot = new Int32Array(N);
    for (let k = 0; k < N; k++) { const i = byLane[k]; slot[i] = fill[layer[i]] - layerStart[layer[i]]; layerNodes[fill[layer[i]]++] = i; }
    GR.built = true;
  }
  const GX = (i) => GR.ox + (layer[i] * COL_W + NODE_W / 2) * GR.s;
  const GY = (i) => GR.oy + (slot[i] * ROW_H + NODE_H / 2) * GR.s;
  function fitGraph() {
    if (!GR.built) buildGraph();
    let maxSlot = 1;
    for (let c = 0; c < nLayers; c++) maxSlot = Math.max(maxSlot, layerStart[c + 1] - layerStart[c]);
    // whole graph when it fits at a readable scale; otherwise its first columns, readable
    const s = Math.min((W - 60) / (nLayers * COL_W), (H - 60) / (maxSlot * ROW_H), 1.2);
    GR.s = Math.max(s, 0.75); GR.ox = 30; GR.oy = 30;
  }
  function visibleGraphNodes(visit) {
    const c0 = Math.max(0, Math.floor((-GR.ox / GR.s - NODE_W) / COL_W)), c1 = Math.min(nLayers - 1, Math.floor((W - GR.ox) / GR.s / COL_W));
    const r0 = Math.max(0, Math.floor((-GR.oy / GR.s - NODE_H) / ROW_H)), r1 = Math.floor((H - GR.oy) / GR.s / ROW_H);
    for (let c = c0; c <= c1; c++) {
      const lo = layerStart[c], hi = Math.min(layerStart[c + 1], lo + r1 + 1);
      for (let k = lo + r0; k < hi; k++) visit(layerNodes[k]);
    }
  }
  function drawGraph() {
    if (!GR.built) { buildGraph(); fitGraph(); }
    const vis = [];
    visibleGraphNodes((i) => vis.push(i));
    const dense = vis.length > 6000 || GR.s < 0.15;
    const w = NODE_W * GR.s, h = NODE_H * GR.s;
    if (state.edges && vis.length < 40000) {
      const paths = D.edge_types.map(() => new Path2D()), heads = D.edge_types.map(() => new Path2D());
      let n = 0;
      for (const i of vis) {
        for (let k = IN.start[i]; k < IN.start[i + 1]; k++) {
          const j = IN.list[k], s = es[j];
          const x1 = GX(s) + w / 2, y1 = GY(s), x2 = GX(i) - w / 2, y2 = GY(i);
          const p = paths[et[j]], mx = (x1 + x2) / 2;
          p.moveTo(x1, y1); p.bezierCurveTo(mx, y1, mx, y2, x2, y2);
          if (!dense) arrowHead(heads[et[j]], mx, y2, x2, y2, 7);
          n++;
        }
      }
      for (let c = 0; c < paths.length; c++) {
        const col = EDGE_COLOUR[D.edge_types[c]] || "#888";
        ctx.strokeStyle = col; ctx.lineWidth = 1.2; ctx.stroke(paths[c]);
        ctx.fillStyle = col; ctx.fill(heads[c]);
      }
      frame.edges = n;
    }
    if (state.taint && TAINT.src.length) {
      const p = new Path2D();
      let n = 0;
      for (let j = 0; j < TAINT.src.length; j++) {
        const s = TAINT.src[j], d = TAINT.dst[j];
        const x1 = GX(s) + w / 2, x2 = GX(d) - w / 2, y1 = GY(s), y2 = GY(d);
        if ((x1 < 0 && x2 < 0) || (x1 > W && x2 > W) || (y1 < 0 && y2 < 0) || (y1 > H && y2 > H)) continue;
        const mx = (x1 + x2) / 2;
        p.moveTo(x1, y1); p.bezierCurveTo(mx, y1, mx, y2, x2, y2);
        n++;
      }
      ctx.save();
      if (n < 300) ctx.setLineDash([6, 3]); // dashing is slow in software rendering
      ctx.strokeStyle = TAINT_COLOUR; ctx.lineWidth = 2; ctx.stroke(p); ctx.restore();
      frame.taint = n;
    }
    if (state.cp && cp.length) {
      const p = new Path2D();
      for (let q = 1; q < cp.length; q++) {
        const a = cp[q - 1], b = cp[q];
        const x1 = GX(a), x2 = GX(b), y1 = GY(a), y2 = GY(b);
        if ((x1 < 0 && x2 < 0) || (x1 > W && x2 > W) || (y1 < 0 && y2 < 0) || (y1 > H && y2 > H)) continue;
        const mx = (x1 + x2) / 2;
        p.moveTo(x1, y1); p.bezierCurveTo(mx, y1, mx, y2, x2, y2);
        frame.cp++;
      }
      ctx.lineCap = "round";
      ctx.strokeStyle = "rgba(255,255,255,0.9)"; ctx.lineWidth = 7; ctx.stroke(p);
      ctx.strokeStyle = CP_COLOUR; ctx.lineWidth = 3.5; ctx.stroke(p);
    }
    const paths = palette.map(() => new Path2D());
    const cpBox = new Path2D(), taintBox = new Path2D();
    let lastX = -1e9, lastY = -1e9;
    for (const i of vis) {
      const x = GX(i), y = GY(i);
      if (dense) {
        if (Math.abs(x - lastX) < 1 && Math.abs(y - lastY) < 1) continue;
        lastX = x; lastY = y;
        paths[bucket[i]].rect(x - Math.max(w, 2) / 2, y - Math.max(h, 2) / 2, Math.max(w, 2), Math.max(h, 2));
      } else {
        paths[bucket[i]].roundRect(x - w / 2, y - h / 2, w, h, 4 * GR.s);
      }
      if (onCp[i]) cpBox.rect(x - w / 2 - 3, y - h / 2 - 3, w + 6, h + 6);
      if (state.taint && taintState[i]) taintBox.rect(x - w / 2 - 1.5, y - h / 2 - 1.5, w + 3, h + 3);
    }
    for (let b = 0; b < palette.length; b++) { ctx.fillStyle = palette[b]; ctx.fill(paths[b]); }
    if (state.taint) { ctx.strokeStyle = TAINT_COLOUR; ctx.lineWidth = 2; ctx.stroke(taintBox); }
    if (state.cp) { ctx.strokeStyle = CP_COLOUR; ctx.lineWidth = 2.5; ctx.stroke(cpBox); }
    frame.events = vis.length;
    if (!dense && GR.s >= 0.6) {
      ctx.font = Math.round(11 * Math.min(GR.s, 1.4)) + "px system-ui, sans-serif";
      ctx.textBaseline = "middle"; ctx.fillStyle = "#fff";
      for (const i of vis) {
        const x = GX(i), y = GY(i);
        ctx.fillStyle = lightFill(palette[bucket[i]]) ? "#1d2330" : "#fff";
        ctx.fillText(clipText(D.id[i] + " " + D.lanes[lane[i]], w - 8), x - w / 2 + 4, y);
      }
    }
    drawSelection();
    ctx.fillStyle = "#6b7385"; ctx.font = "11px system-ui, sans-serif"; ctx.textBaseline = "top";
    ctx.fillText("event DAG: columns = dependency depth, rows = agents in lane order", 8, 6);
  }
  function hitGraph(x, y) {
    let best = -1;
    const w = NODE_W * GR.s, h = NODE_H * GR.s;
    visibleGraphNodes((i) => {
      const cx = GX(i), cy = GY(i);
      if (Math.abs(x - cx) <= Math.max(w / 2, 3) && Math.abs(y - cy) <= Math.max(h / 2, 3)) best = i;
    });
    return best;
  }

  // ---------------------------------------------------------------- details (text only)
  const details = $("details");
  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text != null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function str(col, i) { const c = D[col][i]; return c < 0 ? null : S[c]; }
  function evButton(i) {
    const b = el("button", D.id[i] + " (" + D.types[type[i]] + ", " + D.lanes[lane[i]] + ")", "ev");
    b.type = "button";
    b.addEventListener("click", () => { select(i, true); });
    return b;
  }
  function showDetails(i) {
    adjacency();
    details.replaceChildren();
    if (i < 0) { details.append(el("p", "Click an event to see its details.", "hint")); return; }
    details.append(el("h2", D.id[i]));
    const badges = el("div");
    const badge = (text, colour) => { const b = el("span", text, "badge"); b.style.background = colour; badges.append(b); };
    badge(D.types[type[i]], TYPE_COLOUR[D.types[type[i]]] || "#888");
    if (onCp[i]) badge("critical path", CP_COLOUR);
    if (taintState[i] === 1) badge("untrusted source", TAINT_COLOUR);
    if (taintState[i] === 2) badge("tainted", TAINT_COLOUR);
    if (err[i]) badge("error", "#c92a2a");
    details.append(badges);
    const tbl = el("table");
    const row = (k, v) => { if (v == null || v === "") return; const tr = el("tr"); tr.append(el("td", k, "k"), el("td", v)); tbl.append(tr); };
    const dur = te[i] - t[i];
    row("type", D.types[type[i]]);
    row("agent", D.lanes[lane[i]]);
    row("role", str("s_role", i));
    row("from", str("s_from", i));
    row("to", str("s_to", i));
    row("tool", str("s_tool", i));
    row("model", str("s_model", i));
    row("time", fmtTime(t[i]) + (D.has_end[i] ? " \u2192 " + fmtTime(te[i]) + " (" + fmtTime(dur) + ")" : ""));
    const tin = D.tin[i], tout = D.tout[i];
    if (tin != null || tout != null) row("tokens", ((tin || 0) + (tout || 0)) + " (in " + (tin ?? "-") + ", out " + (tout ?? "-") + ")");
    if (D.cost[i] != null) row("cost", "$" + D.cost[i].toPrecision(4));
    row("status", err[i] ? "error" : "ok");
    if (D.trusted[i] != null) row("trusted", D.trusted[i] ? "true" : "false");
    row("turn", D.turn[i]);
    row("call_id", str("s_call_id", i));
    row("parent", str("s_parent", i));
    row("content_ref", str("s_content_ref", i));
    for (const k of Object.keys(D.credit)) { const v = D.credit[k][i]; if (v != null) row("credit " + k, +v.toPrecision(6)); }
    details.append(tbl);
    const content = D.content[String(i)];
    if (content != null) {
      details.append(el("div", D.truncated.includes(i) ? "content (first " + D.max_content + " characters)" : "content", "hint"));
      details.append(el("pre", content));
    } else {
      details.append(el("div", "content not kept in this trace", "hint"));
    }
    const extra = D.extra[String(i)];
    if (extra) { details.append(el("div", "attributes", "hint")); details.append(el("pre", JSON.stringify(extra, null, 2))); }
    const list = (title, start, lst, other) => {
      if (start[i] === start[i + 1]) return;
      details.append(el("div", title, "hint"));
      const ul = el("div");
      for (let k = start[i]; k < start[i + 1]; k++) {
        const j = lst[k], line = el("div");
        line.append(el("span", D.edge_types[et[j]] + " "), evButton(other[j]));
        ul.append(line);
      }
      details.append(ul);
    };
    list("inputs (edges in)", IN.start, IN.list, es);
    list("outputs (edges out)", OUT.start, OUT.list, ed);
  }
  function select(i, centre) {
    state.selected = i;
    showDetails(i);
    if (i >= 0 && centre) centreOn(i);
    redraw();
  }
  function centreOn(i) {
    if (state.view === "timeline") {
      const span = (W - GW) / TL.k;
      if (t[i] < TL.x0 || te[i] > TL.x0 + span) TL.x0 = (t[i] + te[i]) / 2 - span / 2;
      const y = lane[i] * LH;
      if (y < TL.sy || y > TL.sy + H - AH - LH) TL.sy = Math.max(0, y - (H - AH) / 2);
    } else {
      if (!GR.built) buildGraph();
      const x = GX(i), y = GY(i);
      if (x < 0 || x > W || y < 0 || y > H) { GR.ox += W / 2 - x; GR.oy += H / 2 - y; }
    }
  }

  // ---------------------------------------------------------------- interaction
  let drag = null;
  const hit = (x, y) => (state.view === "timeline" ? hitTimeline(x, y) : hitGraph(x, y));
  function local(ev) { const r = canvas.getBoundingClientRect(); return [ev.clientX - r.left, ev.clientY - r.top]; }
  function clampTimeline() { // keep some of the trace on screen
    TL.sy = Math.max(0, Math.min(TL.sy, Math.max(0, L * LH - (H - AH) + LH)));
    TL.k = Math.max(1e-12, TL.k);
    const span = (W - GW) / TL.k;
    TL.x0 = Math.max(tmin - span * 0.9, Math.min(TL.x0, tmax - span * 0.1));
  }
  function zoomAt(x, y, f) {
    if (state.view === "timeline") {
      const tm = TL.x0 + (Math.max(x, GW) - GW) / TL.k;
      TL.k *= f; TL.x0 = tm - (Math.max(x, GW) - GW) / TL.k;
      clampTimeline();
    } else {
      GR.ox = x - (x - GR.ox) * f; GR.oy = y - (y - GR.oy) * f; GR.s *= f;
    }
    redraw();
  }
  function panBy(dx, dy) {
    if (state.view === "timeline") { TL.x0 -= dx / TL.k; TL.sy -= dy; clampTimeline(); }
    else { GR.ox += dx; GR.oy += dy; }
    redraw();
  }
  canvas.addEventListener("wheel", (ev) => {
    ev.preventDefault();
    const [x, y] = local(ev);
    const d = ev.deltaMode === 1 ? ev.deltaY * 16 : ev.deltaY;
    if (ev.ctrlKey || ev.altKey || ev.metaKey || state.view === "graph" && !ev.shiftKey) zoomAt(x, y, Math.exp(-d * 0.0015));
    else if (ev.shiftKey) panBy(-(d || ev.deltaX), 0);
    else panBy(-ev.deltaX, -d);
  }, { passive: false });
  canvas.addEventListener("mousedown", (ev) => { const [x, y] = local(ev); drag = { x, y, moved: false }; canvas.focus(); });
  window.addEventListener("mouseup", (ev) => {
    if (!drag) return;
    const [x, y] = local(ev), moved = drag.moved;
    drag = null;
    if (!moved) select(hit(x, y), false);
  });
  canvas.addEventListener("mousemove", (ev) => {
    const [x, y] = local(ev);
    if (drag) {
      if (Math.abs(x - drag.x) + Math.abs(y - drag.y) > 3) drag.moved = true;
      if (drag.moved) { panBy(x - drag.x, y - drag.y); drag.x = x; drag.y = y; }
      tip.style.display = "none";
      return;
    }
    const i = hit(x, y);
    if (i < 0) {
      if (state.view === "timeline" && x < GW && y > AH) {
        const l = Math.floor((y - AH + TL.sy) / LH);
        if (l >= 0 && l < L) { showTip(ev, "agent " + D.lanes[l] + "\n" + (laneStart[l + 1] - laneStart[l]) + " events"); return; }
      }
      tip.style.display = "none"; return;
    }
    const tok = (D.tin[i] || 0) + (D.tout[i] || 0);
    const lines = [D.id[i] + "  " + D.types[type[i]], "agent " + D.lanes[lane[i]], "t " + fmtTime(t[i]) + (D.has_end[i] ? " \u2192 " + fmtTime(te[i]) : "")];
    if (tok) lines.push("tokens " + tok);
    if (D.cost[i] != null) lines.push("cost $" + D.cost[i].toPrecision(3));
    const tool = str("s_tool", i);
    if (tool) lines.push("tool " + tool);
    if (onCp[i]) lines.push("on the critical path");
    if (taintState[i]) lines.push(taintState[i] === 1 ? "untrusted source" : "tainted by untrusted content");
    const c = D.content[String(i)];
    if (c) lines.push("\u201c" + (c.length > 80 ? c.slice(0, 80) + "\u2026" : c).replace(/\s+/g, " ") + "\u201d");
    showTip(ev, lines.join("\n"));
  });
  canvas.addEventListener("mouseleave", () => { tip.style.display = "none"; });
  function showTip(ev, text) {
    tip.textContent = text;
    tip.style.display = "block";
    const x = Math.min(ev.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
    const y = Math.min(ev.clientY + 14, window.innerHeight - tip.offsetHeight - 8);
    tip.style.left = x + "px"; tip.style.top = y + "px";
  }
  canvas.addEventListener("keydown", (ev) => {
    const k = ev.key.toLowerCase();
    if (k === "w" || k === "+" || k === "=") zoomAt(W / 2, H / 2, 1.25);
    else if (k === "s" || k === "-") zoomAt(W / 2, H / 2, 0.8);
    else if (k === "a" || k === "arrowleft") panBy(W / 8, 0);
    else if (k === "d" || k === "arrowright") panBy(-W / 8, 0);
    else if (k === "arrowup") panBy(0, LH * 3);
    else if (k === "arrowdown") panBy(0, -LH * 3);
    else if (k === "f") fit();
    else if (k === "escape") select(-1, false);
    else return;
    ev.preventDefault();
  });
  function fit() { if (state.view === "timeline") fitTimeline(); else fitGraph(); redraw(); }
  function setView(v) {
    state.view = v;
    $("tab-timeline").classList.toggle("on", v === "timeline");
    $("tab-graph").classList.toggle("on", v === "graph");
    if (v === "graph" && !GR.built) { buildGraph(); fitGraph(); }
    if (state.selected >= 0) centreOn(state.selected);
    redraw();
  }
  $("tab-timeline").addEventListener("click", () => setView("timeline"));
  $("tab-graph").addEventListener("click", () => setView("graph"));
  $("fit").addEventListener("click", fit);
  for (const [id, key] of [["show-edges", "edges"], ["show-cp", "cp"], ["show-taint", "taint"]]) {
    $(id).addEventListener("change", (ev) => { state[key] = ev.target.checked; redraw(); });
  }
  const colourSel = $("colour");
  for (const [value, label] of colourModes()) { const o = el("option", label); o.value = value; colourSel.append(o); }
  colourSel.addEventListener("change", () => { state.colour = colourSel.value; setColour(state.colour); legend(); redraw(); });
  $("find").addEventListener("keydown", (ev) => {
    if (ev.key !== "Enter") return;
    const q = ev.target.value.trim();
    if (findId(q) >= 0) { select(findId(q), true); return; }
    const l = D.lanes.indexOf(q);
    if (l >= 0 && state.view === "timeline") { TL.sy = Math.max(0, l * LH - (H - AH) / 3); clampTimeline(); redraw(); }
  });

  // ---------------------------------------------------------------- header and legend
  function legend() {
    const lg = $("legend");
    lg.replaceChildren();
    const item = (label, colour, line, dashed) => {
      const s = el("span", null, "k"), i = el("i", null, line ? "line" : null);
      i.style.background = dashed ? "repeating-linear-gradient(90deg," + colour + " 0 5px,transparent 5px 8px)" : colour;
      s.append(i, el("span", label));
      lg.append(s);
    };
    if (!scale) {
      const present = new Set(type);
      D.types.forEach((n, c) => { if (present.has(c)) item(n, TYPE_COLOUR[n]); });
    } else {
      const s = el("span", null, "k"), bar = el("i");
      bar.style.width = "120px";
      bar.style.background = "linear-gradient(90deg," + palette.slice(0, NB).join(",") + ")";
      s.append(el("span", scale.mode + ": " + +scale.lo.toPrecision(3)), bar, el("span", String(+scale.hi.toPrecision(3))));
      lg.append(s);
      item("no value", NONE_COLOUR);
    }
    const presentE = new Set(et);
    D.edge_types.forEach((n, c) => { if (presentE.has(c)) item(n + " edge", EDGE_COLOUR[n], true); });
    if (cp.length) item("critical path (" + fmtTime(D.cp_length) + ", " + cp.length + " events)", CP_COLOUR, true);
    if (D.taint_src.length) item("untrusted flow (" + D.taint_src.length + " untrusted sources, " + D.tainted.length + " tainted events" + (D.tainted_decisions == null ? "" : ", " + D.tainted_decisions + " tainted decisions") + ")", TAINT_COLOUR, true, true);
  }
  const tr = D.trace;
  $("title").textContent = tr.trace_id;
  document.title = "orchestrace \u00b7 " + tr.trace_id;
  const statParts = [N + " events", M + " edges", L + " agents", "span " + fmtTime(tmax - tmin)];
  if (tr.topology) statParts.push(tr.topology);
  if (tr.rewards && Object.keys(tr.rewards).length) statParts.push("rewards " + Object.entries(tr.rewards).map(([k, v]) => k + "=" + v).join(" "));
  $("stats").textContent = statParts.join(" \u00b7 ");
  $("stats").title = "task " + tr.task_id + (tr.system ? " \u00b7 system " + tr.system : "");

  state.colour = "type";
  setColour("type");
  legend();
  new ResizeObserver(resize).observe(stage);
  W = stage.clientWidth; H = stage.clientHeight;
  DPR = window.devicePixelRatio || 1;
  canvas.width = Math.max(1, Math.round(W * DPR)); canvas.height = Math.max(1, Math.round(H * DPR));
  fitTimeline();
  { const [la, lb] = visibleLanes(); frame.lastEvents = laneStart[lb + 1] - laneStart[la]; }
  timing.indexed = performance.now();
  draw(true);
  timing.drawn = performance.now();

  // a small read-only handle for tests and scripting: state, geometry, selection
  const api = {
    firstRenderMs: timing.drawn,
    timing,
    frame,
    lanes: () => D.lanes.slice(),
    criticalPath: () => Array.from(cp, (i) => D.id[i]),
    selected: () => (state.selected < 0 ? null : D.id[state.selected]),
    view: (v) => { if (v) setView(v); return state.view; },
    colour: (m) => { colourSel.value = m; colourSel.dispatchEvent(new Event("change")); },
    select: (id) => select(findId(id), true),
    locate: (id, span) => { // client coordinates of an event, scrolled into view first;
      const i = findId(id); // with span (seconds), the timeline is zoomed to show that much around it
      if (i < 0) return null;
      if (span && state.view === "timeline") { TL.k = (W - GW) / span; TL.x0 = (t[i] + te[i]) / 2 - span / 2; clampTimeline(); }
      centreOn(i); draw();
      const b = eventBox(i), r = canvas.getBoundingClientRect();
      return { x: r.left + b.cx, y: r.top + b.cy };
    },
    draw: () => { draw(true); return Object.assign({}, frame); },
    pan: (dx, dy) => { panBy(dx, dy); draw(true); return Object.assign({}, frame); },
    zoom: (f) => { zoomAt(W / 2, H / 2, f); draw(true); return Object.assign({}, frame); },
  };
  Object.defineProperty(window, "__orchestrace", { value: Object.freeze(api) });
})();
