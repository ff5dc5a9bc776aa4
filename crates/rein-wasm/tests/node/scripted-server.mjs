// A scripted OpenAI-compatible Chat Completions server for the package's tests: each request
// takes the next scripted reply (a function of the request body may stand for one).
import http from 'node:http';
import { readFile } from 'node:fs/promises';
import path from 'node:path';

const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm', '.json': 'application/json' };

/** Starts the server; with `staticRoot`, a GET serves that directory's files (the example page). */
export async function startServer(script, { staticRoot } = {}) {
    const requests = [];
    const queue = [...script];
    const server = http.createServer(async (req, res) => {
        if (req.method === 'GET' && staticRoot) {
            const file = path.join(staticRoot, decodeURIComponent(new URL(req.url, 'http://x').pathname));
            if (!file.startsWith(staticRoot)) return res.writeHead(403).end();
            try {
                const data = await readFile(file.endsWith('/') ? file + 'index.html' : file);
                res.writeHead(200, { 'content-type': TYPES[path.extname(file)] ?? (file.endsWith('/') ? 'text/html' : 'application/octet-stream') });
                return res.end(data);
            } catch {
                return res.writeHead(404).end();
            }
        }
        let body = '';
        req.on('data', (chunk) => (body += chunk));
        req.on('end', async () => {
            const parsed = JSON.parse(body || '{}');
            requests.push({ url: req.url, headers: req.headers, body: parsed });
            let step = queue.shift() ?? { content: 'done' };
            if (typeof step === 'function') step = await step(parsed);
            if (step.hang) {
                req.on('close', () => {});
                return; // never answers; the client must abort
            }
            const message = { role: 'assistant', content: step.content ?? null };
            if (step.tool_calls) message.tool_calls = step.tool_calls;
            res.writeHead(200, { 'content-type': 'application/json' });
            res.end(JSON.stringify({
                id: 'x', model: parsed.model,
                choices: [{ index: 0, message, finish_reason: step.tool_calls ? 'tool_calls' : 'stop' }],
                usage: { prompt_tokens: 10, completion_tokens: 5 },
            }));
        });
    });
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address();
    return {
        requests,
        endpoint: `http://127.0.0.1:${port}/v1`,
        close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }),
    };
}

/** A native tool call. */
export function call(id, name, args) {
    return { id, type: 'function', function: { name, arguments: JSON.stringify(args) } };
}
