// The example page (examples/web/) in headless Chromium: the page loads the package, the
// scripted model calls the page's local tool, and the tool changes the page.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { startServer, call } from './scripted-server.mjs';

const root = fileURLToPath(new URL('../../../../', import.meta.url));
const chromium = process.env.REIN_CHROMIUM ?? '/usr/bin/chromium';
const pkgBuilt = existsSync(`${root}target/wasm/pkg/index.js`);

test('the example page runs a local tool that changes the page', {
    skip: !existsSync(chromium) ? `no Chromium at ${chromium} (set REIN_CHROMIUM)` : !pkgBuilt ? 'run `cargo xtask wasm` first' : false,
}, async () => {
    const server = await startServer([
        { tool_calls: [call('p1', 'set_panel', { color: 'teal', caption: 'Teal now' })] },
        { content: 'The panel is teal.' },
    ], { staticRoot: root.replace(/\/$/, '') });
    try {
        const url = new URL(`${server.endpoint.replace('/v1', '')}/examples/web/index.html`);
        url.searchParams.set('endpoint', '/v1');
        url.searchParams.set('model', 'scripted');
        url.searchParams.set('say', 'Make the panel teal.');
        const dom = await new Promise((resolve, reject) => {
            execFile(chromium, [
                '--headless', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
                '--virtual-time-budget=20000', '--dump-dom', url.href,
            ], { timeout: 60000, maxBuffer: 1 << 24 }, (error, stdout, stderr) => error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve(stdout));
        });
        assert.match(dom, /data-color="teal"/);
        assert.match(dom, /Teal now/);
        assert.match(dom, /agent: The panel is teal\./);
        assert.equal(server.requests.length, 2);
    } finally {
        await server.close();
    }
});
