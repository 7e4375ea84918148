/* spectrace report --html: draws the charts from the page's inert JSON with uPlot.
   Data is read with JSON.parse and shown through canvas and textContent only. */
(function () {
  "use strict";
  var page = JSON.parse(document.getElementById("spectrace-data").textContent);
  var BAND = page.bands;
  var C = {accept: "#1f77b4", agree: "#ff7f0e", line: "#1d2330", ok: "#2ca02c",
           bad: "#d62728", warn: "#e69500", grid: "#e6e9ef"};
  var HEIGHT = 220;
  var charts = [];

  function count(values) {
    var n = 0;
    for (var i = 0; i < values.length; i++) { if (values[i] !== null) { n++; } }
    return n;
  }

  function axis(extra) {
    var a = {stroke: "#5b6475", grid: {stroke: C.grid, width: 1}, ticks: {stroke: C.grid}};
    for (var k in extra) { if (Object.prototype.hasOwnProperty.call(extra, k)) { a[k] = extra[k]; } }
    return a;
  }

  function categories(labels) {
    return {
      splits: function () { return labels.map(function (_, i) { return i; }); },
      values: function (u, splits) {
        return splits.map(function (i) { return labels[i] === undefined ? "" : labels[i]; });
      }
    };
  }

  function bars(align, size) {
    return uPlot.paths.bars({size: [size, Infinity], align: align});
  }

  /* Healthy-range bands behind the mean acceptance length, as on the dashboards. */
  function drawBands(u) {
    var ctx = u.ctx, b = u.bbox, lo = u.scales.y.min, hi = u.scales.y.max;
    function band(from, to, color) {
      from = Math.max(from, lo); to = Math.min(to, hi);
      if (!(to > from)) { return; }
      var top = u.valToPos(to, "y", true), bottom = u.valToPos(from, "y", true);
      ctx.fillStyle = color;
      ctx.fillRect(b.left, top, b.width, bottom - top);
    }
    band(lo, BAND.red_below, "rgba(214,39,40,0.13)");
    band(BAND.red_below, BAND.amber_below, "rgba(230,149,0,0.15)");
    band(BAND.amber_below, hi, "rgba(44,160,44,0.08)");
  }

  /* Findings on the time axis: a dashed line at each occurrence, the code at the first. */
  function findingsPlugin(findings) {
    return function (u) {
      var ctx = u.ctx, b = u.bbox, dpr = window.devicePixelRatio || 1;
      ctx.save();
      ctx.font = Math.round(11 * dpr) + "px system-ui, sans-serif";
      ctx.textAlign = "left";
      ctx.textBaseline = "alphabetic";
      ctx.lineWidth = dpr;
      findings.forEach(function (f, k) {
        var color = f.severity === "error" ? C.bad : C.warn;
        var lastX = -1e9, first = true;
        f.times.forEach(function (t) {
          if (t === null) { return; }
          var x = Math.round(u.valToPos(t, "x", true));
          if (x < b.left - 1 || x > b.left + b.width + 1 || x - lastX < 2 * dpr) { return; }
          lastX = x;
          ctx.strokeStyle = color;
          ctx.setLineDash([4 * dpr, 3 * dpr]);
          ctx.beginPath(); ctx.moveTo(x, b.top); ctx.lineTo(x, b.top + b.height); ctx.stroke();
          if (first) {
            ctx.setLineDash([]);
            ctx.fillStyle = color;
            var w = ctx.measureText(f.code).width, right = b.left + b.width;
            var tx = x + 3 * dpr + w <= right ? x + 3 * dpr : Math.max(b.left, x - 3 * dpr - w);
            ctx.fillText(f.code, tx, b.top + (12 + 13 * k) * dpr);
            first = false;
          }
        });
      });
      ctx.restore();
    };
  }

  function timeRange(view) {
    var ts = view.timeline.time.filter(function (t) { return t !== null; });
    view.findings.forEach(function (f) {
      f.times.forEach(function (t) { if (t !== null) { ts.push(t); } });
    });
    var lo = Math.min.apply(null, ts), hi = Math.max.apply(null, ts);
    if (hi - lo < 2) { lo -= 30; hi += 30; }
    var pad = (hi - lo) * 0.02;
    return [lo - pad, hi + pad];
  }

  var PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2",
                 "#7f7f7f", "#bcbd22", "#17becf", "#d62728", "#393b79", "#637939"];

  /* The estimate's interval as whiskers over each bar, and the line of no speed-up. */
  function intervalPlugin(lo, hi, bound) {
    return function (u) {
      var ctx = u.ctx, b = u.bbox, dpr = window.devicePixelRatio || 1;
      ctx.save();
      ctx.lineWidth = 1.5 * dpr;
      ctx.strokeStyle = C.line;
      ctx.setLineDash([]);
      for (var i = 0; i < lo.length; i++) {
        if (lo[i] === null || hi[i] === null || bound[i]) { continue; }
        var x = u.valToPos(i, "x", true), w = 6 * dpr;
        var y0 = u.valToPos(lo[i], "y", true), y1 = u.valToPos(hi[i], "y", true);
        ctx.beginPath();
        ctx.moveTo(x, y0); ctx.lineTo(x, y1);
        ctx.moveTo(x - w, y0); ctx.lineTo(x + w, y0);
        ctx.moveTo(x - w, y1); ctx.lineTo(x + w, y1);
        ctx.stroke();
      }
      var one = u.valToPos(1, "y", true);
      ctx.strokeStyle = C.bad;
      ctx.setLineDash([5 * dpr, 4 * dpr]);
      ctx.beginPath(); ctx.moveTo(b.left, one); ctx.lineTo(b.left + b.width, one); ctx.stroke();
      ctx.restore();
    };
  }

  var BUILD = {
    tokens_k: function (view) {
      var ks = view.tokens_k.k, labels = ks.map(function (k) { return k === 0 ? "off" : "K'=" + k; });
      var series = [{label: "draft tokens"}], data = [ks];
      view.tokens_k.series.forEach(function (s, i) {
        var color = PALETTE[i % PALETTE.length];
        series.push({label: s.label, stroke: color, width: 2,
                     points: {show: true, size: 7, fill: color}});
        data.push(s.y);
      });
      return {
        data: data,
        opts: {
          scales: {x: {time: false, range: [-0.3, ks.length - 0.7]},
                   y: {range: function (u, a, b) { return [0, (b || 1) * 1.15]; }}},
          axes: [axis(categories(labels)), axis({label: "tokens/s per request", size: 60})],
          series: series
        }
      };
    },
    speedup: function (view) {
      var d = view.speedup, xs = d.labels.map(function (_, i) { return i; });
      var labels = d.labels.map(function (l) { return "batch " + l; });
      return {
        data: [xs, d.est],
        opts: {
          scales: {x: {time: false, range: [-0.6, xs.length - 0.4]},
                   y: {range: function (u, a, b) {
                     var top = 1.2;
                     d.hi.concat(d.est).forEach(function (v) { if (v !== null && v * 1.1 > top) { top = v * 1.1; } });
                     return [0, top];
                   }}},
          axes: [axis(categories(labels)),
                 axis({label: "speed-up (1 = plain)", size: 50})],
          series: [{label: "batch size"},
                   {label: "estimated speed-up (whiskers: interval)", stroke: C.accept,
                    fill: C.accept, paths: bars(0, 0.5), points: {show: false}}],
          hooks: {draw: [intervalPlugin(d.lo, d.hi, d.bound)]}
        }
      };
    },
    positions: function (view) {
      var acc = view.positions.acceptance, agr = view.positions.agreement;
      var n = Math.max(acc.length, agr.length), xs = [], labels = [];
      for (var i = 0; i < n; i++) { xs.push(i); labels.push("position " + i); }
      function pad(v) { var out = v.slice(); while (out.length < n) { out.push(null); } return out; }
      return {
        data: [xs, pad(acc), pad(agr)],
        opts: {
          scales: {x: {time: false, range: [-0.6, n - 0.4]}, y: {range: [0, 1]}},
          axes: [axis(categories(labels)), axis({label: "share of request-steps", size: 50})],
          series: [{label: "position"},
                   {label: "acceptance", stroke: C.accept, fill: C.accept, paths: bars(-1, 0.38),
                    points: {show: false}},
                   {label: "token agreement", stroke: C.agree, fill: C.agree,
                    paths: bars(1, 0.38), points: {show: false}}]
        }
      };
    },
    lengths: function (view) {
      var xs = [], ys = [];
      view.lengths.x.forEach(function (k, i) {
        var x = Number(k);
        if (isFinite(x)) { xs.push(x); ys.push(view.lengths.y[i]); }
      });
      var lo = Math.min.apply(null, xs), hi = Math.max.apply(null, xs);
      return {
        data: [xs, ys],
        opts: {
          scales: {x: {time: false, range: [lo - 0.6, hi + 0.6]}, y: {range: function (u, a, b) { return [0, (b || 1) * 1.1]; }}},
          axes: [axis({label: "accept length (accepted + bonus)",
                       splits: function () { return xs; }}),
                 axis({label: "request-steps", size: 60})],
          series: [{label: "length"},
                   {label: "request-steps", stroke: C.accept, fill: C.accept,
                    paths: bars(0, 0.6), points: {show: false}}]
        }
      };
    },
    mal: function (view) {
      return {
        data: [view.timeline.time, view.timeline.mal],
        opts: {
          scales: {x: {time: true, range: function () { return timeRange(view); }},
                   y: {range: function (u, a, b) {
                     var top = Math.max(b === null ? 0 : b * 1.1, BAND.amber_below * 1.25);
                     return [Math.min(a === null ? 1 : a, 1) - 0.1, top];
                   }}},
          axes: [axis({label: "time (UTC)"}), axis({label: "tokens per verify step", size: 50})],
          series: [{label: "time"},
                   {label: "mean acceptance length", stroke: C.line, width: 2,
                    points: {show: true, size: 6, fill: C.line}}],
          hooks: {drawClear: [drawBands], draw: [findingsPlugin(view.findings)]}
        }
      };
    },
    rate: function (view) {
      return {
        data: [view.timeline.time, view.timeline.rate],
        opts: {
          scales: {x: {time: true, range: function () { return timeRange(view); }},
                   y: {range: [0, 1]}},
          axes: [axis({label: "time (UTC)"}), axis({label: "accepted / proposed", size: 50})],
          series: [{label: "time"},
                   {label: "acceptance rate", stroke: C.accept, width: 2,
                    points: {show: true, size: 6, fill: C.accept}}],
          hooks: {draw: [findingsPlugin(view.findings)]}
        }
      };
    },
    /* --baseline: the baseline run and the current one overlaid, a pair of bars per
       category (a position, a bucket of a breakdown). */
    pair: function (view) {
      var d = view.pair, xs = d.labels.map(function (_, i) { return i; });
      return {
        data: [xs, d.base, d.cur],
        opts: {
          scales: {x: {time: false, range: [-0.6, xs.length - 0.4]},
                   y: {range: function (u, a, b) { return [0, Math.max(d.top || 0, (b || 1) * 1.1)]; }}},
          axes: [axis(categories(d.labels)), axis({label: d.ylabel, size: 50})],
          series: [{label: d.xlabel},
                   {label: "baseline", stroke: C.agree, fill: C.agree, paths: bars(-1, 0.38),
                    points: {show: false}},
                   {label: "current", stroke: C.accept, fill: C.accept, paths: bars(1, 0.38),
                    points: {show: false}}]
        }
      };
    },
    /* --baseline: mean acceptance length over each run's own time (seconds from its
       first snapshot), overlaid. */
    pair_time: function (view) {
      var d = view.pair_time;
      return {
        data: [d.x, d.base, d.cur],
        opts: {
          scales: {x: {time: false}, y: {range: function (u, a, b) {
            return [Math.min(a === null ? 1 : a, 1) - 0.1, (b === null ? 1 : b) * 1.1]; }}},
          axes: [axis({label: "seconds from the run's first snapshot"}),
                 axis({label: "tokens per verify step", size: 50})],
          series: [{label: "seconds"},
                   {label: "baseline", stroke: C.agree, width: 2, spanGaps: true,
                    points: {show: true, size: 5, fill: C.agree}},
                   {label: "current", stroke: C.accept, width: 2, spanGaps: true,
                    points: {show: true, size: 5, fill: C.accept}}]
        }
      };
    },
    widths: function (view) {
      var xs = [], labels = [], ok = [], bad = [];
      view.widths.forEach(function (w, i) {
        xs.push(i); labels.push(w.label);
        ok.push(w.ok ? w.count : null); bad.push(w.ok ? null : w.count);
      });
      return {
        data: [xs, ok, bad],
        opts: {
          scales: {x: {time: false, range: [-0.6, xs.length - 0.4]},
                   y: {range: function (u, a, b) { return [0, (b || 1) * 1.1]; }}},
          axes: [axis(categories(labels)), axis({label: "draft passes", size: 60})],
          series: [{label: "pass kind, width"},
                   {label: "as expected", stroke: C.ok, fill: C.ok, paths: bars(0, 0.5),
                    points: {show: false}},
                   {label: "not what the draft expects", stroke: C.bad, fill: C.bad,
                    paths: bars(0, 0.5), points: {show: false}}]
        }
      };
    }
  };

  function draw(div, view) {
    var kind = div.getAttribute("data-chart");
    try {
      var spec = BUILD[kind](view);
      spec.opts.width = Math.max(160, div.clientWidth);
      spec.opts.height = HEIGHT;
      spec.opts.tzDate = function (ts) { return uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"); };
      spec.opts.legend = {show: true, live: false};
      var u = new uPlot(spec.opts, spec.data, div);
      var points = 0;
      for (var s = 1; s < spec.data.length; s++) { points += count(spec.data[s]); }
      div.setAttribute("data-points", String(points));
      charts.push({u: u, div: div});
    } catch (e) {
      div.textContent = "This chart could not be drawn (" + e + "); the tables below hold its figures.";
      div.setAttribute("data-error", "1");
    }
  }

  var byId = {};
  page.views.forEach(function (v) { byId[v.id] = v; });
  Array.prototype.forEach.call(document.querySelectorAll("[data-chart]"), function (div) {
    var view = byId[div.getAttribute("data-view")];
    if (view) { draw(div, view); }
  });
  document.body.setAttribute("data-charts-drawn", String(charts.length));

  function resizeAll() {
    charts.forEach(function (c) {
      var w = Math.max(160, c.div.clientWidth);
      if (w !== c.u.width) { c.u.setSize({width: w, height: HEIGHT}); }
    });
  }
  if (window.ResizeObserver) {
    var ro = new ResizeObserver(function () { window.requestAnimationFrame(resizeAll); });
    charts.forEach(function (c) { ro.observe(c.div); });
  }
  window.addEventListener("resize", resizeAll);
  window.addEventListener("beforeprint", resizeAll);
  if (window.matchMedia) {
    var mq = window.matchMedia("print");
    if (mq.addEventListener) { mq.addEventListener("change", resizeAll); }
  }
}());
