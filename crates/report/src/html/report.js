// stallscope HTML report: draws a per-CPU swimlane timeline for every finding from the
// embedded JSON (#stallscope-report, #stallscope-windows), with a lane per block device when
// the window has block requests. Wheel zooms around the pointer,
// drag pans, hovering shows details, double-click resets. No network access is made.
// window.__stallscope exposes what was drawn (for tests and curious readers).
"use strict";
(function () {
  var report = JSON.parse(document.getElementById("stallscope-report").textContent);
  var data = JSON.parse(document.getElementById("stallscope-windows").textContent);
  var debug = { findings: report.findings.length, timelines: [], ready: false };
  window.__stallscope = debug;
  var tip = document.createElement("div");
  tip.className = "tl-tip";
  document.body.appendChild(tip);

  var LABEL_W = 78, LANE_H = 34, AXIS_H = 22, PAD_TOP = 6, REQ_ROWS = 4;
  var COLORS = { victim: "#d32f2f", culprit: "#f57c00", wait: "rgba(211,47,47,0.28)",
                 waitOther: "rgba(120,120,140,0.22)", wake: "#2e7d32", migrate: "#6a1b9a", marker: "#1565c0",
                 finding: "rgba(255,213,79,0.25)", read: "#00897b", write: "#3949ab" };
  // task tracks: the scheduler state of each of the finding's tasks
  var STATE_COLORS = { running: null, runnable: "rgba(211,47,47,0.45)", sleeping: "#d8d8de",
                       blocked: "#ffb74d", dead: "#555", unknown: "rgba(0,0,0,0)",
                       mixed: "rgba(120,110,170,0.55)" };
  var TRACK_H = 18;
  function devName(dev) { return "dev " + Math.floor(dev / 1048576) + ":" + (dev % 1048576); }

  function hue(pid) { var h = (pid * 2654435761) >>> 0; return h % 360; }
  function taskColor(pid, roles) {
    var r = roles[pid];
    if (r === "victim") return COLORS.victim;
    if (r) return COLORS.culprit;
    return "hsl(" + hue(pid) + ",35%,68%)";
  }
  function fmtDur(ns) {
    var a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toFixed(3) + " s";
    if (a >= 1e6) return (ns / 1e6).toFixed(3) + " ms";
    if (a >= 1e3) return (ns / 1e3).toFixed(1) + " µs";
    return Math.round(ns) + " ns";
  }
  function fmtTs(ns) { return (ns / 1e9).toFixed(6) + " s"; }

  function Timeline(el, win, finding) {
    var self = this;
    this.win = win; this.finding = finding;
    this.roles = {}; this.names = {};
    win.tasks.forEach(function (t) { self.names[t.pid] = t.comm; });
    finding.tasks.forEach(function (t) { self.roles[t.pid] = t.role; self.names[t.pid] = t.comm; });
    this.lanes = win.cpus.slice();
    this.laneOf = {};
    this.lanes.forEach(function (c, i) { self.laneOf[c] = i; });
    this.t0 = win.start_ns; this.t1 = Math.max(win.end_ns, win.start_ns + 1);
    // one track per task of the finding (its state over the window), under the lanes
    this.states = win.task_states || [];
    this.tracks = [];
    this.trackOf = {};
    this.states.forEach(function (st) {
      if (self.trackOf[st.pid] === undefined) { self.trackOf[st.pid] = self.tracks.length; self.tracks.push(st.pid); }
    });
    // block devices (block inputs): one lane each below the CPUs, requests stacked in rows
    this.requests = win.requests || [];
    this.devs = [];
    this.devLane = {};
    var rowEnds = {};
    this.requests.slice().sort(function (a, b) { return a.start_ns - b.start_ns; }).forEach(function (r) {
      if (self.devLane[r.dev] === undefined) { self.devLane[r.dev] = self.devs.length; self.devs.push(r.dev); rowEnds[r.dev] = []; }
      var ends = rowEnds[r.dev], row = 0;
      while (row < ends.length && ends[row] > r.start_ns) row++;
      if (row >= REQ_ROWS) row = REQ_ROWS - 1;
      ends[row] = Math.max(ends[row] || 0, r.end_ns);
      r._row = row;
    });
    var bar = document.createElement("div");
    bar.className = "tl-bar";
    bar.innerHTML =
      '<span><span class="swatch" style="background:' + COLORS.victim + '"></span>victim</span>' +
      '<span><span class="swatch" style="background:' + COLORS.culprit + '"></span>other named task</span>' +
      '<span><span class="swatch" style="background:' + COLORS.wait + ';border:1px solid ' + COLORS.victim + '"></span>victim runnable wait</span>' +
      '<span><span class="swatch" style="background:' + COLORS.wake + '"></span>wakeup</span>' +
      '<span><span class="swatch" style="background:' + COLORS.migrate + '"></span>migration</span>' +
      '<span><span class="swatch" style="background:' + COLORS.finding + ';border:1px solid #e0c050"></span>finding window</span>' +
      (this.tracks.length ? '<span>task tracks: <span class="swatch" style="background:' + STATE_COLORS.runnable + '"></span>runnable <span class="swatch" style="background:' + STATE_COLORS.sleeping + '"></span>sleeping (S) <span class="swatch" style="background:' + STATE_COLORS.blocked + '"></span>blocked (D) <span class="swatch" style="background:' + STATE_COLORS.mixed + '"></span>mixed (state changes too fast to draw at this zoom)</span>' : "") +
      (this.requests.length ? '<span><span class="swatch" style="background:' + COLORS.write + '"></span>block write / <span class="swatch" style="background:' + COLORS.read + '"></span>read</span>' : "") +
      "<span>wheel: zoom · drag: pan · double-click: reset</span>";
    var reset = document.createElement("button");
    reset.textContent = "reset zoom";
    reset.onclick = function () { self.t0 = win.start_ns; self.t1 = Math.max(win.end_ns, win.start_ns + 1); self.draw(); };
    bar.appendChild(reset);
    el.appendChild(bar);
    this.canvas = document.createElement("canvas");
    el.appendChild(this.canvas);
    var om = win.omitted, left = om.slices + om.waits + om.wakeups + om.migrations + (om.requests || 0) + (om.markers || 0);
    if (left > 0 || om.task_states > 0) {
      var note = document.createElement("div");
      note.className = "tl-note";
      note.textContent = "Left out of this window (cap of " + data.max_items + " per kind): " +
        om.slices + " slices, " + om.waits + " waits, " + om.wakeups + " wakeups, " + om.migrations + " migrations, " + (om.requests || 0) + " block requests, " + (om.markers || 0) + " trace markers." +
        (om.slices > 0 ? " Grey shading in the CPU lanes: how busy each CPU was there (density of all its runs, including those left out)." : "") +
        (om.task_states > 0 ? " " + om.task_states + " task-state changes too short to draw at this zoom are summarized as mixed spans on the task tracks (nothing is missing from them)." : "");
      el.appendChild(note);
    }
    this.victimWaits = win.waits.filter(function (w) { return self.roles[w.pid] === "victim"; });
    el.setAttribute("data-lanes", this.lanes.join(","));
    el.setAttribute("data-victim-waits", String(this.victimWaits.length));
    el.setAttribute("data-slices", String(win.slices.length));
    el.setAttribute("data-tracks", this.tracks.join(","));
    this.bind();
    this.draw();
    this.el = el;
  }

  Timeline.prototype.x = function (ts) { return LABEL_W + (ts - this.t0) / (this.t1 - this.t0) * (this.w - LABEL_W); };
  Timeline.prototype.tsAt = function (x) { return this.t0 + (x - LABEL_W) / (this.w - LABEL_W) * (this.t1 - this.t0); };
  Timeline.prototype.laneY = function (cpu) { return PAD_TOP + this.laneOf[cpu] * LANE_H; };

  Timeline.prototype.draw = function () {
    var c = this.canvas, dpr = window.devicePixelRatio || 1, self = this, win = this.win;
    this.w = c.clientWidth || 900;
    var nLanes = this.lanes.length + this.devs.length;
    var tracksY = PAD_TOP + nLanes * LANE_H;
    this.h = tracksY + this.tracks.length * TRACK_H + AXIS_H;
    c.style.height = this.h + "px";
    c.width = Math.round(this.w * dpr); c.height = Math.round(this.h * dpr);
    var g = c.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, this.w, this.h);
    g.font = "12px system-ui, sans-serif";
    // finding window
    var fx0 = Math.max(LABEL_W, this.x(this.finding.window.start_ns));
    var fx1 = Math.min(this.w, this.x(this.finding.window.end_ns));
    if (fx1 > fx0) { g.fillStyle = COLORS.finding; g.fillRect(fx0, PAD_TOP, Math.max(1, fx1 - fx0), this.lanes.length * LANE_H); }
    // lanes
    this.lanes.forEach(function (cpu, i) {
      var y = PAD_TOP + i * LANE_H;
      g.fillStyle = i % 2 ? "rgba(0,0,0,0.025)" : "rgba(0,0,0,0)";
      g.fillRect(LABEL_W, y, self.w - LABEL_W, LANE_H);
      g.fillStyle = "#333"; g.textBaseline = "middle";
      g.fillText("CPU " + cpu, 6, y + LANE_H / 2);
      g.strokeStyle = "#e4e4e8"; g.beginPath(); g.moveTo(LABEL_W, y + LANE_H + 0.5); g.lineTo(self.w, y + LANE_H + 0.5); g.stroke();
    });
    this.devs.forEach(function (dev, i) {
      var y = PAD_TOP + (self.lanes.length + i) * LANE_H;
      g.fillStyle = "rgba(57,73,171,0.05)"; g.fillRect(LABEL_W, y, self.w - LABEL_W, LANE_H);
      g.fillStyle = "#333"; g.textBaseline = "middle"; g.fillText(devName(dev), 6, y + LANE_H / 2);
      g.strokeStyle = "#e4e4e8"; g.beginPath(); g.moveTo(LABEL_W, y + LANE_H + 0.5); g.lineTo(self.w, y + LANE_H + 0.5); g.stroke();
    });
    g.save();
    g.beginPath(); g.rect(LABEL_W, 0, this.w - LABEL_W, this.h); g.clip();
    // block requests: issue to completion, stacked rows per device
    var rowH = (LANE_H - 4) / REQ_ROWS;
    this.requests.forEach(function (r) {
      if (r.end_ns < self.t0 || r.start_ns > self.t1) return;
      var x0 = self.x(r.start_ns), x1 = self.x(r.end_ns);
      var y = PAD_TOP + (self.lanes.length + self.devLane[r.dev]) * LANE_H + 2 + r._row * rowH;
      g.fillStyle = r.rwbs.indexOf("R") >= 0 ? COLORS.read : COLORS.write;
      g.fillRect(x0, y, Math.max(0.7, x1 - x0), rowH - 1);
    });
    // density (when the cap left run slices out): how busy each CPU was, bin by bin, drawn
    // behind the slices that are there
    (win.density || []).forEach(function (d) {
      if (self.laneOf[d.cpu] === undefined) return;
      var y = self.laneY(d.cpu) + 12;
      d.busy_permille.forEach(function (p, k) {
        if (!p) return;
        var a = win.start_ns + k * d.bin_ns, b = a + d.bin_ns;
        if (b < self.t0 || a > self.t1) return;
        g.fillStyle = "rgba(60,60,70," + (0.1 + 0.5 * p / 1000).toFixed(3) + ")";
        g.fillRect(self.x(a), y, Math.max(0.7, self.x(b) - self.x(a)), LANE_H - 16);
      });
    });
    // run slices: lower two thirds of the lane
    win.slices.forEach(function (s) {
      if (s.end_ns < self.t0 || s.start_ns > self.t1 || self.laneOf[s.cpu] === undefined) return;
      var x0 = self.x(s.start_ns), x1 = self.x(s.end_ns), y = self.laneY(s.cpu) + 12;
      g.fillStyle = taskColor(s.pid, self.roles);
      // running since before the trace: lighter, it started at the CPU's first event
      g.globalAlpha = s.before_trace ? 0.45 : 1;
      g.fillRect(x0, y, Math.max(0.7, x1 - x0), LANE_H - 16);
      g.globalAlpha = 1;
      if (x1 - x0 > 40) {
        g.fillStyle = self.roles[s.pid] ? "#fff" : "#222"; g.textBaseline = "middle";
        var label = (self.names[s.pid] || "?") + " " + s.pid;
        g.save(); g.beginPath(); g.rect(x0, y, x1 - x0, LANE_H - 16); g.clip();
        g.fillText(label, x0 + 3, y + (LANE_H - 16) / 2); g.restore();
      }
    });
    // runnable waits: top band of the lane; the victim's in red with an outline
    win.waits.forEach(function (w) {
      if (w.end_ns < self.t0 || w.start_ns > self.t1 || self.laneOf[w.cpu] === undefined) return;
      var victim = self.roles[w.pid] === "victim";
      var x0 = self.x(w.start_ns), x1 = self.x(w.end_ns), y = self.laneY(w.cpu) + 2;
      g.fillStyle = victim ? COLORS.wait : COLORS.waitOther;
      g.fillRect(x0, y, Math.max(0.7, x1 - x0), 8);
      if (victim) { g.strokeStyle = COLORS.victim; g.lineWidth = 1.5; g.strokeRect(x0, y, Math.max(0.7, x1 - x0), 8); g.lineWidth = 1; }
    });
    // wakeups: arrow from the waker's CPU to the target CPU (a tick when the same)
    function arrow(x, ya, yb, color) {
      g.strokeStyle = color; g.fillStyle = color; g.beginPath(); g.moveTo(x, ya); g.lineTo(x, yb); g.stroke();
      var d = yb > ya ? -5 : 5;
      g.beginPath(); g.moveTo(x, yb); g.lineTo(x - 3.5, yb + d); g.lineTo(x + 3.5, yb + d); g.closePath(); g.fill();
    }
    win.wakeups.forEach(function (k) {
      if (k.ts_ns < self.t0 || k.ts_ns > self.t1) return;
      var from = self.laneOf[k.cpu], to = self.laneOf[k.target_cpu == null ? k.cpu : k.target_cpu];
      if (from === undefined || to === undefined) return;
      var x = self.x(k.ts_ns);
      var ya = PAD_TOP + from * LANE_H + LANE_H / 2, yb = PAD_TOP + to * LANE_H + 3;
      if (from === to) { ya = PAD_TOP + to * LANE_H + LANE_H - 2; yb = PAD_TOP + to * LANE_H + 11; }
      arrow(x, ya, yb, COLORS.wake);
    });
    // trace markers (trace_marker, trace_printk): a flag at the bottom of the CPU lane
    (win.markers || []).forEach(function (m) {
      if (m.ts_ns < self.t0 || m.ts_ns > self.t1 || self.laneOf[m.cpu] === undefined) return;
      var x = self.x(m.ts_ns), y = PAD_TOP + self.laneOf[m.cpu] * LANE_H + LANE_H - 1;
      g.fillStyle = COLORS.marker; g.strokeStyle = COLORS.marker;
      g.beginPath(); g.moveTo(x, y); g.lineTo(x, y - 12); g.stroke();
      g.beginPath(); g.moveTo(x, y - 12); g.lineTo(x + 6, y - 9); g.lineTo(x, y - 6); g.closePath(); g.fill();
    });
    win.migrations.forEach(function (m) {
      if (m.ts_ns < self.t0 || m.ts_ns > self.t1) return;
      var from = self.laneOf[m.from_cpu], to = self.laneOf[m.to_cpu];
      if (from === undefined || to === undefined) return;
      var x = self.x(m.ts_ns);
      g.setLineDash([3, 2]);
      arrow(x, PAD_TOP + from * LANE_H + LANE_H / 2, PAD_TOP + to * LANE_H + LANE_H / 2, COLORS.migrate);
      g.setLineDash([]);
    });
    g.restore();
    // task tracks: running (on which CPU), runnable, sleeping (S), blocked (D)
    this.tracks.forEach(function (pid, i) {
      var y = tracksY + i * TRACK_H;
      g.fillStyle = "#333"; g.textBaseline = "middle";
      g.save(); g.beginPath(); g.rect(0, y, LABEL_W - 2, TRACK_H); g.clip();
      g.fillText((self.names[pid] || "?") + " " + pid, 6, y + TRACK_H / 2); g.restore();
      g.strokeStyle = "#eee"; g.beginPath(); g.moveTo(LABEL_W, y + TRACK_H + 0.5); g.lineTo(self.w, y + TRACK_H + 0.5); g.stroke();
    });
    g.save();
    g.beginPath(); g.rect(LABEL_W, 0, this.w - LABEL_W, this.h); g.clip();
    this.states.forEach(function (st) {
      if (st.end_ns < self.t0 || st.start_ns > self.t1) return;
      var color = st.state === "running" ? taskColor(st.pid, self.roles) : STATE_COLORS[st.state];
      if (!color) return;
      var x0 = self.x(st.start_ns), x1 = self.x(st.end_ns), y = tracksY + self.trackOf[st.pid] * TRACK_H + 3;
      g.fillStyle = color;
      g.fillRect(x0, y, Math.max(0.7, x1 - x0), TRACK_H - 6);
      if (x1 - x0 > 60 && st.state !== "unknown") {
        var label = st.state === "running" ? "CPU " + st.cpu : st.state;
        g.fillStyle = st.state === "running" ? "#fff" : "#333"; g.textBaseline = "middle";
        g.save(); g.beginPath(); g.rect(x0, y, x1 - x0, TRACK_H - 6); g.clip();
        g.fillText(label, x0 + 3, y + (TRACK_H - 6) / 2); g.restore();
      }
    });
    g.restore();
    // axis in trace seconds (the times timehist and the evidence print)
    var yA = tracksY + this.tracks.length * TRACK_H;
    var span = this.t1 - this.t0, step = Math.pow(10, Math.floor(Math.log10(span / 6)));
    if (span / step > 12) step *= 5; else if (span / step > 6) step *= 2;
    var digits = Math.max(0, Math.min(9, Math.ceil(-Math.log10(step / 1e9))));
    g.fillStyle = "#555"; g.strokeStyle = "#bbb"; g.textBaseline = "top";
    for (var t = Math.ceil(this.t0 / step) * step; t <= this.t1; t += step) {
      var x = this.x(t);
      if (x < LABEL_W) continue;
      g.beginPath(); g.moveTo(x, yA); g.lineTo(x, yA + 4); g.stroke();
      g.fillText((t / 1e9).toFixed(digits) + " s", x + 2, yA + 5);
    }
    this.drawn = { lanes: this.lanes.slice(), t0: this.t0, t1: this.t1 };
  };

  Timeline.prototype.hit = function (mx, my) {
    var self = this, ts = this.tsAt(mx), lane = Math.floor((my - PAD_TOP) / LANE_H);
    var tracksY = PAD_TOP + (this.lanes.length + this.devs.length) * LANE_H;
    if (my >= tracksY && mx >= LABEL_W) {
      var track = Math.floor((my - tracksY) / TRACK_H), pid = this.tracks[track], hitSt = null;
      if (pid === undefined) return null;
      this.states.forEach(function (st) {
        if (st.pid === pid && st.start_ns <= ts && st.end_ns >= ts)
          hitSt = (self.names[pid] || "?") + " (pid " + pid + ") " + st.state +
            (st.cpu == null ? "" : " on CPU " + st.cpu) + "\n" + fmtTs(st.start_ns) + " … " + fmtTs(st.end_ns) +
            "\n" + fmtDur(st.end_ns - st.start_ns);
      });
      return hitSt;
    }
    if (lane >= this.lanes.length && lane < this.lanes.length + this.devs.length && mx >= LABEL_W) {
      var dev = this.devs[lane - this.lanes.length], tolR = (this.t1 - this.t0) / this.w * 2, found = null;
      this.requests.forEach(function (r) {
        if (r.dev === dev && r.start_ns <= ts + tolR && r.end_ns >= ts - tolR)
          found = "block request " + r.rwbs + " on " + devName(r.dev) + (r.open ? " (not completed in the window)" : "") +
            "\nsector " + r.sector + ", " + (r.nr_sector * 512) + " bytes, issued on CPU " + r.cpu +
            "\n" + fmtTs(r.start_ns) + " … " + fmtTs(r.end_ns) + "\n" + fmtDur(r.end_ns - r.start_ns);
      });
      return found;
    }
    if (lane < 0 || lane >= this.lanes.length || mx < LABEL_W) return null;
    var cpu = this.lanes[lane], inLane = my - PAD_TOP - lane * LANE_H, tol = (this.t1 - this.t0) / this.w * 3;
    var best = null;
    this.win.wakeups.forEach(function (k) {
      if (Math.abs(k.ts_ns - ts) <= tol && (k.cpu === cpu || k.target_cpu === cpu))
        best = "wakeup at " + fmtTs(k.ts_ns) + "\n" + (self.names[k.waker_pid] || "?") + " (" + k.waker_pid + ") on CPU " + k.cpu +
          " woke " + (self.names[k.wakee_pid] || "?") + " (" + k.wakee_pid + ")" + (k.target_cpu == null ? "" : " → CPU " + k.target_cpu);
    });
    if (best) return best;
    (this.win.markers || []).forEach(function (m) {
      if (Math.abs(m.ts_ns - ts) <= tol && m.cpu === cpu)
        best = m.event + " at " + fmtTs(m.ts_ns) + " by " + (self.names[m.pid] || "?") + " (" + m.pid + ")\n" + m.text;
    });
    if (best) return best;
    this.win.migrations.forEach(function (m) {
      if (Math.abs(m.ts_ns - ts) <= tol)
        best = "migration at " + fmtTs(m.ts_ns) + "\n" + (self.names[m.pid] || "?") + " (" + m.pid + ") CPU " + m.from_cpu + " → CPU " + m.to_cpu;
    });
    if (best) return best;
    var list = inLane < 11 ? this.win.waits : this.win.slices;
    list.forEach(function (s) {
      if (s.cpu === cpu && s.start_ns <= ts + tol && s.end_ns >= ts - tol) {
        var role = self.roles[s.pid] ? " [" + self.roles[s.pid] + "]" : "";
        best = (list === self.win.waits ? "runnable wait" + (s.open ? " (still waiting at window end)" : "") :
                "running" + (s.before_trace ? " since before the trace (from the CPU's first event)" : "")) +
          " on CPU " + s.cpu + "\n" + (self.names[s.pid] || "?") + " (pid " + s.pid + ")" + role +
          "\n" + fmtTs(s.start_ns) + " … " + fmtTs(s.end_ns) + "\n" + fmtDur(s.end_ns - s.start_ns);
      }
    });
    return best;
  };

  Timeline.prototype.bind = function () {
    var self = this, c = this.canvas, drag = null;
    c.addEventListener("wheel", function (e) {
      e.preventDefault();
      var r = c.getBoundingClientRect(), mx = e.clientX - r.left;
      var at = self.tsAt(Math.max(LABEL_W, mx)), f = Math.exp(e.deltaY * 0.0015);
      var span = Math.max(1000, (self.t1 - self.t0) * f);
      var frac = (at - self.t0) / (self.t1 - self.t0);
      self.t0 = at - frac * span; self.t1 = self.t0 + span;
      self.draw();
    }, { passive: false });
    c.addEventListener("mousedown", function (e) { drag = { x: e.clientX, t0: self.t0, t1: self.t1 }; c.classList.add("dragging"); });
    window.addEventListener("mouseup", function () { drag = null; c.classList.remove("dragging"); });
    c.addEventListener("dblclick", function () { self.t0 = self.win.start_ns; self.t1 = Math.max(self.win.end_ns, self.win.start_ns + 1); self.draw(); });
    c.addEventListener("mousemove", function (e) {
      var r = c.getBoundingClientRect();
      if (drag) {
        var dt = (e.clientX - drag.x) / (self.w - LABEL_W) * (drag.t1 - drag.t0);
        self.t0 = drag.t0 - dt; self.t1 = drag.t1 - dt; self.draw(); tip.style.display = "none"; return;
      }
      var text = self.hit(e.clientX - r.left, e.clientY - r.top);
      if (!text) { tip.style.display = "none"; return; }
      tip.textContent = text; tip.style.display = "block";
      tip.style.left = (e.clientX + 12) + "px"; tip.style.top = (e.clientY + 12) + "px";
    });
    c.addEventListener("mouseleave", function () { tip.style.display = "none"; });
    window.addEventListener("resize", function () { self.draw(); });
  };

  data.windows.forEach(function (win) {
    var finding = report.findings[win.finding];
    var el = document.querySelector('.timeline[data-finding="' + win.finding + '"]');
    if (!finding || !el) return;
    var t = new Timeline(el, win, finding);
    debug.timelines.push({
      finding: win.finding, lanes: t.lanes.slice(), slices: win.slices.length,
      devices: t.devs.slice(), requests: t.requests.length,
      victimWaits: t.victimWaits.map(function (w) { return { pid: w.pid, cpu: w.cpu, start_ns: w.start_ns, end_ns: w.end_ns }; }),
      view: function () { return { t0: t.t0, t1: t.t1 }; },
      // canvas pixel (CSS px, relative to the canvas) of time ts on a CPU's wait band
      waitPoint: function (ts, cpu) { return { x: t.x(ts), y: t.laneY(cpu) + 6 }; },
      // the run slices drawn, and the pixel at the middle of each one's band
      runSlices: win.slices.map(function (s) { return { pid: s.pid, cpu: s.cpu, start_ns: s.start_ns, end_ns: s.end_ns }; }),
      slicePoint: function (ts, cpu) { return { x: t.x(ts), y: t.laneY(cpu) + 12 + (LANE_H - 16) / 2 }; },
      tracks: t.tracks.slice()
    });
  });
  document.documentElement.setAttribute("data-stallscope-ready", "1");
  debug.ready = true;
})();
