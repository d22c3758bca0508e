// gpuplan web page: every figure and chart comes from POST /view/<command>, which answers
// exactly what `gpuplan <command> --json` prints (plus server-drawn SVG charts). No library.
"use strict";

const $ = (id) => document.getElementById(id);
let served = {};        // command -> accepted body fields (GET /api/commands)
let uploaded = null;    // a config.json's contents, when the user gave one
let generation = 0;     // drops answers that arrive after a newer request

async function post(path, body) {
  const r = await fetch(path, {method: "POST", headers: {"content-type": "application/json"},
                               body: JSON.stringify(body)});
  const j = await r.json();
  if (!r.ok) throw new Error(j.error || r.statusText);
  return j;
}

function sig(x) { return Number(x.toPrecision(3)).toString(); }
function fmtBytes(n) {
  const u = [["TB", 1e12], ["GB", 1e9], ["MB", 1e6], ["kB", 1e3]];
  for (const [s, f] of u) if (Math.abs(n) >= f) return `${sig(n / f)} ${s}`;
  return `${n} B`;
}
function fmtSeconds(s) {
  if (s >= 1) return `${sig(s)} s`;
  if (s >= 1e-3) return `${sig(s * 1e3)} ms`;
  return `${sig(s * 1e6)} µs`;
}
function int(id) { const v = Number($(id).value); return Number.isInteger(v) ? v : $(id).value; }

// Only the fields the endpoint declares (commands added later get what they accept).
function pick(name, values) {
  const fields = (served[name] || {}).fields || [];
  const out = {};
  for (const [k, v] of Object.entries(values)) if (fields.includes(k) && v !== undefined) out[k] = v;
  return out;
}

function requests() {
  const who = uploaded ? {config: uploaded} : {model: $("model").value};
  const base = {...who, gpu: $("gpu").value};
  const tp = int("tp");
  if ($("mode").value === "train") {
    const t = {micro_batch: int("micro-batch"), seq_len: int("seq-len"), precision: $("precision").value,
               zero: int("zero"), recompute: $("recompute").value, tp};
    return {
      // the layout `gpuplan train` uses: data parallel over the GPUs left after tensor parallel
      memory: {...base, mode: "train", ...t, dp: Math.max(1, Math.floor(int("gpus") / tp))},
      roofline: {...base, batch: t.micro_batch, seq_len: t.seq_len, phase: "train"},
      train: {...base, ...t, gpus: int("gpus"), scaling: true},
      cost: {gpu: base.gpu, gpus: int("gpus")},
    };
  }
  const i = {batch: int("batch"), context: int("context"), weight_dtype: $("weight-dtype").value,
             kv_dtype: $("kv-dtype").value, tp};
  return {
    memory: {...base, mode: "infer", ...i},
    roofline: {...base, batch: i.batch, seq_len: i.context, phase: "decode"},
    serve: {...base, ...i, prompt_len: i.context},
    cost: {gpu: base.gpu, gpus: int("gpus")},
  };
}

function show(box, charts) {
  box.innerHTML = charts.map((c) => c.svg).join("");  // server-built SVG, every text escaped
}

// Contract keys (DESIGN.md) shown for commands whose charts may not exist yet.
const SERVE_KEYS = ["ttft_s", "tpot_s", "e2e_latency_s", "output_tokens_per_s",
                    "cost_per_million_tokens_usd", "compute_bound_batch"];
const COST_KEYS = ["buy.total_usd", "rent.total_usd", "break_even_utilization"];

function fmtKey(k, v) {
  if (typeof v !== "number") return String(v);
  if (k.endsWith("_usd")) return `$${v.toLocaleString("en-US", {maximumFractionDigits: 2})}`;
  if (k.endsWith("_s") && !k.endsWith("per_s")) return fmtSeconds(v);
  return sig(v);
}

function showOther(box, result, charts, keys) {
  const rows = keys.map((k) => [k, k.split(".").reduce((o, p) => (o == null ? o : o[p]), result)])
    .filter(([, v]) => v !== undefined && v !== null);
  box.innerHTML = "";
  const dl = document.createElement("dl");
  for (const [k, v] of rows) {
    const dt = document.createElement("dt"), dd = document.createElement("dd");
    dt.textContent = k; dd.textContent = fmtKey(k, v); dd.dataset.value = String(v);
    dd.dataset.testid = k.replaceAll(".", "-").replaceAll("_", "-");
    dl.append(dt, dd);
  }
  box.append(dl);
  box.insertAdjacentHTML("beforeend", charts.map((c) => c.svg).join(""));
  box.hidden = rows.length === 0 && charts.length === 0;
}

