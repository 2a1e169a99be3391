// The official `openai` npm package against `pytest-toolnexus serve`: one call, printed as JSON
// lines. Usage: node openai_client.cjs MODE BASE_URL, with NODE_OPENAI naming the folder the
// package was installed into. MODE is chat, stream or retry.
const path = require("node:path");
const OpenAI = require(path.join(process.env.NODE_OPENAI, "node_modules", "openai"));

const [mode, baseURL] = process.argv.slice(2);
// Times are taken from the moment the SDK hands the request to fetch, not from the call:
// the SDK's own work before it sends is not the server's to answer for.
// Times are counted from the moment the SDK hands the request to fetch (a retry's from the
// first attempt), so the SDK's own work before that is not counted against the server.
const starts = [];
const timed = (url, init) => {
  starts.push(performance.now());
  return fetch(url, init);
};
const client = new OpenAI({
  apiKey: "test-key",
  baseURL,
  maxRetries: mode === "retry" ? 2 : 0,
  fetch: timed,
});
const messages = [{ role: "user", content: "Hi" }];
const say = (value) => process.stdout.write(JSON.stringify(value) + "\n");

async function main() {
  if (mode === "stream") {
    const stream = await client.chat.completions.create({ model: "gpt-4o-mini", messages, stream: true });
    for await (const chunk of stream) {
      const content = chunk.choices[0]?.delta?.content;
      if (content) say({ t: (performance.now() - starts.at(-1)) / 1000, content });
    }
    return;
  }
  const reply = await client.chat.completions.create({ model: "gpt-4o-mini", messages });
  const t = (performance.now() - starts[0]) / 1000;
  say({ t, attempts: starts.length, content: reply.choices[0].message.content });
}

main().catch((error) => {
  say({ error: String(error), status: error.status ?? null });
  process.exitCode = 1;
});
