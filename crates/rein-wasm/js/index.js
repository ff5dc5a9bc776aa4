// rein-harness: glen-harness's JavaScript API (Agent, ToolRegistry) over rein's loop, compiled
// to WebAssembly. An ES module that initializes itself on import, in Node 20 and in browsers.
import init, { AgentCore, RegistryCore, recover as recoverCore } from './rein_wasm.js';

const wasmUrl = new URL('./rein_wasm_bg.wasm', import.meta.url);
if (wasmUrl.protocol === 'file:' && typeof process !== 'undefined' && process.versions?.node) {
    const { readFile } = await import('node:fs/promises');
    await init({ module_or_path: await readFile(wasmUrl) });
} else {
    await init({ module_or_path: wasmUrl });
}

/** One dispatch for local tools (functions in the page) and remote tools (an MCP client). */
export class ToolRegistry {
    constructor() {
        this._core = new RegistryCore();
    }

    /** Registers `{ name, description, inputSchema, execute }`. */
    registerLocal(tool) {
        this._core.registerLocal(tool);
    }

    /** Registers MCP tools (`tools/list` entries) run through `client.callTool(name, args)`. */
    registerRemote(tools, client) {
        return this._core.registerRemote(tools, client);
    }

    /** The names of the registered tools. */
    get names() {
        return this._core.names;
    }
}

/** The tool-use loop against rein-model's providers (OpenAI-compatible by default), with glen's config and callbacks. */
export class Agent {
    constructor(config, toolRegistry, { clientName } = {}) {
        this.config = config ?? {};
        this.toolRegistry = toolRegistry ?? new ToolRegistry();
        this._core = new AgentCore(this.config, clientName ?? 'rein-harness', this);
    }

    setSystemPrompt(text) {
        this._core.setSystemPrompt(String(text ?? ''));
    }

    setModel(value) {
        this._core.setModel(String(value));
    }

    get model() {
        return this._core.model;
    }

    get autoApprove() {
        return this._core.autoApprove;
    }

    set autoApprove(on) {
        this._core.autoApprove = Boolean(on);
    }

    /** Runs one turn; resolves to `{ response, ending, steps, toolRounds }`. */
    processMessage(text) {
        return this._core.processMessage(String(text), this.toolRegistry._core);
    }

    /** Stops the running turn at its next await, the model request included. */
    abort() {
        this._core.abort();
    }

    clearHistory() {
        this._core.clearHistory();
    }
}

/** rein's recovery parser: reasoning and tool calls out of a reply's text. */
export function recover(message, toolNames = []) {
    return recoverCore(message, toolNames);
}
