// The example page (examples/web/) in headless Chromium: the page loads the package, the
// scripted model calls the page's local tool, and the tool changes the page.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer, call } from './scripted-server.mjs';

const root = fileURLToPath(new URL('../../../../', import.meta.url));
const chromium = process.env.REIN_CHROMIUM ?? '/usr/bin/chromium';
// The package `cargo xtask wasm --test` built (it may live under another CARGO_TARGET_DIR); the
// page imports it from /target/wasm/pkg/, where the server serves it.
const pkg = fileURLToPath(process.env.REIN_WASM_PKG ?? new URL('target/wasm/pkg/', `file://${root}`).href);
const pkgBuilt = existsSync(path.join(pkg, 'index.js'));

test('the example page runs a local tool that changes the page', {
    skip: !existsSync(chromium) ? `no Chromium at ${chromium} (set REIN_CHROMIUM)` : !pkgBuilt ? `no package at ${pkg}: run \`cargo xtask wasm\` first` : false,
}, async () => {
    const server = await startServer([
        { tool_calls: [call('p1', 'set_panel', { color: 'teal', caption: 'Teal now' })] },
        { content: 'The panel is teal.' },
    ], { statics: { '/examples/web/': path.join(root, 'examples/web'), '/target/wasm/pkg/': pkg } });
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
