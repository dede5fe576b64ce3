// glasskit_adapter.mjs: the glasskit_eval command adapter protocol (version 1) for Node.js.
//
// Copy this file next to your adapter and keep it unchanged. It has no dependencies
// (frames are decoded with node:zlib, no npm package) and needs Node.js 18 or newer.
// Your adapter imports it and passes a factory to runGlassKitAdapter. glasskit_eval
// starts the adapter itself and talks to it over stdin/stdout; you do not start it:
//
//   python -m glasskit_eval run --adapter-command "node eval/adapter.mjs"
//   python -m glasskit_eval validate --adapter-command "node eval/adapter.mjs"   # a dry start
//
// (Started by hand from a terminal, the adapter says so and exits with status 2.)
//
//   // eval/adapter.mjs
//   import { runGlassKitAdapter } from "./glasskit_adapter.mjs";
//
//   await runGlassKitAdapter(async (context) => {
//     // context: { evalDir, config, artifactsDir, verbose }; runs once per trial.
//     const app = await createAppClient(context.config);
//     return {
//       // One sample; up to --concurrency calls run at once.
//       async evaluate({ sample, target, signal }) {
//         return await app.checkFrame(sample.image.bytes, target.id, { signal });
//       },
//       // Or, for a real batch API, evaluateMany({ samples, target, signal }) returning
//       // one observation per sample, in order. It takes precedence when both exist.
//       // Stream targets (`events`): onFrame({ sample, target, stream, signal }) gets the
//       // video's frames in order, one at a time, and returns its emissions: null, one
//       // JSON value, or an array of them. Optional: startStream({ target, stream, signal })
//       // before the first frame, endStream({ target, stream, signal }) returning final
//       // emissions. stream: { id, case, video, everyS, pace }, one per (case, target, trial).
//       async close() {
//         await app.close();
//       },
//     };
//   });
//
// What the evaluator receives:
//   sample: { image: { mimeType: "image/png", bytes: Buffer, width, height, rgba },
//             timestampS, frameIndex, sampleIndex, videoPath, caseName, frames, isClip }
//             (image.bytes is the exact frame as a lossless PNG; image.rgba is the
//             same frame decoded on first use: a Uint8Array of width * height * 4
//             bytes, row by row from the top left, R, G, B, A with A always 255.
//             decodePng(bytes) below does the same for any 8-bit PNG.
//             frames: the sample's frames in time order, each { timestampS (the time
//             asked for), mediaTimestampS (the frame's own), frameIndex, image } with
//             image as above: a clip sample's clip (isClip), else [the one frame]
//             with mediaTimestampS null. image is the frame at timestampS.)
//   target: { id, index, label, config }
//   signal: an AbortSignal, aborted when glasskit_eval abandons the call (a fail-fast
//           error elsewhere, or an interrupt); pass it on to backend calls.
// Return a JSON value: null, a boolean, a finite number, a string, an array, or a
// plain object. Returning undefined counts as null. Throw to report a failed call;
// the error's message (and stack) reach glasskit_eval.
//
// The protocol, for adapters in other languages: newline-delimited JSON on stdin
// (requests) and stdout (answers). Requests are {"id", "method", "params"}:
//   initialize   {protocolVersion: 1, config: {evalDir, config, artifactsDir, verbose}}
//                -> {protocolVersion: 1, capabilities: {evaluate, evaluateMany}}
//   evaluate     {sample, target}   -> observation   (sample.image carries dataBase64;
//                a clip sample also has frames: [{timestampS, mediaTimestampS, frameIndex, image}])
//   evaluateMany {samples, target}  -> [observation, ...]
//   startStream  {stream: {id, case, video, everyS, pace}, target}   -> null
//   frame        {stream: {id}, sample, target}  -> null, an emission, or [emission, ...]
//   endStream    {stream: {id}, target}          -> the same (final emissions)
//   close        {}                 -> null, then exit with status 0
// (the stream requests only with capabilities.frame; a stream's frames come one at a time)
// and the notification {"method": "cancel", "params": {"id"}} abandons a call. Each
// request is answered once, with {"id", "result"} or {"id", "error": {"message",
// "stack"}}. Calls may overlap; answers may come in any order.
//
// Stdout belongs to the protocol. While the adapter runs, console.log() and other
// writes through process.stdout are redirected to stderr, which glasskit_eval
// mirrors to its own stderr. (Child processes that inherit stdout can still break
// the protocol: spawn them with stdio ["ignore", "inherit", "inherit"] or similar.)
// After answering close the process exits, even if the app left timers or sockets
// open, because glasskit_eval terminates adapters that do not exit promptly.

