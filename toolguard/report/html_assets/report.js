// The toolguard HTML report's page script: reads the report's JSON from the page, draws the
// Plotly figures and fills the two tables. Span text is only ever set with textContent (never
// innerHTML): a label holding markup shows as that markup's text.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("toolguard-data").textContent);
  var $ = function (id) { return document.getElementById(id); };

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function num(v, digits) { return v === null || v === undefined ? "-" : v.toFixed(digits); }
  function withCi(v, ci, digits) {
    if (v === null || v === undefined) return "-";
    if (!ci) return num(v, digits);
    return num(v, digits) + " [" + num(ci[0], digits) + ", " + num(ci[1], digits) + "]";
  }

  // A table whose header cells sort it: numbers by value, text by text, empty values last.
  function sortable(table, rows, columns, render, pinned) {
    var state = { col: -1, dir: 1 };
    var head = table.tHead.rows[0];
    columns.forEach(function (c, i) {
      var th = head.cells[i];
      th.classList.add("sortable");
      th.addEventListener("click", function () {
        state.dir = state.col === i ? -state.dir : 1;
        state.col = i;
        Array.prototype.forEach.call(head.cells, function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", state.dir > 0 ? "ascending" : "descending");
        rows.sort(function (a, b) {
          var x = c.key(a), y = c.key(b);
          if (x === null || x === undefined) return (y === null || y === undefined) ? 0 : 1;
          if (y === null || y === undefined) return -1;
          return (x < y ? -1 : x > y ? 1 : 0) * state.dir;
        });
        render();
      });
    });
    return state;
  }

  // --- the groups table -------------------------------------------------------------------
  var groupCols = [
    { name: "group", key: function (g) { return g.name; }, cell: function (g) { return g.name; } },
    { name: "N", key: function (g) { return g.n; }, cell: function (g) { return g.n; } },
    { name: "TER", key: function (g) { return g.ter; }, cell: function (g) { return withCi(g.ter, g.ci.ter, 3); } },
    { name: "mean FED", key: function (g) { return g.mean_fed; }, cell: function (g) { return withCi(g.mean_fed, g.ci.mean_fed, 2); } },
    { name: "AUC-PEC", key: function (g) { return g.auc_pec; }, cell: function (g) { return withCi(g.auc_pec, g.ci.auc_pec, 3); } },
    { name: "RR-eligible", key: function (g) { return g.rr_eligible; }, cell: function (g) { return g.rr_eligible; } },
    { name: "RR", key: function (g) { return g.rr; }, cell: function (g) { return withCi(g.rr, g.ci.rr, 3); } },
    { name: "S", key: function (g) { return g.s; }, cell: function (g) { return withCi(g.s, g.ci.s, 3); } },
    { name: "final success", key: function (g) { return g.final_success; }, cell: function (g) { return withCi(g.final_success, g.ci.final_success, 3); } },
    { name: "incomplete", key: function (g) { return g.incomplete; }, cell: function (g) { return g.incomplete; } }
  ];
  function groupTable() {
    var table = $("groups");
    var tr = el("tr");
    groupCols.forEach(function (c) { tr.appendChild(el("th", c.name)); });
    table.tHead.appendChild(tr);
    var rows = data.groups.filter(function (g) { return !g.overall; });
    var overall = data.groups.filter(function (g) { return g.overall; });
    function render() {
      var body = table.tBodies[0];
      body.textContent = "";
      rows.concat(overall).forEach(function (g) {
        var r = el("tr", null, g.overall ? "overall" : "");
        groupCols.forEach(function (c, i) { r.appendChild(el(i ? "td" : "th", c.cell(g))); });
        body.appendChild(r);
      });
    }
    sortable(table, rows, groupCols, render);
    render();
  }

  // --- the trajectory table ---------------------------------------------------------------
  var trajectories = data.trajectories;
  var filters = { group: "", cause: "", tool: "" };
  var trajRows = [];
  var trajCols = [];
  function str(i) { return i === null || i === undefined ? null : trajectories.strings[i]; }
  function trajTable() {
    if (!trajectories) {
      $("trajectories-section").appendChild(el("p",
        "No trajectory table: this report was computed without the trajectories (in SQL).", "note"));
      $("trajectory-controls").hidden = true;
      return;
    }
    var c = trajectories.cols;
    for (var i = 0; i < c.id.length; i++) trajRows.push(i);
    var outcome = function (i) { return c.y[i] === null ? null : c.y[i]; };
    trajCols = [
      { name: "trajectory", key: function (i) { return c.id[i]; }, cell: function (i) { return c.id[i]; } },
      { name: "group", key: function (i) { return data.group_names[c.group[i]]; }, cell: function (i) { return data.group_names[c.group[i]]; } },
      { name: "T", key: function (i) { return c.t[i]; }, cell: function (i) { return c.t[i]; } },
      { name: "FED", key: function (i) { return c.fed[i]; }, cell: function (i) { return c.fed[i]; } },
      { name: "Y", key: outcome, cell: function (i) { return c.y[i] === null ? "?" : c.y[i]; } },
      { name: "cause", key: function (i) { return str(c.cause[i]); }, cell: function (i) { return str(c.cause[i]) || "-"; } },
      { name: "tool", key: function (i) { return str(c.tool[i]); }, cell: function (i) { return str(c.tool[i]) || ""; } },
      { name: "check", key: function (i) { return str(c.check[i]); }, cell: function (i) { return str(c.check[i]) || ""; } },
      { name: "message", key: function (i) { return str(c.msg[i]); }, cell: function (i) { return str(c.msg[i]) || ""; } }
    ];
    if (c.args) {
      trajCols.push({ name: "arguments", key: function (i) { return str(c.args[i]); }, cell: function (i) { return str(c.args[i]) || ""; } });
      trajCols.push({ name: "result", key: function (i) { return str(c.res[i]); }, cell: function (i) { return str(c.res[i]) || ""; } });
    }
    var table = $("trajectories");
    var tr = el("tr");
    trajCols.forEach(function (col) { tr.appendChild(el("th", col.name)); });
    table.tHead.appendChild(tr);
    options($("filter-group"), data.group_names.map(function (n, i) { return [String(i), n]; }));
    var causes = [["(executable)", "(executable)"]].concat(data.causes.map(function (x) { return [x, x]; }));
    options($("filter-cause"), causes);
    var tools = {};
    c.tool.forEach(function (t) { if (t !== null) tools[str(t)] = true; });
    options($("filter-tool"), Object.keys(tools).sort().map(function (t) { return [t, t]; }));
    ["group", "cause", "tool"].forEach(function (k) {
      $("filter-" + k).addEventListener("change", function (e) { filters[k] = e.target.value; renderTraj(); });
    });
    $("filter-clear").addEventListener("click", function () { setFilters("", "", ""); });
    sortable(table, trajRows, trajCols, renderTraj);
    renderTraj();
  }
  function options(select, pairs) {
    pairs.forEach(function (p) { var o = el("option", p[1]); o.value = p[0]; select.appendChild(o); });
  }
  function setFilters(group, cause, tool) {
    filters.group = group; filters.cause = cause; filters.tool = tool;
    $("filter-group").value = group; $("filter-cause").value = cause; $("filter-tool").value = tool;
    renderTraj();
  }
  function keep(i) {
    var c = trajectories.cols;
    if (filters.group !== "" && String(c.group[i]) !== filters.group) return false;
    if (filters.cause !== "") {
      var cause = str(c.cause[i]);
      if (filters.cause === "(executable)" ? cause !== null : cause !== filters.cause) return false;
    }
    if (filters.tool !== "" && str(c.tool[i]) !== filters.tool) return false;
    return true;
  }
  function renderTraj() {
    var body = $("trajectories").tBodies[0];
    var frag = document.createDocumentFragment();
    var shown = 0;
    trajRows.forEach(function (i) {
      if (!keep(i)) return;
      shown++;
      var r = document.createElement("tr");
      trajCols.forEach(function (col) { r.appendChild(el("td", col.cell(i))); });
      frag.appendChild(r);
    });
    body.textContent = "";
    body.appendChild(frag);
    var more = trajectories.total > trajectories.shown
      ? " (the table lists the first " + trajectories.shown + " of " + trajectories.total +
        " trajectories by id; the figures count them all)"
      : "";
    $("trajectory-count").textContent = shown + " of " + trajectories.shown + " trajectories shown" + more;
  }

  // --- the figures ------------------------------------------------------------------------
  var config = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["sendDataToCloud"] };
  function draw(id, fig) {
    var node = $(id);
    node.hidden = false;
    return Plotly.newPlot(node, fig.data, fig.layout, config).then(function () { node.dataset.rendered = "1"; });
  }
  function figures() {
    var f = data.figures;
    draw("fig-pec", f.pec);
    draw("fig-causes", f.causes).then(function () {
      $("fig-causes").on("plotly_click", function (ev) {
        if (!trajectories || !ev.points.length) return;
        var p = ev.points[0];
        setFilters(String(p.customdata), p.data.meta, "");
        $("trajectories-section").scrollIntoView();
      });
    });
    draw("fig-decomposition", f.decomposition);
    if (f.compare) draw("fig-compare", f.compare);
  }

  function comparison() {
    var cmp = data.comparison;
    if (!cmp) return;
    $("compare-section").hidden = false;
    $("compare-head").textContent = "A = " + cmp.a + ", B = " + cmp.b + ", paired on label '" +
      cmp.task_label + "': " + cmp.n_paired + " tasks (A has " + cmp.n_tasks_a + ", B has " +
      cmp.n_tasks_b + ")";
    var body = $("compare-table").tBodies[0];
    Object.keys(cmp.metrics).forEach(function (name) {
      var m = cmp.metrics[name];
      var r = el("tr");
      r.appendChild(el("th", name));
      r.appendChild(el("td", num(m.a, 3)));
      r.appendChild(el("td", num(m.b, 3)));
      r.appendChild(el("td", m.diff === null ? "-" : (m.diff >= 0 ? "+" : "") + m.diff.toFixed(3)));
      r.appendChild(el("td", m.ci ? "[" + m.ci[0].toFixed(3) + ", " + m.ci[1].toFixed(3) + "]" : "-"));
      r.appendChild(el("td", m.n_paired));
      body.appendChild(r);
    });
    cmp.warnings.forEach(function (w) { $("warnings").appendChild(el("li", w)); });
  }

  $("title").textContent = data.title;
  document.title = data.title;
  $("grouping").textContent = data.by.length ? "grouped by " + data.by.join(", ") : "one group";
  data.warnings.forEach(function (w) { $("warnings").appendChild(el("li", w)); });
  groupTable();
  comparison();
  if (!$("warnings").children.length) $("warnings-section").hidden = true;
  trajTable();
  figures();
})();
