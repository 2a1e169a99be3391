// ADR 0019's three gates on Node, as another port's CI runs them through
// examples/serve_gates.py: `python examples/serve_gates.py -- node gates.mjs`. The tool-calling
// turn speaks Anthropic's Messages API with fetch; the stream and the retry go through the
// official `openai` package (its folder in NODE_OPENAI). Each gate checks what it can itself
// (a tool asked for, deltas spread out in time, a 429 retried) and exits 1 on a failure; the
// script judges the rest by what the server played.
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const OpenAI = require(path.join(process.env.NODE_OPENAI, "node_modules", "openai"));
const failures = [];

async function tools(base) {
  const tool = {
    name: "get_weather",
    description: "Current weather for a city.",
    input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  };
  const messages = [{ role: "user", content: "What's the weather in Paris?" }];
  const ask = async () => {
    const answer = await fetch(`${base}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": "test-key", "anthropic-version": "2023-06-01" },
      body: JSON.stringify({ max_tokens: 256, messages, model: "claude-sonnet-4-6", tools: [tool] }),
    });
    return [answer.status, await answer.json()];
  };
  const [status, first] = await ask();
  const call = status === 200 ? first.content.find((block) => block.type === "tool_use") : undefined;
  if (!call) return failures.push(`tools: the first answer asked for no tool (${status})`);
  messages.push({ role: "assistant", content: first.content });
  const result = `Sunny and 21 C in ${call.input.city}`;
  messages.push({ role: "user", content: [{ type: "tool_result", tool_use_id: call.id, content: result }] });
  const [again, second] = await ask();
  if (again !== 200 || second.stop_reason !== "end_turn") failures.push(`tools: the turn did not end (${again})`);
}

async function stream(base) {
  const client = new OpenAI({ apiKey: "test-key", baseURL: `${base}/v1`, maxRetries: 0 });
  const chunks = await client.chat.completions.create({
    model: "gpt-4o-mini",
    stream: true,
    messages: [{ role: "user", content: "Tell me a short story." }],
  });
  const arrivals = [];
  for await (const chunk of chunks) if (chunk.choices[0]?.delta?.content) arrivals.push(performance.now());
  const spread = (arrivals.at(-1) - arrivals[0]) / 1000;
  if (arrivals.length < 2 || spread < 0.5) failures.push(`stream: ${arrivals.length} deltas over ${spread} s`);
}

async function retry(base) {
  let attempts = 0;
  const counted = (url, init) => {
    attempts += 1;
    return fetch(url, init);
  };
  const client = new OpenAI({ apiKey: "test-key", baseURL: `${base}/v1`, maxRetries: 2, fetch: counted });
  const reply = await client.chat.completions.create({
    model: "gpt-4o-mini",
    messages: [{ role: "user", content: "Say hello." }],
  });
  if (attempts !== 2 || !reply.choices[0].message.content) failures.push(`retry: ${attempts} attempt(s)`);
}

await tools(process.env.TOOLNEXUS_GATE_TOOLS);
await stream(process.env.TOOLNEXUS_GATE_STREAM);
await retry(process.env.TOOLNEXUS_GATE_RETRY);
for (const failure of failures) console.error(failure);
process.exitCode = failures.length ? 1 : 0;
