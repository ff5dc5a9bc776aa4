// rein-harness against a scripted OpenAI-compatible server: glen's API end to end.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, call } from './scripted-server.mjs';

const pkg = process.env.REIN_WASM_PKG ?? new URL('../../../../target/wasm/pkg/', import.meta.url).href;
const { Agent, ToolRegistry, recover } = await import(new URL('index.js', pkg.endsWith('/') ? pkg : pkg + '/').href);

function config(endpoint, extra = {}) {
    return { llm_models: [{ value: 'scripted', endpoint, api_key: 'k' }], ...extra };
}

test('recover finds a call written in the text', () => {
    const found = recover('I will zoom.\n<tool_call>{"name": "zoom", "arguments": {"level": 3}}</tool_call>', ['zoom']);
    assert.equal(found.calls.length, 1);
    assert.equal(found.calls[0].name, 'zoom');
    assert.deepEqual(found.calls[0].arguments, { level: 3 });
    assert.equal(found.text.trim(), 'I will zoom.');
});

test('a call written in the text is recovered and runs a local tool', async () => {
    const server = await startServer([
        { content: '<think>The map must zoom.</think><tool_call>{"name": "zoom", "arguments": {"level": 4}}</tool_call>' },
        { content: 'Zoomed to 4.' },
    ]);
    try {
        const registry = new ToolRegistry();
        const seen = [];
        registry.registerLocal({
            name: 'zoom', description: 'Zooms the map.',
            inputSchema: { type: 'object', properties: { level: { type: 'integer' } }, required: ['level'] },
            execute: async (args) => { seen.push(args); return `zoom is ${args.level}`; },
        });
        const agent = new Agent(config(server.endpoint), registry, { clientName: 'test/1' });
        agent.setSystemPrompt('You control a map.');
        const events = [];
        agent.onThinkingStart = () => events.push('start');
        agent.onThinkingEnd = () => events.push('end');
        agent.onReasoning = (text) => events.push(`reasoning:${text}`);
        agent.onToolProposal = (calls) => events.push(`proposal:${calls.map((c) => c.name)}`);
        agent.onToolExecuting = (calls) => events.push(`executing:${calls.length}`);
        agent.onToolResults = (results) => events.push(`results:${results[0].content}`);
        const { response } = await agent.processMessage('Zoom in.');
        assert.equal(response, 'Zoomed to 4.');
        assert.deepEqual(seen, [{ level: 4 }]);
        assert.ok(events.includes('reasoning:The map must zoom.'), events.join());
        assert.ok(events.includes('proposal:zoom'), events.join());
        assert.ok(events.includes('executing:1'), events.join());
        assert.ok(events.includes('results:zoom is 4'), events.join());
        assert.equal(events[0], 'start');
        const second = server.requests[1].body;
        assert.equal(second.messages[0].role, 'system');
        assert.equal(second.temperature, 0);
        const toolMessage = second.messages.find((m) => m.role === 'tool');
        assert.equal(toolMessage.content, 'zoom is 4');
        assert.equal(server.requests[0].headers.authorization, 'Bearer k');
        assert.equal(server.requests[0].headers['x-client'], undefined); // not a trusted host
    } finally {
        await server.close();
    }
});

test('a remote tool runs through the client object', async () => {
    const server = await startServer([
        { tool_calls: [call('c1', 'query', { sql: 'select 1' })] },
        { content: 'One row.' },
    ]);
    try {
        const calls = [];
        const client = {
            async callTool(name, args) {
                calls.push([name, args]);
                return { content: [{ type: 'text', text: '1 row' }], isError: false };
            },
        };
        const registry = new ToolRegistry();
        registry.registerRemote([{ name: 'query', description: 'SQL.', inputSchema: { type: 'object', properties: { sql: { type: 'string' } } } }], client);
        const agent = new Agent(config(server.endpoint), registry);
        const { response } = await agent.processMessage('How many?');
        assert.equal(response, 'One row.');
        assert.deepEqual(calls, [['query', { sql: 'select 1' }]]);
        assert.equal(server.requests[1].body.messages.at(-1).content, '1 row');
    } finally {
        await server.close();
    }
});

