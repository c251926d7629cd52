// archsql site: bind each page's query rows to its charts and tables; filter and sort.
// Numbers are never computed here: rows are shown as the saved queries returned them.
"use strict";
window.ARCHSQL = {
  data: {}, specs: {}, filters: {}, sources: {}, views: {}, ready: false, renders: 0,
  split: null, chunks: {}, loading: {},

  load(payload) {
    for (const [name, t] of Object.entries(payload.data)) {
      this.data[name] = t.rows.map((r) => Object.fromEntries(t.columns.map((c, i) => [c, r[i]])));
    }
    Object.assign(this.specs, payload.specs);
    Object.assign(this.filters, payload.filters);
    Object.assign(this.sources, payload.sources || {});
    this.split = payload.split || null;
    const start = () => this.start();
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
    else start();
  },

  // rows of one value of the split control (a data file per deployment), loaded on demand
  chunk(value, data) {
    const rows = {};
    for (const [name, t] of Object.entries(data)) {
      rows[name] = t.rows.map((r) => Object.fromEntries(t.columns.map((c, i) => [c, r[i]])));
    }
    this.chunks[value] = rows;
  },

  // the split value picked now, once its file is loaded (null: loading it; refresh runs again)
  splitValue() {
    const control = document.getElementById("filter-" + this.split.field);
    const value = control ? control.value : "";
    if (value in this.chunks || !(value in this.split.files)) return value;
    if (!this.loading[value]) {
      this.loading[value] = true;
      const script = document.createElement("script");
      script.src = this.split.files[value];
      script.onload = () => this.refresh();
      script.onerror = () => console.error("archsql: cannot load " + script.src);
      document.body.appendChild(script);
    }
    return null;
  },

  rowsOf(name, value) {
    if (this.split && this.split.sources.includes(name)) return (this.chunks[value] || {})[name] || [];
    return this.data[name] || [];
  },

  start() {
    document.querySelectorAll(".filter").forEach((el) =>
      el.addEventListener(el.tagName === "INPUT" ? "input" : "change", () => this.refresh()));
    document.querySelectorAll("table.sortable th").forEach((th) =>
      th.addEventListener("click", () => this.sort(th)));
    this.refresh();
  },

  controls() {
    return Array.from(document.querySelectorAll(".filter")).map((el) => ({
      field: el.dataset.field, op: el.dataset.op || "equals", value: el.value,
    }));
  },

  keep(row, controls, fields) {
    return controls.every((c) => {
      if (c.value === "" || (fields && !fields.includes(c.field) && c.op !== "contains")) return true;
      if (!(c.field in row)) return true;
      const v = row[c.field] === null ? "" : String(row[c.field]);
      return c.op === "contains" ? v.toLowerCase().includes(c.value.toLowerCase()) : v === c.value;
    });
  },

  // Rows of a table: hidden when a control's field (a data- attribute) does not match.
  filterTables(controls) {
    let models = null;
    document.querySelectorAll("table.rows[id^=table-]").forEach((table) => {
      const rows = Array.from(table.tBodies[0].rows);
      let shown = 0;
      rows.forEach((tr) => {
        const row = {};
        for (const [k, v] of Object.entries(tr.dataset)) row[k.replace(/[A-Z]/g, (c) => "_" + c.toLowerCase())] = v;
        const keep = this.keep(row, controls, null);
        tr.hidden = !keep;
        if (keep) shown += 1;
        if (keep && row.model !== undefined) (models = models || new Set()).add(row.model);
      });
      if (models === null && rows.some((tr) => tr.dataset.model !== undefined)) models = new Set();
      const count = document.getElementById("shown-count");
      if (count) count.textContent = String(shown);
    });
    return models;
  },

  refresh() {
    const generation = (this.generation = (this.generation || 0) + 1);
    const controls = this.controls();
    const value = this.split ? this.splitValue() : null;
    if (this.split && value === null) return; // its file's onload refreshes again
    const models = this.filterTables(controls);
    const jobs = [];
    document.querySelectorAll(".chart[data-figure]").forEach((el) => {
      const id = el.dataset.figure;
      const spec = this.specs[id];
      const name = spec.data.name;
      const fields = this.filters[id] || [];
      const shown = (n) => this.rowsOf(n, value).filter((r) =>
        this.keep(r, controls, fields) && (models === null || !("model" in r) || models.has(r.model)));
      const rows = shown(name);
      const section = el.closest(".figure");
      section.querySelector(".empty").hidden = rows.length > 0;
      el.hidden = rows.length === 0;
      el.dataset.rows = String(rows.length);
      if (this.views[id]) { this.views[id].finalize(); delete this.views[id]; }
      if (rows.length === 0) { el.replaceChildren(); return; } // the page's sentence says why
      // the chart's first dataset decides whether it is drawn; the others (roofs) come along
      const datasets = { [name]: rows };
      for (const other of this.sources[id] || []) if (other !== name) datasets[other] = shown(other);
      const full = Object.assign({}, spec, { datasets });
      // a param named chosen_FIELD takes the value of the page's FIELD control (it marks, never filters)
      if (spec.params) {
        full.params = spec.params.map((p) => {
          const control = p.name.startsWith("chosen_") && document.getElementById("filter-" + p.name.slice(7));
          return control ? Object.assign({}, p, { value: control.value }) : p;
        });
      }
      jobs.push(vegaEmbed(el, full, { actions: false, renderer: "svg" }).then((result) => {
        if (generation === this.generation) this.views[id] = result.view;
        else result.view.finalize(); // a later filter change drew this chart again
      }));
    });
    Promise.all(jobs).then(() => this.done(generation));
  },

  // body[data-ready] counts finished refreshes (tests and screenshots wait on it)
  done(generation) {
    if (generation !== this.generation) return;
    this.renders += 1;
    this.ready = true;
    document.body.dataset.ready = String(this.renders);
  },

  sort(th) {
    const table = th.closest("table");
    const col = th.dataset.col;
    const dir = th.dataset.dir === "asc" ? "desc" : "asc";
    table.querySelectorAll("th").forEach((h) => delete h.dataset.dir);
    th.dataset.dir = dir;
    const body = table.tBodies[0];
    const value = (tr) => JSON.parse(tr.querySelector(`td[data-col="${col}"]`).dataset.value);
    const rows = Array.from(body.rows).sort((a, b) => {
      const x = value(a), y = value(b);
      if (x === y) return 0;
      if (x === null) return 1;
      if (y === null) return -1;
      return (x < y ? -1 : 1) * (dir === "asc" ? 1 : -1);
    });
    rows.forEach((tr) => body.appendChild(tr));
  },
};
