// The digit page (docs/lab_digits.md): draw, scale to 28x28 as MNIST's digits are, run the CNN's
// WebAssembly module (lab/digits.wasm, built with the site by scripts/site_wasm.py), draw the bars.
const here = new URL(".", import.meta.url);
const $ = (id) => document.getElementById(id);
const canvas = $("lab-canvas"), pen = canvas.getContext("2d");
const message = (text) => { $("lab-message").textContent = text; };
let strokes = [], model = null;

function clearCanvas() {
  strokes = [];
  pen.fillStyle = "black";
  pen.fillRect(0, 0, canvas.width, canvas.height);
}

function drawStroke(points) {  // white ink, round ends, about as thick relative to the box as MNIST's pen
  pen.strokeStyle = "white"; pen.lineWidth = 22; pen.lineCap = "round"; pen.lineJoin = "round";
  pen.beginPath();
  points.forEach(([x, y], k) => (k ? pen.lineTo(x, y) : pen.moveTo(x, y)));
  if (points.length === 1) pen.lineTo(points[0][0] + 0.1, points[0][1]);
  pen.stroke();
}

// MNIST's recipe: the digit's bounding box scaled (aspect kept) to fit 20x20, then placed in 28x28 so
// that its centre of mass is the centre. Returns 784 values in [0, 1], or null for an empty canvas.
export function toMnist(source) {
  const { width, height } = source;
  const ink = source.getContext("2d").getImageData(0, 0, width, height).data;
  let top = height, left = width, bottom = -1, right = -1;
  for (let y = 0; y < height; y++) for (let x = 0; x < width; x++) {
    if (ink[4 * (y * width + x)] > 12) { top = Math.min(top, y); bottom = Math.max(bottom, y);
      left = Math.min(left, x); right = Math.max(right, x); }
  }
  if (bottom < 0) return null;
  const w = right - left + 1, h = bottom - top + 1, scale = 20 / Math.max(w, h);
  const sw = Math.max(1, Math.round(w * scale)), sh = Math.max(1, Math.round(h * scale));
  const small = document.createElement("canvas");
  small.width = sw; small.height = sh;
  const g = small.getContext("2d");
  g.imageSmoothingEnabled = true; g.imageSmoothingQuality = "high";
  g.drawImage(source, left, top, w, h, 0, 0, sw, sh);
  const px = g.getImageData(0, 0, sw, sh).data;
  let mass = 0, mx = 0, my = 0;
  for (let y = 0; y < sh; y++) for (let x = 0; x < sw; x++) {
    const v = px[4 * (y * sw + x)] / 255; mass += v; mx += v * x; my += v * y;
  }
  const dx = Math.round(14 - (mx / mass + 0.5)), dy = Math.round(14 - (my / mass + 0.5));
  const out = new Float32Array(784);
  for (let y = 0; y < sh; y++) for (let x = 0; x < sw; x++) {
    const tx = x + dx, ty = y + dy;
    if (tx >= 0 && tx < 28 && ty >= 0 && ty < 28) out[ty * 28 + tx] = px[4 * (y * sw + x)] / 255;
  }
  return out;
}

function showInput(pixels) {  // what the model sees, enlarged
  const view = $("lab-input"), g = view.getContext("2d"), image = g.createImageData(28, 28);
  pixels.forEach((v, i) => { image.data.set([v * 255, v * 255, v * 255, 255], 4 * i); });
  const tmp = document.createElement("canvas"); tmp.width = 28; tmp.height = 28;
  tmp.getContext("2d").putImageData(image, 0, 0);
  g.imageSmoothingEnabled = false;
  g.drawImage(tmp, 0, 0, view.width, view.height);
}

function showBars(probabilities) {
  const best = probabilities.indexOf(Math.max(...probabilities));
  $("lab-bars").innerHTML = Array.from(probabilities, (p, d) =>
    `<div class="lab-row${d === best ? " lab-best" : ""}"><span>${d}</span>` +
    `<span class="lab-bar" style="width:${(100 * p).toFixed(1)}%"></span><span>${(100 * p).toFixed(1)}%</span></div>`).join("");
}

function run() {
  if (!model) return;
  const pixels = toMnist(canvas);
  if (!pixels) { message("The canvas is empty: draw a digit (0 to 9) first."); return; }
  const start = performance.now();
  const [probabilities] = model.forward([pixels]);
  const ms = performance.now() - start;
  showInput(pixels); showBars(probabilities);
  message(`The network read it in ${ms.toFixed(2)} ms: your CPU running WebAssembly compiled from tinyedu's kernels.`);
  $("lab-numbers").textContent = JSON.stringify({ input: Array.from(pixels), probabilities: Array.from(probabilities) });
}

async function start() {
  clearCanvas();
  const status = await fetch(new URL("status.json", here)).then((r) => r.json()).catch(() => null);
  if (!status?.digits?.ok) {
    message(`The digit model was not built with this site: ${status?.digits?.missing ?? "lab/status.json is missing"}. ` +
            "Build the site on a machine with clang and lld (wasm-ld).");
    return;
  }
  const trained = status.digits.trained;
  $("lab-facts").textContent = `digits.wasm: ${status.digits.bytes.toLocaleString("en")} bytes, ${status.digits.kernels} kernels. ` +
    `Trained on ${trained.train_digits.toLocaleString("en")} MNIST digits; ${(100 * trained.held_out_accuracy).toFixed(1)}% ` +
    `right on ${trained.held_out_digits.toLocaleString("en")} held-out digits.`;
  if (typeof WebAssembly !== "object") { message("This browser has no WebAssembly, which the page needs."); return; }
  const bytes = await fetch(new URL("digits.wasm", here)).then((r) => r.arrayBuffer());
  if (!WebAssembly.validate(bytes)) {
    message("This browser runs WebAssembly but not its SIMD instructions (128-bit vectors), which the " +
            "kernels use: try a current Chrome, Firefox or Safari (16.4 or later).");
    return;
  }
  const { load } = await import(new URL("digits.js", here).href);
  model = await load(bytes);
  message("Draw a digit in the black square.");
  let drawing = null;
  const at = (e) => { const r = canvas.getBoundingClientRect();
    return [(e.clientX - r.left) * canvas.width / r.width, (e.clientY - r.top) * canvas.height / r.height]; };
  canvas.addEventListener("pointerdown", (e) => { drawing = [at(e)]; strokes.push(drawing); canvas.setPointerCapture(e.pointerId); });
  canvas.addEventListener("pointermove", (e) => { if (drawing) { drawing.push(at(e)); drawStroke(drawing.slice(-2)); } });
  canvas.addEventListener("pointerup", () => { drawing = null; run(); });
  $("lab-clear").addEventListener("click", () => { clearCanvas(); $("lab-bars").innerHTML = ""; message("Draw a digit in the black square."); });
  $("lab-read").addEventListener("click", run);
  const replay = new URLSearchParams(location.hash.slice(1)).get("replay");  // #replay=[[[x,y],...],...]
  if (replay !== null) {
    JSON.parse(replay).forEach((points) => { strokes.push(points); drawStroke(points); });
    run();
  }
}

start().catch((error) => message(`The lab could not start: ${error.message}`));
