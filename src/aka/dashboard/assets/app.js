// The aka dashboard: plain JavaScript, no framework, no network. The data and the charts (plotly figure
// JSON built by aka) are embedded in the page, because a page opened from file:// may not fetch files.
// Routes are URL hashes, so the back button works: #overview, #task/COLUMN/TASK, #distributions, #ab,
// #heldout, #validation. Text goes into the page through textContent only.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("site-data").textContent);
  const figures = JSON.parse(document.getElementById("site-figures").textContent);
  const $ = (selector) => document.querySelector(selector);
  const CORRECT = ["correct-and-faster", "correct-but-slower", "correct-unchanged", "correct-untimed"];
  const drawn = new Set();

  function el(tag, text, className) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (className) node.className = className;
    return node;
  }
  function row(cells, numeric) {
    const tr = el("tr");
    cells.forEach((cell, i) => {
      const td = cell instanceof Node ? el("td") : el("td", cell);
      if (cell instanceof Node) td.append(cell);
      if (numeric && numeric.includes(i)) td.classList.add("num");
      tr.append(td);
    });
    return tr;
  }
  function table(head, rows, className) {
    const t = el("table", null, className);
    const thead = el("thead");
    thead.append(row(head));
    thead.querySelectorAll("td").forEach((td) => { const th = el("th", td.textContent); td.replaceWith(th); });
    const tbody = el("tbody");
    rows.forEach((r) => tbody.append(r));
    t.append(thead, tbody);
    return t;
  }
  const speedup = (x) => (x === null || x === undefined ? "n/a" : x.toFixed(3) + "x");
  const number = (x, digits) => (x === null || x === undefined ? "n/a" : x.toFixed(digits));
  const interval = (low, high) => (low === null || high === null || low === undefined || high === undefined
    ? "n/a" : "[" + low.toFixed(3) + ", " + high.toFixed(3) + "]");
  const verdictClass = (word) => "v-" + word.replace(/ /g, "-");
  const taskHref = (column, task) => "#task/" + encodeURIComponent(column) + "/" + encodeURIComponent(task);
  const columnsByKey = new Map(data.columns.map((c) => [c.key, c]));
  const smokeColumns = data.columns.filter((c) => c.smoke_test);

  function badge(text, className) { return el("span", text, "badge " + className); }
  function geomean(values) {
    return values.length ? Math.exp(values.reduce((a, v) => a + Math.log(v), 0) / values.length) : null;
  }
  function draw(id) {
    if (drawn.has(id) || !figures[id] || !document.getElementById(id)) return;
    const figure = figures[id];
    Plotly.newPlot(id, figure.data, figure.layout, { displayModeBar: false, responsive: true });
    drawn.add(id);
  }

  // ---- header, banner, leaderboard
  $("#generated").textContent = "made " + data.generated_at + " by aka " + data.aka_version;
  if (smokeColumns.length) {
    const banner = $("#smoke-banner");
    banner.hidden = false;
    banner.textContent = "Smoke test: " + smokeColumns.map((c) => c.key).join(", ") + " ran on the CPU (Triton's "
      + "interpreter). Their times and speedups say nothing about a GPU.";
  }
  const leaderboard = $("#leaderboard tbody");
  data.columns.forEach((c) => {
    const s = c.stats;
    const cells = [c.key, c.agent, c.device, s.tasks, s.correct, s.faster, s.slower, s.unchanged,
      speedup(s.geomean_speedup), s.mean_score.toFixed(1), s.total_score.toFixed(1), s.skipped,
      Object.entries(s.failures).map(([k, v]) => k + " " + v).join(", ") || "-"];
    const tr = row(cells.map((cell) => el("span", cell, "value")), [3, 4, 5, 6, 7, 8, 9, 10, 11]);
    if (c.smoke_test) {
      tr.children[2].append(" ", badge("smoke test", "smoke"));
      tr.children[8].append(" ", badge("smoke test", "smoke"));
    }
    tr.dataset.column = c.key;
    ["key", "agent", "device", "tasks", "correct", "faster", "slower", "unchanged", "geomean", "mean-score",
      "total-score", "skipped", "failures"].forEach((field, i) => { tr.children[i].dataset.field = field; });
    leaderboard.append(tr);
  });

  // ---- task x column matrix, filters
  const tasks = [...new Map(data.trials.map((t) => [t.task, t.family])).entries()]
    .sort((a, b) => (a[1] + "/" + a[0]).localeCompare(b[1] + "/" + b[0]));
  const trialsOf = new Map();
  data.trials.forEach((t) => {
    const key = t.column + "\u0000" + t.task;
    if (!trialsOf.has(key)) trialsOf.set(key, []);
    trialsOf.get(key).push(t);
  });
  const matrixHead = el("tr");
  matrixHead.append(el("th", "task"), el("th", "family"));
  data.columns.forEach((c) => matrixHead.append(el("th", c.key)));
  $("#matrix thead").append(matrixHead);
  const matrixBody = $("#matrix tbody");
  const families = new Set();
  const verdicts = new Set();
  tasks.forEach(([task, family]) => {
    families.add(family);
    const tr = el("tr");
    tr.dataset.task = task;
    tr.dataset.family = family;
    const seen = [];
    tr.append(el("td", task), el("td", family));
    data.columns.forEach((c) => {
      const td = el("td");
      const trials = trialsOf.get(c.key + "\u0000" + task) || [];
      if (trials.length) {
        const words = [...new Set(trials.map((t) => t.verdict))];
        words.forEach((w) => { seen.push(w); verdicts.add(w); });
        const link = el("a", null, "cell " + (words.length === 1 ? verdictClass(words[0]) : "v-mixed"));
        link.href = taskHref(c.key, task);
        link.dataset.column = c.key;
        link.dataset.task = task;
        const speeds = trials.map((t) => t.speedup).filter((x) => x !== null);
        const label = words.length === 1 ? words[0] : trials.filter((t) => t.correct).length + "/" + trials.length + " correct";
        link.append(el("span", label + (trials.length > 1 ? " (" + trials.length + " repeats)" : ""), "verdict"));
        link.append(el("span", speeds.length ? speedup(geomean(speeds)) : "", "speedup"));
        link.title = trials.map((t) => (t.repeat ? "r" + t.repeat + ": " : "") + t.verdict + (t.failure ? " (" + t.failure + ")" : "")).join("\n");
        td.append(link);
      } else {
        td.textContent = "-";
      }
      tr.append(td);
    });
    tr.dataset.key = [task, family, ...seen].join(" ").toLowerCase();
    tr.dataset.verdicts = seen.join("|");
    matrixBody.append(tr);
  });
  [...families].sort().forEach((f) => $("#family-filter").append(el("option", f)));
  [...verdicts].sort().forEach((v) => $("#verdict-filter").append(el("option", v)));

  function applyFilter() {
    const query = $("#filter").value.trim().toLowerCase();
    const family = $("#family-filter").value;
    const verdict = $("#verdict-filter").value;
    let shown = 0;
    matrixBody.querySelectorAll("tr").forEach((tr) => {
      const hit = (!query || tr.dataset.key.includes(query)) && (!family || tr.dataset.family === family)
        && (!verdict || tr.dataset.verdicts.split("|").includes(verdict));
      tr.classList.toggle("hidden", !hit);
      if (hit) shown += 1;
    });
    $("#shown").textContent = "showing " + shown + " of " + tasks.length + " tasks";
  }
  ["#filter", "#family-filter", "#verdict-filter"].forEach((s) => $(s).addEventListener("input", applyFilter));
  applyFilter();

  // ---- one task in one column: its trials, cases, held-out cases, links
  function casesTable(cases, smoke) {
    const head = ["case", "params", "correct", "baseline ms", "candidate ms", "speedup" + (smoke ? " (smoke test)" : ""),
      "95% interval", "timing", "message"];
    return table(head, cases.map((c) => {
      const tr = row([c.id, c.params || "-", c.correct === null ? "-" : (c.correct ? "yes" : "no"),
        number(c.base_ms, 4), number(c.optimized_ms, 4), speedup(c.speedup), interval(c.ci_low, c.ci_high),
        (c.paired ? "paired" : "frozen baseline") + (c.method ? ", " + c.method : ""), c.message || ""],
      [3, 4, 5]);
      tr.children[5].classList.add("speedup");
      tr.children[6].classList.add("interval");
      return tr;
    }), "cases");
  }
  function casePlot(id, cases) {
    const timed = cases.filter((c) => c.speedup !== null);
    if (!timed.length) return null;
    const div = el("div", null, "case-plot");
    div.id = id;
    const withInterval = timed.every((c) => c.ci_low !== null && c.ci_high !== null);
    const trace = { type: "bar", x: timed.map((c) => c.id), y: timed.map((c) => c.speedup), marker: { color: "#4c78a8" } };
    if (withInterval) {
      trace.error_y = { type: "data", symmetric: false, array: timed.map((c) => c.ci_high - c.speedup),
        arrayminus: timed.map((c) => c.speedup - c.ci_low) };
    }
    figures[id] = { data: [trace], layout: { title: { text: "speedup per case" }, height: 280,
      margin: { l: 50, r: 20, t: 40, b: 60 }, xaxis: { type: "category" },
      shapes: [{ type: "line", xref: "paper", x0: 0, x1: 1, y0: 1, y1: 1, line: { color: "grey", dash: "dot" } }] } };
    drawn.delete(id);
    return div;
  }
  function showTask(columnKey, task) {
    const column = columnsByKey.get(columnKey);
    const trials = trialsOf.get(columnKey + "\u0000" + task) || [];
    $("#task-title").textContent = task + " in " + columnKey;
    $("#task-family").textContent = trials.length ? trials[0].family + (column && column.smoke_test
      ? "; smoke test: CPU timings say nothing about a GPU" : "") : "no result for this task here";
    const holder = $("#task-trials");
    holder.replaceChildren();
    const plots = [];
    trials.forEach((t, i) => {
      const box = el("div", null, "trial");
      box.dataset.repeat = t.repeat === null ? "" : String(t.repeat);
      const title = el("h3");
      title.append(badge(t.verdict, verdictClass(t.verdict)), " ", (t.repeat ? "repeat " + t.repeat + ": " : "") + t.status);
      box.append(title);
      const facts = el("dl");
      const add = (name, value) => { facts.append(el("dt", name), el("dd", value)); };
      add("score", t.score.toFixed(1));
      add("speedup" + (column && column.smoke_test ? " (smoke test)" : ""), speedup(t.speedup)
        + (t.ci_low !== null && t.ci_high !== null ? ", 95% interval " + interval(t.ci_low, t.ci_high) : ""));
      if (t.agent) add("agent", t.agent + (t.agent_seconds !== null ? ", " + t.agent_seconds.toFixed(1) + " s" : "") + (t.agent_tokens ? ", " + t.agent_tokens : ""));
      if (t.evaluation_seconds !== null) add("evaluation", t.evaluation_seconds.toFixed(1) + " s");
      box.append(facts);
      if (t.failure) box.append(el("p", t.failure, "failure"));
      const links = el("p", null, "links");
      t.links.forEach((l) => { const a = el("a", l.label); a.href = l.href; links.append(a); });
      box.append(links);
      if (t.cases.length) {
        box.append(casesTable(t.cases, column && column.smoke_test));
        const plot = casePlot("case-plot-" + i, t.cases);
        if (plot) { box.append(plot); plots.push(plot.id); }
      }
      if (t.heldout) {
        const h = t.heldout;
        box.append(el("h3", "held-out cases: " + h.outcome + ", speedup " + speedup(h.speedup)
          + ", generalization gap " + number(h.generalization_gap, 3)));
        if (h.message) box.append(el("p", h.message, "failure"));
        if (h.cases.length) box.append(casesTable(h.cases, column && column.smoke_test));
      }
      holder.append(box);
    });
    const elsewhere = data.columns.filter((c) => c.key !== columnKey && trialsOf.has(c.key + "\u0000" + task));
    const other = $("#task-elsewhere");
    other.replaceChildren();
    if (elsewhere.length) {
      other.append("The same task in: ");
      elsewhere.forEach((c) => { const a = el("a", c.key); a.href = taskHref(c.key, task); other.append(a, " "); });
    }
    plots.forEach(draw);
  }

  // ---- A/B, held-out, validation
  function buildAb() {
    const holder = $("#ab");
    if (!data.comparisons.length) {
      holder.append(el("p", "No comparison: pass a multi-arm run, or several runs (or run aka compare).", "hint"));
    }
    data.comparisons.forEach((view, i) => {
      holder.append(el("h3", view.title), el("p", "source: " + view.source, "hint"));
      if (view.note) holder.append(el("p", view.note, "failure"));
      view.pairs.forEach((p, j) => {
        const section = el("div", null, "pair");
        section.dataset.pair = p.treatment + " vs " + p.control;
        section.append(el("h3", p.treatment + " vs " + p.control));
        section.append(table(["tasks", "geomean speedup ratio", "95% CI", "paired t p", "Holm p", "wins / losses / ties"],
          [row([p.tasks, p.ratio.toFixed(3) + "x", p.ratio_low.toFixed(3) + " - " + p.ratio_high.toFixed(3),
            p.p_value.toPrecision(3), p.holm_p.toPrecision(3), p.wins + " / " + p.losses + " / " + p.ties], [0, 1, 3, 4])],
        "pair-summary"));
        section.append(el("p", "verdict: " + p.verdict));
        p.warnings.forEach((w) => section.append(el("p", "warning: " + w, "hint")));
        const fig = el("div", null, "figure");
        fig.id = "fig-forest-" + i + "-" + j;
        section.append(fig);
        section.append(table(["task", "family", p.control + " speedup", p.treatment + " speedup", "log diff", "tie band", "outcome"],
          p.rows.map((r) => row([r.task, r.family, speedup(r.control_speedup), speedup(r.treatment_speedup),
            (r.log_diff >= 0 ? "+" : "") + r.log_diff.toFixed(4), r.tie_band.toFixed(4), r.outcome], [2, 3, 4, 5]))));
        holder.append(section);
      });
    });
  }
  function buildHeldout() {
    const holder = $("#heldout");
    const summaries = data.columns.filter((c) => c.heldout);
    if (!summaries.length) {
      holder.append(el("p", "No held-out results: no accepted candidate of a task with held-out cases.", "hint"));
      return;
    }
    holder.append(table(["run / arm", "tasks", "both pass", "opt regression", "both fail", "opt improvement",
      "correctness retention", "mean generalization gap", "mean held-out speedup"],
    summaries.map((c) => {
      const h = c.heldout;
      return row([c.key, h.task_count, h.outcomes.both_pass, h.outcomes.opt_regression, h.outcomes.both_fail,
        h.outcomes.opt_improvement, h.correctness_retention, h.mean_generalization_gap === null ? "n/a" : h.mean_generalization_gap,
        h.mean_heldout_speedup === null ? "n/a" : h.mean_heldout_speedup], [1, 2, 3, 4, 5, 6, 7, 8]);
    }), "heldout-summary"));
    const rows = data.trials.filter((t) => t.heldout).map((t) => {
      const link = el("a", t.task);
      link.href = taskHref(t.column, t.task);
      return row([link, t.column, t.heldout.outcome, t.heldout.baseline_correct ? "yes" : "no",
        t.heldout.candidate_correct ? "yes" : "no", speedup(t.speedup), speedup(t.heldout.speedup),
        number(t.heldout.generalization_gap, 3), t.heldout.message || ""], [5, 6, 7]);
    });
    holder.append(el("h3", "per task"), table(["task", "run / arm", "outcome", "baseline correct", "candidate correct",
      "speedup", "held-out speedup", "generalization gap", "message"], rows, "heldout-tasks"));
  }
  function checkList(checks) {
    const list = el("ul", null, "checks");
    checks.forEach((c) => {
      const li = el("li");
      li.append(badge(c.status, "s-" + c.status), " " + c.name + (c.message ? ": " + c.message : ""));
      list.append(li);
    });
    return list;
  }
  function buildValidation() {
    const holder = $("#validation");
    if (!data.validation.length) {
      holder.append(el("p", "No validation reports in these runs (aka validate writes validation_report.yaml per task "
        + "and validation_summary.yaml per run).", "hint"));
      return;
    }
    data.validation.forEach((v) => {
      const title = el("h3", v.run + " ");
      if (v.summary) title.append(badge(v.summary.overall_status, "s-" + v.summary.overall_status));
      holder.append(title);
      if (v.summary) {
        const facts = Object.entries(v.summary.details).map(([k, val]) => k + ": " + val).join("; ");
        if (facts) holder.append(el("p", facts, "hint"));
        if (v.summary.checks.length) holder.append(checkList(v.summary.checks));
      }
      if (!v.reports.length) return;
      holder.append(table(["task", "status", "checks", "file"], v.reports.map((r) => {
        const tr = row([r.subject, badge(r.overall_status, "s-" + r.overall_status), checkList(r.checks), r.path]);
        tr.dataset.subject = r.subject;
        return tr;
      }), "validation-reports"));
    });
  }
  buildAb();
  buildHeldout();
  buildValidation();

  // ---- routing
  const VIEWS = ["overview", "task", "distributions", "ab", "heldout", "validation"];
  function route() {
    const hash = location.hash.replace(/^#/, "");
    const task = hash.match(/^task\/([^/]+)\/(.+)$/);
    const view = task ? "task" : (VIEWS.includes(hash) ? hash : "overview");
    VIEWS.forEach((v) => { $("#view-" + v).hidden = v !== view; });
    document.querySelectorAll("header nav a").forEach((a) => a.classList.toggle("active", a.dataset.route === view));
    if (task) showTask(decodeURIComponent(task[1]), decodeURIComponent(task[2]));
    if (view === "overview") draw("fig-heatmap");
    if (view === "distributions") draw("fig-distributions");
    if (view === "ab") Object.keys(figures).filter((id) => id.startsWith("fig-forest-")).forEach(draw);
    window.scrollTo(0, 0);
  }
  window.addEventListener("hashchange", route);
  route();
  document.body.dataset.ready = "1";
})();