import { relative } from "node:path";
import { inflateSync } from "node:zlib";

const PROTOCOL_VERSION = 1;

function errorPayload(error) {
  if (error instanceof Error) {
    return error.stack ? { message: error.message, stack: error.stack } : { message: error.message };
  }
  return { message: String(error) };
}

function describeType(value) {
  if (value === null) return "null";
  if (typeof value !== "object") return typeof value;
  return value.constructor?.name ?? "object";
}

// Why a value is not JSON (null when it is). JSON.stringify would quietly turn NaN
// into null and drop undefined fields, hiding an adapter bug behind a wrong answer.
function jsonProblem(value, where, depth = 0) {
  if (value === null || typeof value === "string" || typeof value === "boolean") return null;
  if (typeof value === "number") {
    return Number.isFinite(value) ? null : `${where} is ${value}, which JSON cannot represent`;
  }
  if (typeof value !== "object") {
    return `${where} is ${describeType(value)}, which is not JSON`;
  }
  if (depth >= 100) return `${where} is nested more than 100 levels deep`;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i += 1) {
      const problem = jsonProblem(value[i], `${where}[${i}]`, depth + 1);
      if (problem) return problem;
    }
    return null;
  }
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) {
    return `${where} is a ${describeType(value)}; return plain objects and arrays only`;
  }
  for (const [key, item] of Object.entries(value)) {
    const problem = jsonProblem(item, `${where}.${key}`, depth + 1);
    if (problem) return problem;
  }
  return null;
}

function paeth(a, b, c) {
  const p = a + b - c;
  const pa = Math.abs(p - a);
  const pb = Math.abs(p - b);
  const pc = Math.abs(p - c);
  if (pa <= pb && pa <= pc) return a;
  return pb <= pc ? b : c;
}

const PNG_CHANNELS = { 0: 1, 2: 3, 4: 2, 6: 4 }; // grey, RGB, grey + alpha, RGBA

// A non-interlaced 8-bit PNG (every frame glasskit_eval sends is 8-bit RGB) as
// { width, height, data }, data being RGBA bytes row by row from the top left.
export function decodePng(bytes) {
  const signature = [137, 80, 78, 71, 13, 10, 26, 10];
  if (!signature.every((value, i) => bytes[i] === value)) throw new Error("decodePng: not a PNG");
  const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let offset = 8;
  let width = 0;
  let height = 0;
  let channels = 0;
  const idat = [];
  while (offset + 8 <= view.length) {
    const length = view.readUInt32BE(offset);
    const type = view.toString("latin1", offset + 4, offset + 8);
    const data = view.subarray(offset + 8, offset + 8 + length);
    offset += 12 + length;
    if (type === "IHDR") {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      const [depth, colorType, , , interlace] = data.subarray(8, 13);
      channels = PNG_CHANNELS[colorType] ?? 0;
      if (depth !== 8 || interlace !== 0 || !channels) {
        throw new Error(`decodePng: unsupported PNG (bit depth ${depth}, color type ${colorType}, interlace ${interlace})`);
      }
    } else if (type === "IDAT") {
      idat.push(data);
    } else if (type === "IEND") {
      break;
    }
  }
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  if (raw.length < height * (stride + 1)) throw new Error("decodePng: the image data is truncated");
  const out = new Uint8Array(width * height * 4);
  let previous = new Uint8Array(stride);
  let line = new Uint8Array(stride);
  for (let y = 0; y < height; y += 1) {
    const start = y * (stride + 1);
    const filter = raw[start];
    for (let x = 0; x < stride; x += 1) {
      const left = x >= channels ? line[x - channels] : 0;
      const up = previous[x];
      let value = raw[start + 1 + x];
      if (filter === 1) value += left;
      else if (filter === 2) value += up;
      else if (filter === 3) value += (left + up) >> 1;
      else if (filter === 4) value += paeth(left, up, x >= channels ? previous[x - channels] : 0);
      else if (filter !== 0) throw new Error(`decodePng: bad filter ${filter} in row ${y}`);
      line[x] = value & 255;
    }
    for (let x = 0, o = y * width * 4; x < width; x += 1, o += 4) {
      const i = x * channels;
      if (channels >= 3) {
        out[o] = line[i];
        out[o + 1] = line[i + 1];
        out[o + 2] = line[i + 2];
      } else {
        out[o] = out[o + 1] = out[o + 2] = line[i];
      }
      out[o + 3] = channels === 4 ? line[i + 3] : channels === 2 ? line[i + 1] : 255;
    }
    [previous, line] = [line, previous];
  }
  return { width, height, data: out };
}

