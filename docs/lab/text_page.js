// The text page (docs/lab_text.md): chapter 13's GPT as one WebAssembly module (lab/text.wasm, built
// with the site by scripts/site_wasm.py from tinyedu.export.wasm_generator). The module holds the
// decoding step (tinyedu's kernels, with the KV caches), the byte-level BPE encoder and the portable
// sampler; this script writes the prompt's UTF-8 bytes into its memory, calls gen_start (encode and
// prefill) and then gen_step once per token, and shows each token's bytes as it comes.
const here = new URL(".", import.meta.url);
const $ = (id) => document.getElementById(id);
const message = (text) => { $("text-message").textContent = text; };
const START_ERRORS = {  // gen_start's refusals (tinyedu/export/wasm_generator.py)
  [-1]: "The prompt is empty: type a few characters (some Python, say) first.",
  [-2]: "The prompt is longer than the model's BLOCK positions once cut into tokens (its block_size: the " +
        "prompt and the continuation together must fit in them). Shorten it: a line or two of Python is plenty.",
  [-3]: "Temperature must be a number of at least 0, top-k a whole number from 0 (all tokens) to VOCAB, " +
        "and the seed a whole number of at least 0.",
};
let gen = null, memory = null, block = 0, vocab = 0, capacity = 0, running = false, stopAsked = false;

function pieceBytes(id) {  // a token's bytes, copied out of the module's memory
  const at = gen.gen_piece(id), n = gen.gen_piece_length(id);
  return new Uint8Array(memory.buffer, at, n).slice();
}

function settings() {  // the controls, checked; or a message
  const sample = $("text-sample").checked;
  const temperature = sample ? Number($("text-temperature").value) : 0;
  const topK = sample ? Number($("text-topk").value) : 0;
  const seed = sample ? Number($("text-seed").value) : 0;
  const wanted = Number($("text-new").value);
  if (!(Number.isFinite(temperature) && temperature >= 0) || !(Number.isInteger(topK) && topK >= 0 && topK <= vocab) ||
      !(Number.isSafeInteger(seed) && seed >= 0)) return { error: START_ERRORS[-3] };
  if (!(Number.isInteger(wanted) && wanted >= 1)) return { error: "New tokens must be a whole number of at least 1." };
  return { temperature, topK, seed, wanted, sample };
}

// what the page says while and after it generates: how many tokens, how fast, where it ran
function report(count, stepMs, n, prefillMs, mode, why) {
  const speed = !count ? "" : stepMs > 0 ? ` at ${(count / (stepMs / 1000)).toFixed(0)} tokens/s`
    : " (too fast for this browser's clock to time)";  // a headless browser on virtual time
  message(`${count} new token${count === 1 ? "" : "s"} (${mode})${speed}; the prompt's ${n} tokens in ` +
          `${prefillMs.toFixed(1)} ms: your CPU running WebAssembly compiled from tinyedu's kernels. ${why}`.trim());
}

const pause = () => new Promise((resolve) => setTimeout(resolve, 0));

// Encode and prefill, then one gen_step per token; the tokens go on the page as they are made (the
// steps run in slices of about 30 ms, between which the browser draws). Returns what the test reads.
async function generate() {
  if (!gen || running) return null;
  const prompt = new TextEncoder().encode($("text-prompt").value);
  const chosen = settings();
  if (chosen.error) { message(chosen.error); return null; }
  if (prompt.length === 0) { message(START_ERRORS[-1]); return null; }
  if (prompt.length > capacity) {
    message(`The prompt is ${prompt.length.toLocaleString("en")} bytes; the module takes at most ` +
            `${capacity.toLocaleString("en")}, and the model only ${block} tokens: shorten it.`);
    return null;
  }
  new Uint8Array(memory.buffer, gen.gen_text(), prompt.length).set(prompt);
  const began = performance.now();
  const n = gen.gen_start(prompt.length, chosen.temperature, chosen.topK, chosen.seed);
  const prefillMs = performance.now() - began;
  if (n < 0) { message(START_ERRORS[n]); return null; }
  running = true; stopAsked = false;
  $("text-go").disabled = true; $("text-stop").disabled = false;
  const out = $("text-out"), decoder = new TextDecoder("utf-8");
  out.textContent = "";
  const promptSpan = document.createElement("span");
  promptSpan.className = "text-prompt";
  for (let k = 0; k < n; k++) promptSpan.textContent += decoder.decode(pieceBytes(gen.gen_token(k)), { stream: true });
  out.append(promptSpan);
  const mode = chosen.sample ? `sampled at temperature ${chosen.temperature}, top-k ${chosen.topK || "all"}, ` +
    `seed ${chosen.seed}` : "greedy";
  const tokens = [], room = block - n;
  let stepMs = 0, why = "";
  if (room <= 0) why = `The prompt takes all ${block} of the model's positions: there is no room for a new token.`;
  while (!why && tokens.length < chosen.wanted) {
    const slice = performance.now();  // timed a slice at a time: a browser's clock may be coarse (0.1 ms)
    while (tokens.length < chosen.wanted && performance.now() - slice < 30) {
      const token = gen.gen_step();
      if (token < 0) break;
      tokens.push(token);
      const span = document.createElement("span");
      span.className = tokens.length % 2 ? "text-new text-odd" : "text-new";
      span.textContent = decoder.decode(pieceBytes(token), { stream: true });
      span.title = `token ${token}`;
      out.append(span);
    }
    stepMs += performance.now() - slice;
    if (tokens.length >= room) {
      why = `It stopped at the model's ${block} positions (block_size): the prompt's ${n} tokens and ${tokens.length} new ones.`;
    }
    report(tokens.length, stepMs, n, prefillMs, mode, "");
    await pause();
    if (stopAsked) { why = "Stopped."; break; }
  }
  out.append(decoder.decode());
  const rate = stepMs > 0 ? tokens.length / (stepMs / 1000) : 0;
  report(tokens.length, stepMs, n, prefillMs, mode, why);
  const result = { prompt_tokens: n, tokens: Array.from({ length: n + tokens.length }, (_, k) => gen.gen_token(k)),
                   temperature: chosen.temperature, top_k: chosen.topK, seed: chosen.seed,
                   tokens_per_second: rate, prefill_ms: prefillMs };
  $("text-numbers").textContent = JSON.stringify(result);
  running = false;
  $("text-go").disabled = false; $("text-stop").disabled = true;
  return result;
}

