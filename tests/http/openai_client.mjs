// The official OpenAI SDK (npm `openai`) against qwen3-bpfd's HTTP API: the
// model list, a streamed chat with usage in the last chunk, a plain completion
// and an API error, over the Unix socket (undici Agent, connect.socketPath) or
// over loopback TCP with a bearer token. Prints one JSON line of what it saw;
// the Python test judges it.
//
//   node openai_client.mjs unix /path/http.sock
//   node openai_client.mjs tcp http://127.0.0.1:PORT TOKEN
import { createRequire } from "node:module";

// The packages setup-deps.sh installed under $QWEN3_OPENAI_DIR (outside the repository).
const require = createRequire(process.env.QWEN3_OPENAI_DIR + "/");
const OpenAI = require("openai").default;
const { Agent, fetch } = require("undici");

const [mode, where, token] = process.argv.slice(2);
const options = { maxRetries: 0, timeout: 120000 };
if (mode === "unix") {
  // The host part is not used for the connection; the SO_PEERCRED check is the access control.
  options.baseURL = "http://localhost/v1";
  options.apiKey = "unused-on-the-unix-socket";
  options.fetch = fetch;
  options.fetchOptions = { dispatcher: new Agent({ connect: { socketPath: where } }) };
} else {
  options.baseURL = where + "/v1";
  options.apiKey = token;
}
const client = new OpenAI(options);
const out = {};

const models = await client.models.list();
out.models = models.data.map((m) => m.id);
const model = out.models[0];

const stream = await client.chat.completions.create({
  model,
  messages: [{ role: "user", content: "Say something about the kernel" }],
  stream: true,
  stream_options: { include_usage: true },
  max_tokens: 6,
  temperature: 0,
  ignore_eos: true,
});
out.chunks = [];
for await (const chunk of stream) out.chunks.push(chunk);

out.completion = await client.completions.create({ model, prompt: "The scheduler", max_tokens: 5, temperature: 0, ignore_eos: true });

try {
  await client.chat.completions.create({ model: "no-such-model", messages: [{ role: "user", content: "hi" }] });
  out.error = null;
} catch (e) {
  out.error = { status: e.status, type: e.type, code: e.code, param: e.param, message: e.message };
}
console.log(JSON.stringify(out));