test('a checkpoint after 15 remote rounds; local-only rounds do not count', async () => {
    // 3 local-only rounds first, then remote rounds until the checkpoint summary.
    let n = 0;
    const script = [];
    for (let i = 0; i < 3; i++) script.push({ tool_calls: [call(`l${i}`, 'note', { i })] });
    for (let i = 0; i < 15; i++) script.push({ tool_calls: [call(`r${i}`, 'query', { i })] });
    script.push((body) => {
        n = body.tools?.length ?? 0;
        return { content: 'Summary: 15 queries so far.' };
    });
    const server = await startServer(script);
    try {
        const registry = new ToolRegistry();
        registry.registerLocal({ name: 'note', description: 'Notes.', execute: () => 'noted' });
        let remote = 0;
        registry.registerRemote([{ name: 'query', description: 'SQL.' }], { callTool: () => { remote++; return 'ok'; } });
        const agent = new Agent(config(server.endpoint), registry);
        const checkpoints = [];
        agent.onCheckpoint = (summary, iterations) => checkpoints.push([summary, iterations]);
        const { response, ending } = await agent.processMessage('Go.');
        assert.equal(ending, 'checkpoint');
        assert.equal(remote, 15);
        assert.equal(checkpoints.length, 1);
        assert.match(checkpoints[0][0], /Summary/);
        assert.match(response, /Summary/);
        assert.equal(n, 0, 'the summary request offers no tools');
        assert.equal(server.requests.length, 19);
    } finally {
        await server.close();
    }
});

test('abort() during a model request ends the turn', async () => {
    const server = await startServer([{ hang: true }, { content: 'Back.' }]);
    try {
        const agent = new Agent(config(server.endpoint), new ToolRegistry());
        let started;
        const thinking = new Promise((resolve) => (started = resolve));
        agent.onThinkingStart = () => started();
        const turn = agent.processMessage('Hello?');
        await thinking;
        await new Promise((resolve) => setTimeout(resolve, 50));
        agent.abort();
        const result = await Promise.race([
            turn.then((answer) => ({ answer }), (error) => ({ error })),
            new Promise((resolve) => setTimeout(() => resolve({ timeout: true }), 3000)),
        ]);
        assert.ok(!result.timeout, 'the turn did not end after abort()');
        assert.equal(result.answer?.ending, 'interrupted', String(result.error));
        assert.equal(server.requests.length, 1);
        const { response } = await agent.processMessage('Again?');
        assert.equal(response, 'Back.');
    } finally {
        await server.close();
    }
});

test('approval through onToolProposal when auto-approve is off', async () => {
    const server = await startServer([
        { tool_calls: [call('a1', 'delete_layer', { id: 7 })] },
        { content: 'Not deleted.' },
        { tool_calls: [call('a2', 'delete_layer', { id: 8 })] },
        { content: 'Deleted.' },
    ]);
    try {
        const ran = [];
        const registry = new ToolRegistry();
        registry.registerRemote([{ name: 'delete_layer', description: 'Deletes.' }], {
            callTool: (name, args) => { ran.push(args.id); return 'deleted'; },
        });
        const agent = new Agent(config(server.endpoint, { auto_approve: false }), registry);
        assert.equal(agent.autoApprove, false);
        const asked = [];
        let answer = false;
        agent.onToolProposal = async (calls, text, iterations) => {
            asked.push(calls.map((c) => c.name).join());
            return { approved: answer };
        };
        await agent.processMessage('Delete layer 7.');
        assert.deepEqual(ran, []);
        assert.match(server.requests[1].body.messages.at(-1).content, /declined/);
        answer = true;
        const { response } = await agent.processMessage('Delete layer 8.');
        assert.equal(response, 'Deleted.');
        assert.deepEqual(ran, [8]);
        assert.deepEqual(asked, ['delete_layer', 'delete_layer']);
    } finally {
        await server.close();
    }
});

test("rein-model's rules over fetch: a 429's Retry-After is waited for, a stream is read", async () => {
    const delta = (d, finish = null) => ({ id: 'x', choices: [{ index: 0, delta: d, finish_reason: finish }] });
    const server = await startServer([
        { status: 429, headers: { 'retry-after': '0.2' }, message: 'slow down' },
        { sse: [delta({ role: 'assistant', content: 'Str' }), delta({ content: 'eamed.' }), delta({}, 'stop')] },
    ]);
    try {
        const agent = new Agent(config(server.endpoint), new ToolRegistry());
        const retries = [];
        agent.onRetry = (error) => retries.push(error.message);
        const started = Date.now();
        const { response } = await agent.processMessage('Hi.');
        assert.equal(response, 'Streamed.');
        assert.ok(Date.now() - started >= 150, 'the Retry-After was waited for');
        assert.equal(retries.length, 1);
        assert.match(retries[0], /429/);
        assert.equal(server.requests.length, 2);
        // rein-model's shaping: streamed by default, with the usage chunk asked for.
        assert.equal(server.requests[0].body.stream, true);
        assert.deepEqual(server.requests[0].body.stream_options, { include_usage: true });
        assert.equal(server.requests[0].headers.accept, 'text/event-stream');
    } finally {
        await server.close();
    }
});