function showSampling() {
  for (const id of ["text-temperature", "text-topk", "text-seed"]) $(id).disabled = !$("text-sample").checked;
}

async function start() {
  const status = await fetch(new URL("status.json", here)).then((r) => r.json()).catch(() => null);
  if (!status?.text?.ok) {
    message(`The text model was not built with this site: ${status?.text?.missing ?? "lab/status.json is missing"}. ` +
            "Build the site on a machine with clang and lld (wasm-ld).");
    return;
  }
  const trained = status.text.trained;
  block = trained.block_size; vocab = trained.vocab_size; capacity = status.text.text_bytes;
  for (const code of [-2, -3]) START_ERRORS[code] = START_ERRORS[code].replace("BLOCK", block).replace("VOCAB", vocab);
  $("text-facts").textContent = `text.wasm: ${status.text.bytes.toLocaleString("en")} bytes (the weights are most of it). ` +
    `A GPT of ${trained.parameters.toLocaleString("en")} parameters (${trained.n_layers} layers of width ${trained.dim}, ` +
    `${trained.vocab_size} tokens, ${trained.block_size} positions), trained for ${trained.steps} steps on ` +
    `${trained.train_tokens.toLocaleString("en")} tokens of Python; on the ${trained.validation_tokens.toLocaleString("en")} ` +
    `held-out tokens: ${trained.validation_loss.toFixed(2)} nats per token, ${trained.bits_per_byte.toFixed(2)} bits per byte.`;
  $("text-topk").max = vocab;
  if (typeof WebAssembly !== "object") { message("This browser has no WebAssembly, which the page needs."); return; }
  const bytes = await fetch(new URL("text.wasm", here)).then((r) => r.arrayBuffer());
  if (!WebAssembly.validate(bytes)) {
    message("This browser runs WebAssembly but not its SIMD instructions (128-bit vectors), which the " +
            "kernels use: try a current Chrome, Firefox or Safari (16.4 or later).");
    return;
  }
  const { instance } = await WebAssembly.instantiate(bytes, {});
  gen = instance.exports; memory = gen.memory;
  capacity = Math.min(capacity, gen.gen_text_capacity());
  if (gen.gen_block_size() !== block || gen.gen_vocab() !== vocab) {
    message("lab/text.wasm does not match lab/status.json: rebuild the site."); gen = null; return;
  }
  $("text-sample").addEventListener("change", showSampling);
  $("text-greedy").addEventListener("change", showSampling);
  $("text-go").addEventListener("click", () => generate().catch((error) => message(`Generation failed: ${error.message}`)));
  $("text-stop").addEventListener("click", () => { stopAsked = true; });
  $("text-go").disabled = false;
  message(`Ready: type a prompt and press Generate (the model has ${block} positions for the prompt and its continuation).`);
  // #prompt=...&new=...&temperature=...&top_k=...&seed=...: fill the controls and generate (the browser test)
  const asked = new URLSearchParams(location.hash.slice(1));
  if (asked.has("prompt")) {
    $("text-prompt").value = asked.get("prompt");
    if (asked.has("new")) $("text-new").value = asked.get("new");
    const sample = asked.has("temperature");
    $(sample ? "text-sample" : "text-greedy").checked = true;
    if (sample) {
      $("text-temperature").value = asked.get("temperature");
      $("text-topk").value = asked.get("top_k") ?? "0";
      $("text-seed").value = asked.get("seed") ?? "0";
    }
    showSampling();
    await generate();
  }
}

start().catch((error) => message(`The lab could not start: ${error.message}`));
