// The official OpenAI SDK (npm `openai`) against a fleet behind the HAProxy
// gateway (scripts/fleet.sh): sessions named by the X-Session-Id header,
// requests without one, and what each answer's X-Qwen3-Backend header says.
// Prints one JSON object; fleet_test.py judges it.
//
//   node fleet_client.mjs sessions URL TOKEN N     create N sessions, two chat turns each, and sessionless requests
//   node fleet_client.mjs after URL TOKEN IDS...   one more turn on each session, and sessionless requests
import { createRequire } from "node:module";

const require = createRequire(process.env.QWEN3_OPENAI_DIR + "/");
const OpenAI = require("openai").default;

const [phase, url, token, ...rest] = process.argv.slice(2);
const client = new OpenAI({ baseURL: url + "/v1", apiKey: token, maxRetries: 0, timeout: 120000 });
const model = (await client.models.list()).data[0].id;

const topics = ["the verifier", "XDP", "maps", "BTF", "kprobes", "the scheduler", "cgroups", "tracepoints"];

// One chat turn in session `id` (null: none); its text, usage and serving daemon.
async function turn(id, messages) {
  const headers = id ? { "X-Session-Id": id } : {};
  const { data, response } = await client.chat.completions
    .create({ model, messages, max_tokens: 6, temperature: 0 }, { headers })
    .withResponse();
  return {
    backend: response.headers.get("x-qwen3-backend"),
    text: data.choices[0].message.content,
    prompt: data.usage.prompt_tokens,
    cached: data.usage.prompt_tokens_details.cached_tokens,
  };
}

async function session(i) {
  const id = `fleet-${i}-${Math.random().toString(36).slice(2, 8)}`;
  const created = await client.post("/sessions", { body: { max_context: 512 }, headers: { "X-Session-Id": id } }).withResponse();
  const first = [{ role: "user", content: `Tell me about ${topics[i % topics.length]}.` }];
  const t1 = await turn(id, first);
  const t2 = await turn(id, [...first, { role: "assistant", content: t1.text }, { role: "user", content: "And then?" }]);
  return { id, created_on: created.response.headers.get("x-qwen3-backend"), owner: created.data.owner_uid, turns: [t1, t2], first };
}

// Runs `jobs` (functions) with at most `width` at a time, results in order.
async function pool(jobs, width) {
  const out = new Array(jobs.length);
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < jobs.length) {
      const k = next++;
      out[k] = await jobs[k]();
    }
  }));
  return out;
}

async function sessionless(n) {
  return pool(Array.from({ length: n }, (_, k) => () =>
    turn(null, [{ role: "user", content: `Say something about ${topics[k % topics.length]}.` }])), 4);
}

const out = {};
if (phase === "sessions") {
  const n = Number(rest[0]);
  out.sessions = await pool(Array.from({ length: n }, (_, i) => () => session(i)), 6);
  out.sessionless = await sessionless(9);
} else {
  out.sessions = await pool(rest.map((id) => async () => {
    try {
      const t = await turn(id, [{ role: "user", content: "One more thing." }]);
      return { id, ok: true, ...t };
    } catch (e) {
      return { id, ok: false, status: e.status, message: e.message, backend: e.headers?.get?.("x-qwen3-backend") ?? null };
    }
  }), 6);
  out.sessionless = await sessionless(9);
}
console.log(JSON.stringify(out));
