// A scripted OpenAI-compatible Chat Completions server for the package's tests: each request
// takes the next scripted reply (a function of the request body may stand for one).
import http from 'node:http';
import { readFile } from 'node:fs/promises';
import path from 'node:path';

const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm', '.json': 'application/json' };

/**
 * Starts the server. With `statics` (`{ '/url/prefix/': '/a/directory' }`), a GET under a prefix
 * serves that directory's files (the example page and the package); any other GET is a 404.
 */
export async function startServer(script, { statics = {} } = {}) {
    const requests = [];
    const queue = [...script];
    const server = http.createServer(async (req, res) => {
        if (req.method === 'GET') {
            const pathname = decodeURIComponent(new URL(req.url, 'http://x').pathname);
            const prefix = Object.keys(statics).find((p) => pathname.startsWith(p));
            if (!prefix) return res.writeHead(404).end();
            const dir = path.resolve(statics[prefix]);
            const file = path.join(dir, pathname.slice(prefix.length));
            if (file !== dir && !file.startsWith(dir + path.sep)) return res.writeHead(403).end();
            try {
                const data = await readFile(pathname.endsWith('/') ? path.join(file, 'index.html') : file);
                res.writeHead(200, { 'content-type': TYPES[pathname.endsWith('/') ? '.html' : path.extname(file)] ?? 'application/octet-stream' });
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
            if (step.status) {
                res.writeHead(step.status, { 'content-type': 'application/json', ...step.headers });
                return res.end(JSON.stringify({ error: { message: step.message ?? 'scripted failure' } }));
            }
            if (step.sse) {
                // Server-sent events, one chunk at a time, each a `data:` line, then [DONE].
                res.writeHead(200, { 'content-type': 'text/event-stream' });
                for (const chunk of step.sse) {
                    res.write(`data: ${JSON.stringify(chunk)}\n\n`);
                    await new Promise((resolve) => setTimeout(resolve, 5));
                }
                return res.end('data: [DONE]\n\n');
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
