// Two tabs of the web chat (`assets/app.js`, two instances of the module in one jsdom
// document) open on one session of a real `rein serve`, both hearing the same
// `client_tool_call`: each registers the page tool `set_color`, then handles the call as the
// event stream hands it over. Run by the `finding_10_the_web_chat_claims_a_page_tool_call_before_it_runs_it`
// test of rein-server with `node client-tools.mjs BASE SESSION EVENT_JSON`; prints one JSON line
// `{"runs": [tab, ...], "claims": [status, ...], "results": [status, ...]}`.

import { JSDOM } from 'jsdom';
import { readFileSync } from 'node:fs';

const [base, session, eventJson] = process.argv.slice(2);
const event = JSON.parse(eventJson);
const html = readFileSync(new URL('../../assets/index.html', import.meta.url), 'utf8');
const dom = new JSDOM(html, { url: `${base}/`, pretendToBeVisual: true });
for (const name of ['window', 'document', 'localStorage', 'sessionStorage', 'requestAnimationFrame', 'HTMLElement', 'Node']) {
  globalThis[name] = dom.window[name];
}
// The page calls its API by path; node's fetch needs the server's address. Every claim and
// result the page sends is noted with the status the server answered.
const claims = [];
const results = [];
const realFetch = globalThis.fetch;
globalThis.fetch = async (url, init) => {
  const response = await realFetch(new URL(url, base), init);
  if (String(url).endsWith('/claim')) claims.push(response.status);
  if (String(url).endsWith('/result')) results.push(response.status);
  return response;
};

const runs = [];
const tabs = [];
for (const tab of ['a', 'b']) {
  const app = await import(`../../assets/app.js?embed&tab=${tab}`);
  const { handle, state } = app.eventRenderer(dom.window.document);
  state.sessionId = session;
  await app.registerTool(
    { name: 'set_color', description: 'Paints the map.', inputSchema: { type: 'object', properties: { color: { type: 'string' } } } },
    async (args) => {
      runs.push(tab);
      return `painted ${args.color} in tab ${tab}`;
    },
  );
  tabs.push(handle);
}
for (const handle of tabs) handle(event);
const deadline = Date.now() + 10000;
while ((claims.length < 2 || results.length < 1) && Date.now() < deadline) {
  await new Promise((resolve) => setTimeout(resolve, 20));
}
// Time for a tab that (wrongly) ran the call anyway to post its result too.
await new Promise((resolve) => setTimeout(resolve, 300));
console.log(JSON.stringify({ runs, claims, results }));
process.exit(0);
