// Types of rein-harness (glen-harness's API over rein, in WebAssembly).

export interface ToolCall {
    id: string;
    type: 'function';
    name: string;
    arguments: Record<string, unknown>;
    function: { name: string; arguments: string };
}

export interface ToolResult {
    tool_call_id: string;
    name: string;
    content: string;
    isError: boolean;
}

export interface LocalTool {
    name: string;
    description?: string;
    inputSchema?: Record<string, unknown>;
    execute(args: Record<string, unknown>): unknown | Promise<unknown>;
}

export interface RemoteTool {
    name: string;
    description?: string;
    inputSchema?: Record<string, unknown>;
}

export interface ToolClient {
    callTool(name: string, args: Record<string, unknown>): unknown | Promise<unknown>;
}

export interface ModelEntry {
    value: string;
    /** The base URL (`…/v1`); the config's `endpoint`, else the provider's public one. */
    endpoint?: string;
    /** The wire protocol (default `openai`: OpenAI-compatible Chat Completions). */
    provider?: 'openai' | 'anthropic' | 'gemini';
    api_key?: string;
    label?: string;
    /** The model string sent, when it differs from `value`. */
    model?: string;
    context_window?: number;
    max_output_tokens?: number;
    [setting: string]: unknown;
}

export interface AgentConfig {
    llm_models?: ModelEntry[];
    llm_model?: string;
    auto_approve?: boolean;
    max_tool_calls?: number;
    max_tool_calls_manual?: number;
    temperature?: number;
    top_p?: number;
    seed?: number;
    max_tokens?: number;
    prompt_cache?: boolean;
    reasoning_toggle?: boolean;
    reasoning_default?: boolean;
    llm_timeout_seconds?: number;
    /** Stream replies (default on); a server that answers plain JSON is read as well. */
    stream?: boolean;
    /** The longest `Retry-After` of a 429 or 503 waited for (default 60). */
    max_retry_wait_seconds?: number;
    max_reply_bytes?: number;
    thinking_budget_tokens?: number;
    /** The endpoint and key of every model that names none. */
    endpoint?: string;
    api_key?: string;
    client_header_hosts?: string[];
    [key: string]: unknown;
}

export declare class ToolRegistry {
    constructor();
    registerLocal(tool: LocalTool): void;
    registerRemote(tools: RemoteTool[], client: ToolClient): number;
    readonly names: string[];
}

export interface TurnAnswer {
    response: string;
    ending: 'answered' | 'checkpoint' | 'step_limit' | 'length' | 'interrupted' | 'fallback' | 'error' | string;
    steps: number;
    toolRounds: number;
}

export declare class Agent {
    constructor(config: AgentConfig, toolRegistry: ToolRegistry, options?: { clientName?: string });
    readonly config: AgentConfig;
    readonly toolRegistry: ToolRegistry;
    readonly model: string | undefined;
    autoApprove: boolean;
    setSystemPrompt(text: string): void;
    setModel(value: string): void;
    processMessage(text: string): Promise<TurnAnswer>;
    abort(): void;
    clearHistory(): void;

    onThinkingStart?: () => void;
    onThinkingEnd?: () => void;
    onReasoning?: (text: string, iterations: number) => void;
    onToolProposal?: (
        calls: ToolCall[],
        displayContent: string,
        iterations: number,
    ) => void | { approved: boolean } | Promise<{ approved: boolean }>;
    onToolExecuting?: (calls: ToolCall[]) => void;
    onToolResults?: (results: ToolResult[], iterations: number) => void;
    onCheckpoint?: (summary: string, iterations: number) => void;
    onRetry?: (error: Error) => void;
}

export interface Recovered {
    reasoning: string | null;
    calls: { id: string; name: string; arguments: Record<string, unknown> }[];
    text: string;
    attemptedUnparsed: boolean;
    diagnostics: unknown[];
}

export declare function recover(
    message: string | { content?: string | null; reasoning_content?: string; tool_calls?: unknown[] },
    toolNames?: string[],
): Recovered;
