// The WebGPU page's runner (scripts/site_webgpu.py puts it into webgpu/index.html): run each of
// tinyedu's WGSL kernels on this browser's GPU, time it, check it against plain JavaScript.
"use strict";

const DATA = JSON.parse(document.getElementById("kernels").textContent);
const REPEAT = 5;

function status(text, state) {
  const node = document.getElementById("status");
  node.textContent = text;
  document.body.dataset.state = state;
}

function inputs(size, seed) {
  // Deterministic values in [-1, 1): a small linear congruential generator, the same every run.
  const values = new Float32Array(size);
  let state = seed >>> 0;
  for (let i = 0; i < size; i++) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    values[i] = state / 2147483648 - 1;
  }
  return values;
}

function matmulReference(a, b, n) {
  const out = new Float64Array(n * n);
  for (let i = 0; i < n; i++) {
    for (let k = 0; k < n; k++) {
      const aik = a[i * n + k];
      for (let j = 0; j < n; j++) out[i * n + j] += aik * b[k * n + j];
    }
  }
  return out;
}

function rowSumReference(x, rows, cols) {
  const out = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    let total = 0;
    for (let c = 0; c < cols; c++) total += x[r * cols + c];
    out[r] = total;
  }
  return out;
}

function storage(device, data, extra) {
  const buffer = device.createBuffer({size: Math.max(data.byteLength, 4),
                                      usage: GPUBufferUsage.STORAGE | extra, mappedAtCreation: true});
  new Float32Array(buffer.getMappedRange()).set(data);
  buffer.unmap();
  return buffer;
}

async function runKernel(device, kernel, arrays, outputSize) {
  // Binding 0 is the output (read_write), 1.. the inputs (read), as tinyedu's WGSL declares them.
  const module = device.createShaderModule({code: kernel.wgsl});
  const entries = [{binding: 0, visibility: GPUShaderStage.COMPUTE, buffer: {type: "storage"}}];
  arrays.forEach((_, i) => entries.push({binding: i + 1, visibility: GPUShaderStage.COMPUTE,
                                         buffer: {type: "read-only-storage"}}));
  const layout = device.createBindGroupLayout({entries});
  const pipeline = device.createComputePipeline({
    layout: device.createPipelineLayout({bindGroupLayouts: [layout]}),
    compute: {module, entryPoint: kernel.entry}});
  const output = device.createBuffer({size: outputSize * 4, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC});
  const buffers = [output, ...arrays.map((a) => storage(device, a, 0))];
  const group = device.createBindGroup({layout, entries: buffers.map((buffer, i) => ({binding: i, resource: {buffer}}))});
  const dispatch = () => {
    const encoder = device.createCommandEncoder();
    const pass = encoder.beginComputePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, group);
    pass.dispatchWorkgroups(...kernel.groups);
    pass.end();
    device.queue.submit([encoder.finish()]);
    return device.queue.onSubmittedWorkDone();
  };
  await dispatch();  // the first run compiles the pipeline: not timed
  let best = Infinity;
  for (let i = 0; i < REPEAT; i++) {
    const start = performance.now();
    await dispatch();
    best = Math.min(best, performance.now() - start);
  }
  const readback = device.createBuffer({size: outputSize * 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST});
  const encoder = device.createCommandEncoder();
  encoder.copyBufferToBuffer(output, 0, readback, 0, outputSize * 4);
  device.queue.submit([encoder.finish()]);
  await readback.mapAsync(GPUMapMode.READ);
  const result = new Float32Array(readback.getMappedRange().slice(0));
  readback.unmap();
  return {result, milliseconds: best};
}

function addRow(cells, ok) {
  const row = document.createElement("tr");
  row.className = ok ? "ok" : "wrong";
  for (const text of cells) {
    const cell = document.createElement("td");
    cell.textContent = text;
    row.appendChild(cell);
  }
  document.querySelector("#results tbody").appendChild(row);
}

async function main() {
  if (!navigator.gpu) {
    status("WebGPU is not available in this browser, so the kernels cannot run here. Current Chrome, Edge " +
           "and Safari have it (Firefox from version 141 on Windows); on Linux, Chrome may need " +
           "chrome://flags/#enable-unsafe-webgpu. The kernels' WGSL is listed below all the same.", "unavailable");
    return;
  }
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) {
    status("This browser has WebGPU but found no GPU adapter to run the kernels on.", "unavailable");
    return;
  }
  const device = await adapter.requestDevice();
  const info = adapter.info || {};
  const name = [info.vendor, info.architecture, info.device, info.description].filter(Boolean).join(" ") ||
    "(the browser does not name it)";
  status(`Running on: ${name}`, "running");
  const n = DATA.n, a = inputs(n * n, 1), b = inputs(n * n, 2), x = inputs(DATA.rows * DATA.cols, 3);
  const expected = {matmul: matmulReference(a, b, n), rowsum: rowSumReference(x, DATA.rows, DATA.cols)};
  const operands = {matmul: [a, b], rowsum: [x]};
  let right = 0;
  for (const kernel of DATA.kernels) {
    const want = expected[kernel.kind];
    try {
      const {result, milliseconds} = await runKernel(device, kernel, operands[kernel.kind], want.length);
      let error = 0;
      for (let i = 0; i < want.length; i++) error = Math.max(error, Math.abs(result[i] - want[i]));
      const ok = error < 1e-3 * Math.max(1, ...want.slice(0, 64).map(Math.abs));
      right += ok;
      const rate = kernel.amount / (milliseconds * 1e-3) * 1e-9;
      addRow([kernel.title, `${kernel.groups.reduce((p, q) => p * q)} × ${kernel.threads}`,
              `${milliseconds.toFixed(3)} ms`, `${rate.toFixed(2)} ${kernel.unit}`, error.toExponential(1),
              ok ? "right" : "WRONG"], ok);
    } catch (err) {
      addRow([kernel.title, "", "", "", "", `failed: ${err}`], false);
    }
  }
  document.body.dataset.right = String(right);
  status(`Ran on: ${name}. ${right} of ${DATA.kernels.length} kernels agree with JavaScript.`, "done");
}

main().catch((err) => status(`WebGPU failed: ${err}`, "failed"));