function showMemory(r) {
  const total = $("memory-total"), cap = $("memory-capacity"), fits = $("fits");
  total.dataset.bytes = String(r.total_bytes);
  total.textContent = fmtBytes(r.total_bytes);
  cap.dataset.bytes = String(r.capacity_bytes);
  cap.textContent = fmtBytes(r.capacity_bytes);
  fits.textContent = r.fits ? (r.fits_with_margin === false ? "fits, tight" : "fits") : "does not fit";
  fits.className = r.fits ? "fits-yes" : "fits-no";
}

function showTrain(r) {
  const st = $("step-time");
  st.dataset.seconds = r.fits ? String(r.step_time_s) : "";
  st.textContent = r.fits ? fmtSeconds(r.step_time_s) : "does not fit";
  $("mfu").textContent = r.fits && r.mfu != null ? `${(r.mfu * 100).toFixed(1)}%` : "-";
}

async function update() {
  const mine = ++generation;
  const reqs = requests();
  const names = Object.keys(reqs).filter((n) => n in served);
  const t0 = performance.now();
  $("status").dataset.state = "loading";
  const answers = await Promise.allSettled(names.map((n) => post(`/view/${n}`, pick(n, reqs[n]))));
  if (mine !== generation) return;
  const errors = [];
  names.forEach((n, k) => {
    const a = answers[k];
    if (a.status === "rejected") { errors.push(`${n}: ${a.reason.message}`); return; }
    const {result, charts} = a.value;
    if (n === "memory") { showMemory(result); show($("chart-memory"), charts); }
    if (n === "roofline") {
      const rt = $("roofline-time");
      rt.dataset.seconds = String(result.total_time_s);
      rt.textContent = fmtSeconds(result.total_time_s);
      show($("chart-roofline"), charts);
    }
    if (n === "train") {  // its memory chart repeats the memory card's (same layout)
      showTrain(result);
      show($("chart-train"), charts.filter((c) => !c.svg.includes('data-testid="chart-memory"')));
    }
    if (n === "serve") showOther($("chart-serve"), result, charts, SERVE_KEYS);
    if (n === "cost") showOther($("chart-cost"), result, charts, COST_KEYS);
  });
  const err = $("error");
  err.hidden = errors.length === 0;
  err.textContent = errors.join("\n");
  $("status").dataset.state = errors.length ? "error" : "ready";
  $("status").textContent = `updated in ${Math.round(performance.now() - t0)} ms`;
}

let timer = null;
function later() { clearTimeout(timer); timer = setTimeout(update, 200); }

function fill(select, names, preferred) {
  select.innerHTML = "";
  for (const n of names) {
    const o = document.createElement("option");
    o.value = n; o.textContent = n;
    select.appendChild(o);
  }
  if (names.includes(preferred)) select.value = preferred;
}

function setMode() {
  document.body.classList.toggle("mode-train", $("mode").value === "train");
  document.body.classList.toggle("mode-infer", $("mode").value === "infer");
}

async function upload(ev) {
  const file = ev.target.files[0];
  if (!file) return;
  try {
    uploaded = JSON.parse(await file.text());
    $("config-name").textContent = `using ${file.name}`;
    $("config-clear").hidden = false;
    $("model").disabled = true;
  } catch (e) {
    uploaded = null;
    $("error").hidden = false;
    $("error").textContent = `config.json: not valid JSON (${e.message})`;
    return;
  }
  later();
}

async function download() {
  const reqs = requests();
  const name = $("mode").value === "train" && "train" in served ? "train" : "memory";
  const r = await fetch(`/report/${name}`, {method: "POST", body: JSON.stringify(pick(name, reqs[name])),
                                           headers: {"content-type": "application/json"}});
  if (!r.ok) { $("error").hidden = false; $("error").textContent = (await r.json()).error; return; }
  const a = document.createElement("a");
  a.href = URL.createObjectURL(await r.blob());
  a.download = `gpuplan-${name}.html`;
  document.body.appendChild(a);
  a.click();
  a.remove();
}

async function start() {
  served = (await (await fetch("/api/commands")).json()).commands;
  for (const box of document.querySelectorAll("[data-endpoint]")) box.hidden = !(box.dataset.endpoint in served);
  const [models, hardware] = await Promise.all([post("/api/models", {}), post("/api/hardware", {})]);
  fill($("model"), models.models.map((m) => m.name), "llama-3-8b");
  fill($("gpu"), hardware.devices.map((d) => d.name), "H100-SXM");
  setMode();
  $("controls").addEventListener("input", later);
  $("controls").addEventListener("change", later);
  $("mode").addEventListener("change", setMode);
  $("config-upload").addEventListener("change", upload);
  $("config-clear").addEventListener("click", () => {
    uploaded = null; $("config-upload").value = ""; $("config-name").textContent = "";
    $("config-clear").hidden = true; $("model").disabled = false; later();
  });
  $("controls").addEventListener("submit", (e) => e.preventDefault());
  $("download").addEventListener("click", download);
  await update();
}

document.addEventListener("DOMContentLoaded", start);