function imageForApp(wireImage) {
  const { dataBase64, ...image } = wireImage;
  const bytes = Buffer.from(dataBase64, "base64");
  let rgba;
  const decoded = { ...image, bytes };
  // Decoded on first use: an adapter that sends the PNG on pays nothing for it.
  Object.defineProperty(decoded, "rgba", {
    enumerable: true,
    get() {
      rgba ??= decodePng(bytes).data;
      return rgba;
    },
  });
  return decoded;
}

function sampleForApp(sample) {
  const image = imageForApp(sample.image);
  if (sample.frames === undefined) {
    // No clip: the one frame, so adapters can always read frames.
    const frame = { timestampS: sample.timestampS, mediaTimestampS: null, frameIndex: sample.frameIndex, image };
    return { ...sample, image, frames: [frame], isClip: false };
  }
  const frames = sample.frames.map((frame) => ({ ...frame, image: imageForApp(frame.image) }));
  return { ...sample, image, frames, isClip: true };
}

export async function runGlassKitAdapter(createEvaluator) {
  if (process.stdin.isTTY) {
    // Someone ran the adapter by hand: it would wait for protocol requests for ever.
    const script = process.argv[1] ? relative(process.cwd(), process.argv[1]) : "adapter.mjs";
    process.stderr.write(
      "This is a glasskit_eval command adapter: glasskit_eval starts it and talks to it over stdin.\n" +
        `Run it with: python -m glasskit_eval run --adapter-command "node ${script}"\n`,
    );
    process.exit(2);
  }
  const stdout = process.stdout;
  const protocolWrite = stdout.write.bind(stdout);
  // Keep stray logs off the protocol channel.
  stdout.write = (chunk, encoding, callback) => process.stderr.write(chunk, encoding, callback);

  const active = new Map(); // request id -> { controller, done }
  let evaluator;
  let capabilities = { evaluate: false, evaluateMany: false, frame: false };
  const streams = new Map(); // stream id -> { id, case, video, everyS, pace }
  let closed = false;
  let written = Promise.resolve();

  function send(message) {
    const line = `${JSON.stringify(message)}\n`;
    written = written.then(
      () =>
        new Promise((resolve, reject) => {
          protocolWrite(line, "utf8", (error) => (error ? reject(error) : resolve()));
        }),
    );
    return written;
  }

  async function answer(id, operation) {
    let message;
    try {
      let result = await operation();
      if (result === undefined) result = null;
      const problem = jsonProblem(result, "the result");
      if (problem) throw new TypeError(`the adapter returned a value that is not JSON: ${problem}`);
      message = { id, result };
    } catch (error) {
      message = { id, error: errorPayload(error) };
    }
    await send(message);
  }

  async function initialize(request) {
    await answer(request.id, async () => {
      const version = request.params?.protocolVersion;
      if (version !== PROTOCOL_VERSION) {
        throw new Error(`unsupported protocol version: ${version}; this helper speaks ${PROTOCOL_VERSION}`);
      }
      evaluator = await createEvaluator(request.params.config);
      capabilities = {
        evaluate: typeof evaluator?.evaluate === "function",
        evaluateMany: typeof evaluator?.evaluateMany === "function",
        frame: typeof evaluator?.onFrame === "function",
      };
      if (!capabilities.evaluate && !capabilities.evaluateMany && !capabilities.frame) {
        throw new Error("the adapter factory must return an object with evaluate, evaluateMany or onFrame");
      }
      // frame only when true: a sample adapter's answer stays what protocol version 1 has always sent.
      const { frame, ...sent } = capabilities;
      return { protocolVersion: PROTOCOL_VERSION, capabilities: frame ? capabilities : sent };
    });
  }

  function startCall(request) {
    const controller = new AbortController();
    const { id, method, params } = request;
    const done = answer(id, async () => {
      if (!evaluator) throw new Error("the adapter is not initialized");
      if (method === "startStream" || method === "frame" || method === "endStream") {
        return await streamCall(method, params, controller.signal);
      }
      if (method === "evaluate") {
        if (!capabilities.evaluate) throw new Error("the adapter does not implement evaluate");
        return await evaluator.evaluate({
          sample: sampleForApp(params.sample),
          target: params.target,
          signal: controller.signal,
        });
      }
      if (!capabilities.evaluateMany) throw new Error("the adapter does not implement evaluateMany");
      const results = await evaluator.evaluateMany({
        samples: params.samples.map(sampleForApp),
        target: params.target,
        signal: controller.signal,
      });
      if (!Array.isArray(results)) {
        throw new TypeError(`evaluateMany must return an array with one observation per sample, got ${describeType(results)}`);
      }
      return results;
    }).then(
      () => active.delete(id),
      (error) => {
        active.delete(id);
        console.error("glasskit adapter: could not write an answer:", error);
        process.exitCode = 1;
      },
    );
    active.set(id, { controller, done });
  }

  async function streamCall(method, params, signal) {
    if (!capabilities.frame) throw new Error("the adapter does not implement onFrame");
    const { target } = params;
    if (method === "startStream") {
      streams.set(params.stream.id, params.stream);
      if (typeof evaluator.startStream === "function") await evaluator.startStream({ target, stream: params.stream, signal });
      return null;
    }
    const stream = streams.get(params.stream.id) ?? params.stream;
    if (method === "frame") {
      return await evaluator.onFrame({ sample: sampleForApp(params.sample), target, stream, signal });
    }
    streams.delete(params.stream.id);
    return typeof evaluator.endStream === "function" ? await evaluator.endStream({ target, stream, signal }) : null;
  }

  async function closeEvaluator() {
    const current = evaluator;
    evaluator = undefined;
    if (typeof current?.close === "function") await current.close();
  }

  async function handle(request) {
    switch (request.method) {
      case "cancel":
        active.get(request.params?.id)?.controller.abort();
        return;
      case "initialize":
        await initialize(request);
        return;
      case "evaluate":
      case "evaluateMany":
      case "startStream":
      case "frame":
      case "endStream":
        startCall(request);
        return;
      case "close":
        closed = true;
        await Promise.allSettled([...active.values()].map((call) => call.done));
        await answer(request.id, async () => {
          await closeEvaluator();
          return null;
        });
        return;
      default:
        await send({ id: request.id, error: { message: `unknown method: ${request.method}` } });
    }
  }

  // Our own line framing over raw chunks: frames arrive as multi-megabyte lines.
  let pieces = [];
  reading: for await (const chunk of process.stdin) {
    let start = 0;
    let newline = chunk.indexOf(10);
    while (newline !== -1) {
      pieces.push(chunk.subarray(start, newline));
      const line = Buffer.concat(pieces).toString("utf8");
      pieces = [];
      start = newline + 1;
      newline = chunk.indexOf(10, start);
      if (!line.trim()) continue;
      let request;
      try {
        request = JSON.parse(line);
      } catch (error) {
        console.error("glasskit adapter: invalid protocol request:", error.message);
        process.exitCode = 1;
        break reading;
      }
      await handle(request);
      if (closed) break reading;
    }
    if (start < chunk.length) pieces.push(chunk.subarray(start));
  }

  if (!closed) {
    // Input ended without close: glasskit_eval is gone, so stop and clean up.
    for (const call of active.values()) call.controller.abort();
    await Promise.allSettled([...active.values()].map((call) => call.done));
    try {
      await closeEvaluator();
    } catch (error) {
      console.error("glasskit adapter: close failed:", error);
      process.exitCode = 1;
    }
  }
  try {
    await written;
  } finally {
    process.exit();
  }
}
