// rein web chat: sessions, streamed turns over SSE, approvals, tasks, export, client tools and
// view context. Plain ES module, no build step, nothing loaded from outside this server.
//
// One code for both chats: the page (`/`) mounts it on its own document; the widget
// (`/widget.js`, on a host page of another origin) imports it as `app.js?embed` and mounts it
// in a shadow root with the server's URL and a token.

import { escapeHtml, renderMarkdown } from './markdown.js';

// Where the chat is mounted (`mount` sets it): the element tree its ids are looked up in, the
// server's origin ('' on the page), and the element that carries the page's `data-*` flags.
const env = { root: document, base: '', flags: document.body, embedded: false };
let API = '/agent/api/runtime';
const $ = (id) => env.root.getElementById(id);
const store = {
  get: (k, d) => {
    try {
      const v = localStorage.getItem(k);
      return v === null ? d : JSON.parse(v);
    } catch {
      return d;
    }
  },
  set: (k, v) => {
    try {
      localStorage.setItem(k, JSON.stringify(v));
    } catch {
      /* storage may be disabled */
    }
  },
};

const state = {
  token: store.get('rein.token', ''),
  agents: [],
  models: [],
  sessions: [],
  sessionId: null,
  session: null,
  source: null,
  busy: false,
  pinned: true, // the log follows new text
  deltaCount: 0, // text deltas seen (the browser test checks that text streams)
  turn: null, // the turn being rendered
  approvals: new Map(), // approvalId -> card element
  // The model the person picked for the chat not created yet; without one, a new session
  // starts on its agent's model (the agent's `runtimeModel`), which the server decides.
  modelPick: null,
  modelCheckPolls: 0,
  prefs: {
    agent: store.get('rein.agent', ''),
    autoApprove: store.get('rein.autoApprove', false),
    reasoning: store.get('rein.reasoning', true),
  },
};

// ---------------------------------------------------------------------------------------------
// HTTP

class ApiError extends Error {
  constructor(status, body) {
    const err = (body && body.error) || {};
    super(err.message || `HTTP ${status}`);
    this.status = status;
    this.code = err.code || 'http_error';
  }
}

async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (state.token) headers.Authorization = `Bearer ${state.token}`;
  const response = await fetch(API + path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (response.status === 401) {
    askForToken();
    throw new ApiError(401, data);
  }
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

function askForToken() {
  const dialog = $('token-dialog');
  if (!dialog.open) dialog.showModal();
}

// ---------------------------------------------------------------------------------------------
// Status line and banner

function setStatus(text) {
  $('status').textContent = text || '';
}

function showBanner(text, kind = '') {
  const banner = $('banner');
  banner.textContent = text;
  banner.className = `banner ${kind}`;
  banner.hidden = !text;
}

function setBusy(busy) {
  state.busy = busy;
  $('send').hidden = busy;
  $('stop').hidden = !busy;
  setStatus(busy ? 'Working…' : '');
}

// ---------------------------------------------------------------------------------------------
// Catalog: agents, models, sessions

async function loadCatalog() {
  try {
    const [agents, models] = await Promise.all([api('GET', '/agents'), api('GET', '/models')]);
    state.agents = agents.agents || [];
    state.models = models.models || [];
    state.defaultModel = models.defaultModel || null;
    const select = $('model-select');
    select.replaceChildren();
    for (const model of state.models) {
      const option = document.createElement('option');
      option.value = model.name;
      option.textContent = model.label || model.name;
      select.append(option);
    }
    select.disabled = state.models.length === 0;
    const agentSelect = $('agent-select');
    agentSelect.replaceChildren();
    for (const agent of state.agents) {
      const option = document.createElement('option');
      option.value = agent.name;
      option.textContent = agent.name;
      if (agent.description) option.title = agent.description;
      agentSelect.append(option);
    }
    const stored = state.agents.some((a) => a.name === state.prefs.agent);
    if (stored) agentSelect.value = state.prefs.agent;
    agentSelect.disabled = state.agents.length < 2;
    showAgentModel();
    const agent = selectedAgent();
    if (agent && !agent.runtimeConfigured && agent.runtimeSetupMessage) showBanner(agent.runtimeSetupMessage);
    showModelStatus(models.defaultModelStatus);
    // Voice input only where the server has a transcription model (and the browser records).
    state.transcriptionModel = models.transcriptionModel || null;
    $('mic').hidden = !state.transcriptionModel || !window.MediaRecorder || !navigator.mediaDevices;
  } catch (error) {
    if (error.status !== 401) showBanner(`Could not load agents: ${error.message}`, 'error');
  }
}

/** The agent picked for a new chat (the first one unless the person chose another). */
function selectedAgent() {
  const name = $('agent-select').value;
  return state.agents.find((a) => a.name === name) || state.agents[0] || null;
}

/** A chat not created yet shows the model it will start on: the person's pick, else its agent's. */
function showAgentModel() {
  if (state.sessionId) return;
  const agent = selectedAgent();
  const model = state.modelPick || (agent && agent.runtimeModel && agent.runtimeModel.modelRef) || state.defaultModel;
  if (model && state.models.some((m) => m.name === model)) $('model-select').value = model;
}

/**
 * The host's check of the default model (`defaultModelStatus` of `GET /models`): a banner that
 * stays until the check passes when the endpoint does not answer; a check still running is asked
 * about again for a little while.
 */
function showModelStatus(status) {
  const banner = $('model-banner');
  const unreachable = status && status.state === 'unreachable';
  // The server's words, with their `commands` as code (rendered safely: text is escaped).
  banner.innerHTML = unreachable ? renderMarkdown(status.message || 'The model does not answer.') : '';
  banner.hidden = !unreachable;
  env.flags.dataset.modelState = (status && status.state) || 'unchecked';
  if (status && status.state === 'checking' && state.modelCheckPolls < 20) {
    state.modelCheckPolls += 1;
    setTimeout(async () => {
      try {
        showModelStatus((await api('GET', '/models')).defaultModelStatus);
      } catch {
        /* the banner keeps its last state */
      }
    }, 500);
  }
}

// ---------------------------------------------------------------------------------------------
// MCP servers: a notice while one is down or waits for authorization (`GET /mcp/servers`, on
// load and every 15 s; every 3 s while one waits)

const MCP_POLL_MS = 15000;

/** The notice under the banner, made on first use. */
function mcpNotice() {
  let notice = $('mcp-notice');
  if (!notice) {
    notice = document.createElement('div');
    notice.id = 'mcp-notice';
    notice.className = 'banner';
    notice.setAttribute('role', 'status');
    notice.hidden = true;
    $('banner').after(notice);
  }
  return notice;
}

/** `text` as a URL a link may open: http or https only, with a host and no user name in front
 * of it (`https://bank.example@evil.example/`); `null` for anything else (`javascript:`,
 * `data:`, a relative path). Every link to a page an MCP server names goes through here. */
function webLink(text) {
  try {
    const url = new URL(text || '');
    const web = url.protocol === 'https:' || url.protocol === 'http:';
    return web && url.host && !url.username && !url.password ? url : null;
  } catch {
    return null;
  }
}

/** The URL of a `needs_auth` server when it is one a link may open (it comes from the server's
 * authorization server). */
function authorizationLink(server) {
  return webLink(server.authorizationUrl)?.href || null;
}

/** Whether the chat runs on rein's own origin: only there can rein's answer set the cookie
 * that binds this browser to an authorization (a widget on another site's page cannot). */
function onOwnOrigin() {
  try {
    return !env.base || new URL(env.base, location.href).origin === location.origin;
  } catch {
    return false;
  }
}

/** Connect: asks rein for this principal's authorization of the server (the answer sets the
 * `HttpOnly` cookie the callback asks for, so only this browser can complete it), then sends a
 * new tab to its URL. The tab is opened at once, in the click (browsers allow a new tab only
 * then), and cut from this page before it leaves for the authorization server. */
async function connectMcpServer(name, line) {
  const tab = window.open('', '_blank');
  if (tab) tab.opener = null;
  try {
    const answer = await api('POST', `/mcp/servers/${encodeURIComponent(name)}/connect`);
    const href = authorizationLink(answer || {});
    if (!href) throw new Error('the authorization URL is not http(s)');
    if (tab) tab.location.href = href;
    else window.open(href, '_blank', 'noopener,noreferrer');
  } catch (error) {
    if (tab) tab.close();
    const failed = document.createElement('span');
    failed.className = 'mcp-connect-failed';
    failed.textContent = ` Could not connect: ${error.message}`;
    line.append(failed);
  }
}

/** One line per failed server ("MCP server X is down: lastError") and per server waiting for a
 * person to authorize it ("MCP server X needs authorization. Connect": Connect binds this
 * browser to the authorization and opens its URL in a new tab; in a widget on another site it
 * opens rein's own chat, where Connect can bind the browser). */
function showMcpServers(servers) {
  const all = servers || [];
  const down = all.filter((server) => server.status === 'failed');
  const waiting = all.filter((server) => server.status === 'needs_auth');
  const notice = mcpNotice();
  const lines = down.map((server) => {
    const line = document.createElement('div');
    line.className = 'mcp-down';
    line.dataset.server = server.name;
    line.textContent = `MCP server ${server.name} is down: ${server.lastError || 'no answer'}`;
    return line;
  });
  for (const server of waiting) {
    const line = document.createElement('div');
    line.className = 'mcp-needs-auth';
    line.dataset.server = server.name;
    line.append(`MCP server ${server.name} needs authorization. `);
    const href = authorizationLink(server);
    if (href) {
      const link = document.createElement('a');
      link.className = 'mcp-connect';
      link.target = '_blank';
      link.rel = 'noopener noreferrer';
      if (onOwnOrigin()) {
        link.href = href;
        link.textContent = 'Connect';
        link.addEventListener('click', (event) => {
          event.preventDefault();
          connectMcpServer(server.name, line);
        });
      } else {
        link.href = `${env.base}/`;
        link.textContent = "Connect in rein's chat";
      }
      line.append(link);
    }
    lines.push(line);
  }
  notice.replaceChildren(...lines);
  notice.hidden = lines.length === 0;
  env.flags.dataset.mcpDown = down.map((server) => server.name).join(' ');
  env.flags.dataset.mcpNeedsAuth = waiting.map((server) => server.name).join(' ');
  return waiting.length > 0;
}

/** While a server waits for authorization, the list is read every 3 s (the notice goes soon
 * after the person authorized in the other tab). */
const MCP_AUTH_POLL_MS = 3000;

/** Reads the list again shortly (a tool call may be waiting for this person to authorize its
 * server: per-principal tokens); one read for a burst of tool calls. */
let mcpCheckPending = false;
function checkMcpServersSoon() {
  if (mcpCheckPending) return;
  mcpCheckPending = true;
  setTimeout(async () => {
    mcpCheckPending = false;
    try {
      showMcpServers((await api('GET', '/mcp/servers')).servers);
    } catch {
      /* the regular poll tries again */
    }
  }, 1500);
}

async function pollMcpServers() {
  let waiting = false;
  try {
    waiting = showMcpServers((await api('GET', '/mcp/servers')).servers);
  } catch {
    /* the notice keeps its last state */
  }
  setTimeout(pollMcpServers, waiting ? MCP_AUTH_POLL_MS : MCP_POLL_MS);
}

async function loadSessions() {
  try {
    const data = await api('GET', '/sessions');
    state.sessions = data.sessions || [];
  } catch (error) {
    if (error.status !== 401) showBanner(`Could not load chats: ${error.message}`, 'error');
    return;
  }
  renderSessionList();
}

function renderSessionList() {
  const list = $('session-list');
  list.replaceChildren();
  for (const s of state.sessions) {
    const li = document.createElement('li');
    const button = document.createElement('button');
    button.type = 'button';
    button.dataset.sessionId = s.sessionId;
    if (s.sessionId === state.sessionId) button.setAttribute('aria-current', 'true');
    const title = document.createElement('span');
    title.className = 's-title';
    title.textContent = s.title || 'Untitled chat';
    const meta = document.createElement('span');
    meta.className = 's-meta';
    meta.textContent = s.lastMessagePreview || `${s.messageCount || 0} messages`;
    button.append(title, meta);
    button.addEventListener('click', () => openSession(s.sessionId));
    li.append(button);
    list.append(li);
  }
  $('session-empty').hidden = state.sessions.length > 0;
  const current = state.sessions.find((s) => s.sessionId === state.sessionId);
  if (current && current.title) $('session-title').textContent = current.title;
}

// ---------------------------------------------------------------------------------------------
// Sessions

async function createSession() {
  const agent = selectedAgent();
  if (!agent) throw new Error('This server offers no agent.');
  const body = { agentName: agent.name, metadata: {} };
  // Only a model the person picked: without one the session starts on its agent's model.
  if (state.modelPick) body.runtimeModel = state.modelPick;
  const session = await api('POST', '/sessions', body);
  const path = `/sessions/${encodeURIComponent(session.sessionId)}`;
  await api('PATCH', path, { reasoning: $('reasoning').checked });
  // Auto-approve follows the operator's config until the person flips the box; a server that
  // keeps its approvals (`client_may_auto_approve = false`) refuses turning them off.
  const auto = store.get('rein.autoApprove', null);
  if (typeof auto === 'boolean') {
    try {
      await api('PATCH', path, { autoApprove: auto });
    } catch (error) {
      showBanner(error.message, 'error');
    }
  }
  await loadSessions();
  await openSession(session.sessionId);
  return session.sessionId;
}

function resetLog() {
  const log = $('log');
  log.replaceChildren();
  state.pinned = true;
  state.turn = null;
  state.approvals.clear();
  $('checkpoint').hidden = true;
}

function newChat() {
  closeStream();
  state.sessionId = null;
  state.session = null;
  state.modelPick = null;
  const agentSelect = $('agent-select');
  if (state.agents.some((a) => a.name === state.prefs.agent)) agentSelect.value = state.prefs.agent;
  agentSelect.disabled = state.agents.length < 2;
  showAgentModel();
  resetLog();
  const welcome = document.createElement('div');
  welcome.className = 'welcome';
  welcome.id = 'welcome';
  welcome.innerHTML = '<h2>What can I help with?</h2><p class="muted">Answers stream in as they are written. Tool calls and reasoning fold under each answer.</p>';
  $('log').append(welcome);
  $('session-title').textContent = 'New chat';
  for (const id of ['export-md', 'export-json', 'delete-session']) $(id).disabled = true;
  renderSessionList();
  renderTasks([]);
  setBusy(false);
  $('composer-input').focus();
}

async function openSession(sessionId) {
  closeStream();
  state.sessionId = sessionId;
  store.set('rein.activeSession', sessionId);
  resetLog();
  renderSessionList();
  for (const id of ['export-md', 'export-json', 'delete-session']) $(id).disabled = false;
  let session;
  try {
    // `view=full`: every message, the tool-call ones too (TerraFin's list leaves them out).
    session = await api('GET', `/sessions/${encodeURIComponent(sessionId)}?view=full`);
  } catch (error) {
    if (error.status === 404) {
      store.set('rein.activeSession', null);
      newChat();
      await loadSessions();
    }
    return;
  }
  state.session = session;
  applySession(session);
  await syncClientTools();
  openStream(sessionId);
  refreshTasks();
}

function applySession(session) {
  const summary = state.sessions.find((s) => s.sessionId === session.sessionId);
  $('session-title').textContent = (summary && summary.title) || 'New chat';
  if (session.runtimeModel) $('model-select').value = session.runtimeModel.modelRef;
  // A session keeps its agent: the picker shows it, and picks again for the next new chat.
  const agentSelect = $('agent-select');
  if (state.agents.some((a) => a.name === session.agentName)) agentSelect.value = session.agentName;
  agentSelect.disabled = true;
  const policy = session.policy || {};
  if (typeof policy.autoApprove === 'boolean') $('auto-approve').checked = policy.autoApprove;
  if (typeof policy.reasoning === 'boolean') $('reasoning').checked = policy.reasoning;
  const meta = session.metadata || {};
  setBusy(Boolean(meta.turnInFlight));
  if (!meta.turnInFlight && meta.turnUnfinished) {
    showBanner(`The last turn did not finish (${meta.turnUnfinished}). Send a message to go on.`);
  } else {
    showBanner('');
  }
  showCheckpoint(session.checkpoint);
}

async function deleteSession() {
  if (!state.sessionId) return;
  if (!window.confirm('Delete this chat?')) return;
  try {
    await api('DELETE', `/sessions/${encodeURIComponent(state.sessionId)}`);
    store.set('rein.activeSession', null);
    newChat();
    await loadSessions();
  } catch (error) {
    showBanner(error.message, 'error');
  }
}

async function updateSettings(patch) {
  if (!state.sessionId) return;
  try {
    state.session = await api('PATCH', `/sessions/${encodeURIComponent(state.sessionId)}`, patch);
  } catch (error) {
    showBanner(error.message, 'error');
  }
}

// ---------------------------------------------------------------------------------------------
// Event stream

function closeStream() {
  if (state.source) state.source.close();
  state.source = null;
}

function openStream(sessionId) {
  let url = `${API}/sessions/${encodeURIComponent(sessionId)}/events`;
  if (state.token) url += `?access_token=${encodeURIComponent(state.token)}`;
  const source = new EventSource(url);
  state.source = source;
  // Every event type arrives as a named SSE event; one handler renders them all.
  const types = [
    'turn_started', 'request_started', 'text_delta', 'reasoning_delta', 'reasoning', 'message',
    'tool_proposal', 'approval_requested', 'tool_started', 'tool_result', 'notice', 'checkpoint',
    'task_update', 'turn_end', 'error', 'model_retry', 'client_tool_call',
    'elicitation_requested', 'elicitation_answered',
  ];
  for (const type of types) {
    source.addEventListener(type, (e) => {
      if (state.source !== source) return;
      try {
        handleEvent(JSON.parse(e.data), e.lastEventId);
      } catch (err) {
        console.error('bad event', err);
      }
    });
  }
  source.addEventListener('ready', () => {
    if (state.source === source) env.flags.dataset.stream = 'open';
  });
}

// ---------------------------------------------------------------------------------------------
// Rendering turns

function removeWelcome() {
  const welcome = $('welcome');
  if (welcome) welcome.remove();
}

/** Keeps the newest text in view unless the reader scrolled up to read something older. */
function scrollDown() {
  const log = $('log');
  if (state.pinned) log.scrollTop = log.scrollHeight;
}

function startTurn(userText) {
  removeWelcome();
  const el = document.createElement('article');
  el.className = 'turn';
  el.setAttribute('aria-label', 'Turn');
  const user = document.createElement('div');
  user.className = 'bubble-user';
  user.textContent = userText;
  const assistant = document.createElement('div');
  assistant.className = 'assistant';
  const activity = document.createElement('details');
  activity.className = 'activity';
  activity.hidden = true;
  const summary = document.createElement('summary');
  summary.textContent = 'Activity';
  const list = document.createElement('ol');
  list.className = 'activity-list';
  activity.append(summary, list);
  const answer = document.createElement('div');
  answer.className = 'answer markdown';
  assistant.append(activity, answer);
  el.append(user, assistant);
  $('log').append(el);
  const turn = {
    el, userText, assistant, activity, summary, list, answer,
    text: '', reasoning: null, calls: new Map(), toolCount: 0, ended: false, renderPending: false,
  };
  state.turn = turn;
  scrollDown();
  return turn;
}

function currentTurn() {
  return state.turn && !state.turn.ended ? state.turn : startTurn('');
}

function updateSummary(turn) {
  const parts = [];
  if (turn.list.querySelector('.reasoning-item')) parts.push('reasoning');
  if (turn.toolCount) parts.push(`${turn.toolCount} tool call${turn.toolCount === 1 ? '' : 's'}`);
  turn.summary.textContent = parts.length ? `Activity: ${parts.join(', ')}` : 'Activity';
  turn.activity.hidden = turn.list.children.length === 0;
}

function renderAnswer(turn) {
  if (turn.renderPending) return;
  turn.renderPending = true;
  requestAnimationFrame(() => {
    turn.renderPending = false;
    turn.answer.innerHTML = renderMarkdown(turn.text);
    scrollDown();
  });
}

function reasoningItem(turn) {
  if (turn.reasoning) return turn.reasoning;
  const li = document.createElement('li');
  li.className = 'reasoning-item';
  const details = document.createElement('details');
  const summary = document.createElement('summary');
  summary.textContent = 'Reasoning';
  const body = document.createElement('div');
  body.className = 'body';
  const text = document.createElement('div');
  text.className = 'reasoning-text';
  body.append(text);
  details.append(summary, body);
  li.append(details);
  turn.list.append(li);
  turn.reasoning = { li, text, value: '' };
  updateSummary(turn);
  return turn.reasoning;
}

function pretty(value) {
  if (typeof value === 'string') {
    try {
      return JSON.stringify(JSON.parse(value), null, 2);
    } catch {
      return value;
    }
  }
  return JSON.stringify(value, null, 2);
}

function callArguments(call) {
  if (call.function) return pretty(call.function.arguments || '{}');
  return pretty(call.arguments || {});
}

function callName(call) {
  return (call.function && call.function.name) || call.name || 'tool';
}

function toolItem(turn, callId, name, args) {
  let item = turn.calls.get(callId);
  if (item) return item;
  const li = document.createElement('li');
  li.className = 'tool-item';
  li.dataset.callId = callId;
  const details = document.createElement('details');
  const summary = document.createElement('summary');
  const nameEl = document.createElement('span');
  nameEl.className = 'mono';
  nameEl.textContent = name;
  const status = document.createElement('span');
  status.className = 'badge tool-status';
  status.textContent = 'proposed';
  summary.append(document.createTextNode('Tool '), nameEl, status);
  const body = document.createElement('div');
  body.className = 'body';
  const argsLabel = document.createElement('span');
  argsLabel.className = 'label';
  argsLabel.textContent = 'Arguments';
  const argsPre = document.createElement('pre');
  argsPre.className = 'tool-args';
  argsPre.textContent = args;
  const resultLabel = document.createElement('span');
  resultLabel.className = 'label';
  resultLabel.textContent = 'Result';
  resultLabel.hidden = true;
  const resultPre = document.createElement('pre');
  resultPre.className = 'tool-result';
  resultPre.hidden = true;
  body.append(argsLabel, argsPre, resultLabel, resultPre);
  details.append(summary, body);
  li.append(details);
  turn.list.append(li);
  turn.toolCount += 1;
  item = { li, status, resultLabel, resultPre };
  turn.calls.set(callId, item);
  updateSummary(turn);
  return item;
}

function setToolResult(turn, callId, name, text, isError) {
  const item = toolItem(turn, callId, name, '{}');
  item.resultLabel.hidden = false;
  item.resultPre.hidden = false;
  item.resultPre.textContent = pretty(text);
  item.status.textContent = isError ? 'error' : 'done';
  item.status.className = `badge tool-status ${isError ? 'failed' : 'completed'}`;
}

function addNotice(turn, text) {
  const li = document.createElement('li');
  li.className = 'notice';
  li.textContent = text;
  turn.list.append(li);
  updateSummary(turn);
}

function contentText(content) {
  if (content == null) return '';
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.filter((p) => p.type === 'text').map((p) => p.text).join('');
  return '';
}

/** Moves text streamed beside tool calls into the activity list (it was not the answer). */
function settleInterimText(turn) {
  const interim = turn.text.trim();
  if (interim) addNotice(turn, interim);
  turn.text = '';
  turn.answer.replaceChildren();
}

function handleEvent(event, eventId) {
  if (eventId) state.lastEventId = eventId;
  switch (event.type) {
    case 'turn_started': {
      startTurn(event.text);
      if (!state.sendingText || state.sendingText !== event.text) setBusy(true);
      break;
    }
    case 'request_started':
      currentTurn().reasoning = null;
      break;
    case 'text_delta': {
      state.deltaCount += 1;
      const turn = currentTurn();
      turn.text += event.text;
      renderAnswer(turn);
      break;
    }
    case 'reasoning_delta': {
      const item = reasoningItem(currentTurn());
      item.value += event.text;
      item.text.textContent = item.value;
      break;
    }
    case 'reasoning': {
      const item = reasoningItem(currentTurn());
      item.value = event.text;
      item.text.textContent = event.text;
      break;
    }
    case 'message':
      handleMessage(event.message);
      break;
    case 'tool_proposal': {
      const turn = currentTurn();
      settleInterimText(turn);
      for (const call of event.calls || []) toolItem(turn, call.id, callName(call), callArguments(call));
      break;
    }
    case 'approval_requested':
      addApproval(currentTurn(), event.approval_id, event.call);
      break;
    case 'tool_started': {
      checkMcpServersSoon();
      const item = toolItem(currentTurn(), event.call_id, event.name, '{}');
      item.status.textContent = 'running';
      item.status.className = 'badge tool-status running';
      break;
    }
    case 'tool_result': {
      const output = event.output || {};
      setToolResult(currentTurn(), event.call_id, event.name, output.structured ?? output.text ?? '', output.is_error);
      break;
    }
    case 'notice':
      addNotice(currentTurn(), event.message);
      break;
    case 'model_retry': {
      const wait = event.delay_ms > 0 ? ` in ${Math.ceil(event.delay_ms / 1000)} s` : '';
      addNotice(currentTurn(), `Retrying the model request${wait} (attempt ${event.attempt}): ${event.reason}`);
      break;
    }
    case 'checkpoint':
      showCheckpoint({ summary: event.summary });
      break;
    case 'task_update':
      refreshTasks();
      break;
    case 'turn_end':
      endTurn(event);
      break;
    case 'error':
      addNotice(currentTurn(), `Error: ${event.message}`);
      break;
    case 'client_tool_call':
      runClientTool(event);
      break;
    case 'elicitation_requested':
      addElicitation(currentTurn(), event);
      break;
    case 'elicitation_answered':
      markElicitation(event.elicitation_id, event.action);
      break;
    default:
      break;
  }
}

function handleMessage(message) {
  if (!message) return;
  if (message.role === 'user') {
    const text = contentText(message.content);
    const turn = state.turn;
    if (!turn || turn.ended) {
      // A transcript without turn_started events: each user message opens a turn.
      startTurn(text).sawUser = true;
    } else if (turn.userText === text && !turn.sawUser) {
      turn.sawUser = true;
    } else {
      // Inside a turn, any other user-role message is a note the runtime added (a finished
      // background task, a retry prompt): shown in the turn's activity, not as a new turn.
      addNotice(turn, text);
    }
    return;
  }
  const turn = currentTurn();
  if (message.role === 'assistant') {
    if (message.reasoning_content && !turn.reasoning) reasoningItem(turn).text.textContent = message.reasoning_content;
    const calls = message.tool_calls || [];
    if (calls.length) {
      const beside = contentText(message.content);
      if (turn.text.trim() === '' && beside.trim()) turn.text = beside;
      settleInterimText(turn);
      for (const call of calls) toolItem(turn, call.id, callName(call), callArguments(call));
    } else {
      turn.text = contentText(message.content);
      renderAnswer(turn);
    }
    turn.reasoning = null;
  } else if (message.role === 'tool') {
    const item = turn.calls.get(message.tool_call_id);
    if (!item || item.resultPre.hidden) {
      setToolResult(turn, message.tool_call_id, item ? item.li.querySelector('.mono').textContent : 'tool', contentText(message.content), message.is_error);
    }
  }
}

function endTurn(event) {
  const turn = currentTurn();
  if (!turn.text.trim() && event.text) turn.text = event.text;
  turn.answer.innerHTML = renderMarkdown(turn.text);
  turn.ended = true;
  turn.assistant.classList.add('done');
  if (event.ending && event.ending !== 'answered') {
    const badge = document.createElement('div');
    badge.className = 'ending';
    const labels = {
      checkpoint: 'Paused at a checkpoint',
      step_limit: 'Step limit reached',
      length: 'Cut at the output limit',
      interrupted: 'Stopped',
      fallback: 'Ended after repeated tool errors',
      error: 'The turn failed',
    };
    badge.innerHTML = `<span class="badge">${escapeHtml(labels[event.ending] || event.ending)}</span>`;
    turn.assistant.append(badge);
  }
  if (event.ending !== 'checkpoint') showCheckpoint(null);
  if (!state.sendingText) setBusy(false);
  scrollDown();
  loadSessions();
  refreshTasks();
}

// ---------------------------------------------------------------------------------------------
// Sending, stopping, checkpoints

async function send(text) {
  if (state.busy) return;
  showBanner('');
  setBusy(true);
  state.sendingText = text;
  const input = $('composer-input');
  input.value = '';
  autosize();
  try {
    if (!state.sessionId) await createSession();
    // The server drops a session's client tools with its live state (an idle session, once
    // many are open): offered again before each turn, the model always has this page's tools.
    await syncClientTools();
    const body = { content: text };
    const viewContextId = sessionStorage.getItem(VIEW_CONTEXT_KEY);
    if (viewContextId) body.viewContextId = viewContextId;
    const run = await api('POST', `/sessions/${encodeURIComponent(state.sessionId)}/messages`, body);
    // The stream normally renders the turn; give it a moment to catch up, then fall back to
    // the answer in the response so nothing is lost when the stream is down.
    const rendered = () => state.turn && state.turn.userText === text && state.turn.ended;
    if (!rendered() && state.source && state.source.readyState !== EventSource.CLOSED) {
      await waitFor(rendered, 5000);
    }
    if (!rendered()) {
      if (!state.turn || state.turn.userText !== text) startTurn(text);
      endTurn({ ending: run.turnEnding, text: run.finalMessage ? run.finalMessage.content : '' });
    }
    state.session = run.session;
    showCheckpoint(run.session && run.session.checkpoint);
  } catch (error) {
    if (error.code === 'hosted_agent_turn_in_flight') {
      input.value = text; // not sent: give the text back
      autosize();
      showBanner('A turn is still running in this chat. Wait for it or stop it, then send again.');
    } else if (error.status === 401) {
      input.value = text;
      autosize();
    } else {
      showBanner(`Not answered: ${error.message}`, 'error');
    }
  } finally {
    state.sendingText = null;
    setBusy(false);
    loadSessions();
  }
}

async function stop() {
  if (!state.sessionId) return;
  setStatus('Stopping…');
  try {
    await api('POST', `/sessions/${encodeURIComponent(state.sessionId)}/interrupt`);
  } catch (error) {
    showBanner(`Could not stop: ${error.message}`, 'error');
  }
}

function showCheckpoint(checkpoint) {
  const box = $('checkpoint');
  if (!checkpoint) {
    box.hidden = true;
    return;
  }
  $('checkpoint-summary').innerHTML = renderMarkdown(checkpoint.summary || '');
  box.hidden = false;
}

async function continueTurn() {
  if (!state.sessionId || state.busy) return;
  $('checkpoint').hidden = true;
  setBusy(true);
  state.sendingText = '(continue)';
  try {
    const run = await api('POST', `/sessions/${encodeURIComponent(state.sessionId)}/continue`);
    state.session = run.session;
    showCheckpoint(run.session && run.session.checkpoint);
  } catch (error) {
    showBanner(error.message, 'error');
  } finally {
    state.sendingText = null;
    setBusy(false);
  }
}

async function discardCheckpoint() {
  if (!state.sessionId) return;
  try {
    state.session = await api('POST', `/sessions/${encodeURIComponent(state.sessionId)}/discard`);
    showCheckpoint(null);
    addNotice(currentTurnOrLast(), 'Paused turn discarded.');
  } catch (error) {
    showBanner(error.message, 'error');
  }
}

function waitFor(condition, ms) {
  return new Promise((resolve) => {
    const started = Date.now();
    const tick = () => {
      if (condition() || Date.now() - started > ms) resolve();
      else setTimeout(tick, 40);
    };
    tick();
  });
}

function currentTurnOrLast() {
  return state.turn || startTurn('');
}

// ---------------------------------------------------------------------------------------------
// Approvals

function addApproval(turn, approvalId, call) {
  if (state.approvals.has(approvalId)) return;
  const card = $('approval-template').content.firstElementChild.cloneNode(true);
  card.dataset.approvalId = approvalId;
  card.setAttribute('aria-label', `Approval for ${callName(call || {})}`);
  card.querySelector('.approval-tool').textContent = callName(call || {});
  card.querySelector('.approval-args').textContent = callArguments(call || {});
  const decide = (approve) => decideApproval(card, approvalId, approve);
  card.querySelector('.approval-approve').addEventListener('click', () => decide(true));
  card.querySelector('.approval-deny').addEventListener('click', () => decide(false));
  turn.assistant.insertBefore(card, turn.answer);
  state.approvals.set(approvalId, card);
  scrollDown();
  // The stream may replay an approval decided long ago: show its current state.
  api('GET', `/approvals/${encodeURIComponent(approvalId)}`).then(markApproval, () => {});
}

function markApproval(approval) {
  const card = state.approvals.get(approval.approvalId);
  if (!card || approval.status === 'pending') return;
  card.classList.add('resolved');
  for (const b of card.querySelectorAll('button')) b.disabled = true;
  card.querySelector('.approval-note').disabled = true;
  card.querySelector('.approval-scope').disabled = true;
  const note = approval.decisionNote ? ` — ${approval.decisionNote}` : '';
  card.querySelector('.approval-state').textContent = `${approval.status}${note}`;
}

async function decideApproval(card, approvalId, approve) {
  const note = card.querySelector('.approval-note').value.trim();
  const body = note ? { note } : {};
  // A denial is always for this call only; the scope says how far an approval reaches.
  if (approve) body.scope = card.querySelector('.approval-scope').value;
  try {
    const approval = await api('POST', `/approvals/${encodeURIComponent(approvalId)}/${approve ? 'approve' : 'deny'}`, body);
    markApproval(approval);
  } catch (error) {
    card.querySelector('.approval-state').textContent = error.message;
  }
}

// ---------------------------------------------------------------------------------------------
// Questions of MCP servers (elicitation): a form built from the requested schema

const elicitations = new Map();

/** The choices of a property of the requested schema, as `[value, label]`: `enum` (labelled
 * by the legacy `enumNames`), `oneOf` of `{const, title}`, or for a multiple choice its
 * `items`' `enum` or `anyOf`. `null` when the property is not a choice. */
function choicesOf(property) {
  const source = property.type === 'array' ? property.items || {} : property;
  if (Array.isArray(source.enum)) {
    const names = Array.isArray(source.enumNames) ? source.enumNames : [];
    return source.enum.map((value, i) => [value, String(names[i] ?? value)]);
  }
  const options = source.oneOf || source.anyOf;
  if (Array.isArray(options)) return options.map((option) => [option.const, String(option.title ?? option.const)]);
  return null;
}

/** The input type a string `format` is typed in (`date-time` has no input of its own that
 * keeps the offset: it is text, with an example). */
const FORMAT_INPUTS = { email: 'email', uri: 'url', date: 'date' };

/** One input of an elicitation form, for a property of the requested schema; the browser
 * checks what it can of the schema's rules before sending (the server checks them all). */
function elicitationField(name, property, required) {
  const label = document.createElement('label');
  label.className = 'field stacked';
  const title = document.createElement('span');
  title.textContent = `${property.title || name}${required ? ' *' : ''}`;
  label.append(title);
  const choices = choicesOf(property);
  let input;
  let read;
  if (property.type === 'array') {
    // Several choices: one checkbox each.
    input = document.createElement('span');
    input.className = 'elicitation-choices';
    const chosen = new Set(Array.isArray(property.default) ? property.default.map(String) : []);
    const boxes = (choices || []).map(([value, text]) => {
      const option = document.createElement('label');
      option.className = 'elicitation-choice';
      const box = document.createElement('input');
      box.type = 'checkbox';
      box.name = name;
      box.value = String(value);
      box.checked = chosen.has(String(value));
      option.append(box, ` ${text}`);
      input.append(option);
      return [box, value];
    });
    read = () => {
      const picked = boxes.filter(([box]) => box.checked).map(([, value]) => value);
      return picked.length || required ? picked : undefined;
    };
  } else if (choices) {
    input = document.createElement('select');
    if (!required) input.append(new Option('', ''));
    for (const [value, text] of choices) input.append(new Option(text, String(value)));
    if (property.default !== undefined) input.value = String(property.default);
    read = () => (input.value === '' ? undefined : choices.find(([value]) => String(value) === input.value)?.[0]);
  } else if (property.type === 'boolean') {
    input = document.createElement('input');
    input.type = 'checkbox';
    input.checked = property.default === true;
    read = () => input.checked;
  } else {
    input = document.createElement('input');
    const number = property.type === 'number' || property.type === 'integer';
    input.type = number ? 'number' : FORMAT_INPUTS[property.format] || 'text';
    if (property.type === 'integer') input.step = '1';
    if (property.type === 'number') input.step = 'any';
    if (number && typeof property.minimum === 'number') input.min = String(property.minimum);
    if (number && typeof property.maximum === 'number') input.max = String(property.maximum);
    if (Number.isInteger(property.minLength)) input.minLength = property.minLength;
    if (Number.isInteger(property.maxLength)) input.maxLength = property.maxLength;
    if (property.format === 'date-time') input.placeholder = '2025-11-25T09:30:00Z';
    if (property.default !== undefined) input.value = String(property.default);
    read = () => {
      if (input.value === '') return undefined;
      return number ? Number(input.value) : input.value;
    };
  }
  if (input.tagName !== 'SPAN') {
    input.name = name;
    input.required = required && property.type !== 'boolean';
  }
  if (property.description) input.title = property.description;
  label.append(input);
  if (property.description) {
    const hint = document.createElement('span');
    hint.className = 'small muted';
    hint.textContent = property.description;
    label.append(hint);
  }
  return { label, read };
}

function addElicitation(turn, event) {
  const id = event.elicitation_id;
  if (!id || elicitations.has(id)) return;
  const card = document.createElement('form');
  card.className = 'approval elicitation';
  card.dataset.elicitationId = id;
  card.setAttribute('aria-label', `Question from ${event.server}`);
  const head = document.createElement('div');
  head.className = 'approval-head';
  const strong = document.createElement('strong');
  strong.textContent = 'Question';
  const server = document.createElement('span');
  server.className = 'mono';
  server.textContent = event.server;
  head.append(strong, server);
  const message = document.createElement('p');
  message.className = 'elicitation-message';
  message.textContent = event.message;
  card.append(head, message);
  // A page to open: only an http(s) one becomes a link (the server declines any other before
  // it is streamed; this is the page's own check), with its host said plainly.
  const page = event.url ? webLink(event.url) : null;
  if (page) {
    const link = document.createElement('a');
    link.className = 'elicitation-link';
    link.href = page.href;
    link.target = '_blank';
    link.rel = 'noopener noreferrer';
    link.textContent = page.href;
    const host = document.createElement('span');
    host.className = 'elicitation-host small muted';
    host.textContent = `Opens a page on ${page.host}`;
    card.append(link, host);
  }
  const schema = event.requested_schema || {};
  const required = new Set(schema.required || []);
  const fields = Object.entries(schema.properties || {}).map(([name, property]) => {
    const field = elicitationField(name, property || {}, required.has(name));
    card.append(field.label);
    return [name, field];
  });
  const row = document.createElement('div');
  row.className = 'row';
  const button = (text, className, action) => {
    const b = document.createElement('button');
    b.type = action === 'accept' ? 'submit' : 'button';
    b.className = className;
    b.textContent = text;
    if (action !== 'accept') b.addEventListener('click', () => answerElicitation(card, id, action, fields));
    return b;
  };
  const stateLine = document.createElement('span');
  stateLine.className = 'elicitation-state small muted';
  stateLine.setAttribute('aria-live', 'polite');
  row.append(
    button('Send', 'primary elicitation-accept', 'accept'),
    button('Decline', 'ghost elicitation-decline', 'decline'),
    button('Cancel', 'ghost danger elicitation-cancel', 'cancel'),
    stateLine,
  );
  card.append(row);
  card.addEventListener('submit', (e) => {
    e.preventDefault();
    answerElicitation(card, id, 'accept', fields);
  });
  turn.assistant.insertBefore(card, turn.answer);
  elicitations.set(id, card);
  scrollDown();
  // The stream may replay a question answered long ago: only a waiting one stays open.
  if (state.sessionId) {
    api('GET', `/sessions/${encodeURIComponent(state.sessionId)}/elicitations`).then((list) => {
      if (!(list.pending || []).includes(id)) markElicitation(id, null);
    }, () => {});
  }
}

function markElicitation(id, action) {
  const card = elicitations.get(id);
  if (!card || card.classList.contains('resolved')) return;
  card.classList.add('resolved');
  for (const control of card.querySelectorAll('button, input, select')) control.disabled = true;
  const labels = { accept: 'Answered', decline: 'Declined', cancel: 'Cancelled' };
  card.querySelector('.elicitation-state').textContent = labels[action] || 'No longer waiting';
}

async function answerElicitation(card, id, action, fields) {
  const body = { action };
  if (action === 'accept') {
    if (!card.reportValidity()) return;
    const content = {};
    for (const [name, field] of fields) {
      const value = field.read();
      if (value !== undefined) content[name] = value;
    }
    body.content = content;
  }
  try {
    await api('POST', `/sessions/${encodeURIComponent(state.sessionId)}/elicitations/${encodeURIComponent(id)}`, body);
    markElicitation(id, action);
  } catch (error) {
    card.querySelector('.elicitation-state').textContent = error.message;
  }
}

// ---------------------------------------------------------------------------------------------
// Tasks

async function refreshTasks() {
  if (!state.sessionId) return renderTasks([]);
  try {
    const data = await api('GET', `/sessions/${encodeURIComponent(state.sessionId)}/tasks`);
    renderTasks(data.tasks || []);
  } catch {
    /* the panel keeps its last state */
  }
}

function renderTasks(tasks) {
  const list = $('task-list');
  list.replaceChildren();
  for (const task of tasks) {
    const li = document.createElement('li');
    li.dataset.taskId = task.taskId;
    const head = document.createElement('div');
    head.className = 't-head';
    const name = document.createElement('span');
    name.className = 'mono';
    name.textContent = task.capabilityName;
    const badge = document.createElement('span');
    badge.className = `badge ${task.status}`;
    badge.textContent = task.status;
    head.append(name, badge);
    li.append(head);
    if (task.description) {
      const d = document.createElement('span');
      d.className = 'small muted';
      d.textContent = task.description;
      li.append(d);
    }
    const stage = task.progress && task.progress.stage;
    if (stage) {
      const s = document.createElement('span');
      s.className = 'small t-stage';
      s.textContent = `Stage: ${stage}`;
      li.append(s);
    }
    if (task.status === 'failed' && task.error) {
      const e = document.createElement('span');
      e.className = 'small t-error';
      e.textContent = task.error;
      li.append(e);
    }
    if (task.status === 'queued' || task.status === 'running') {
      const cancel = document.createElement('button');
      cancel.type = 'button';
      cancel.className = 'ghost danger';
      cancel.textContent = 'Cancel';
      cancel.setAttribute('aria-label', `Cancel task ${task.capabilityName}`);
      cancel.addEventListener('click', async () => {
        cancel.disabled = true;
        try {
          await api('POST', `/tasks/${encodeURIComponent(task.taskId)}/cancel`);
        } catch (error) {
          showBanner(error.message, 'error');
        }
        refreshTasks();
      });
      li.append(cancel);
    }
    list.append(li);
  }
  $('task-empty').hidden = tasks.length > 0;
}

// ---------------------------------------------------------------------------------------------
// Export

function download(name, type, text) {
  const blob = new Blob([text], { type });
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

/** Downloads the server's export of the session (credentials scrubbed there, by the one export). */
async function exportSession(kind) {
  if (!state.sessionId) return;
  const format = kind === 'json' ? 'json' : 'markdown';
  const headers = {};
  if (state.token) headers.Authorization = `Bearer ${state.token}`;
  const path = `/sessions/${encodeURIComponent(state.sessionId)}/export?format=${format}`;
  try {
    const response = await fetch(API + path, { headers });
    if (!response.ok) throw new Error(`Could not export (HTTP ${response.status}).`);
    const text = await response.text();
    const base = `rein-${state.sessionId.replace(/[^A-Za-z0-9_-]+/g, '-')}`;
    if (kind === 'json') download(`${base}.json`, 'application/json', text);
    else download(`${base}.md`, 'text/markdown', text);
  } catch (error) {
    showBanner(error.message, 'error');
  }
}

// ---------------------------------------------------------------------------------------------
// Voice input: record with the microphone, the server's transcription model writes it out,
// the text lands in the composer for the person to send.

async function toggleRecording() {
  const mic = $('mic');
  if (state.recorder) {
    state.recorder.stop();
    return;
  }
  let stream;
  try {
    stream = await navigator.mediaDevices.getUserMedia({ audio: true });
  } catch (error) {
    showBanner(`No microphone: ${error.message}`, 'error');
    return;
  }
  const recorder = new MediaRecorder(stream);
  const chunks = [];
  recorder.addEventListener('dataavailable', (e) => {
    if (e.data && e.data.size > 0) chunks.push(e.data);
  });
  recorder.addEventListener('stop', async () => {
    for (const track of stream.getTracks()) track.stop();
    state.recorder = null;
    mic.setAttribute('aria-pressed', 'false');
    mic.classList.remove('recording');
    const type = (recorder.mimeType || 'audio/webm').split(';')[0];
    await transcribe(new Blob(chunks, { type }));
  });
  state.recorder = recorder;
  recorder.start();
  mic.setAttribute('aria-pressed', 'true');
  mic.classList.add('recording');
  setStatus('Recording… (click Mic again to stop)');
}

async function transcribe(blob) {
  setStatus('Transcribing…');
  const form = new FormData();
  const extension = blob.type.includes('ogg') ? 'ogg' : blob.type.includes('wav') ? 'wav' : 'webm';
  form.append('file', blob, `speech.${extension}`);
  const headers = {};
  if (state.token) headers.Authorization = `Bearer ${state.token}`;
  try {
    const response = await fetch(`${API}/transcriptions`, { method: 'POST', headers, body: form });
    const data = await response.json().catch(() => null);
    if (!response.ok) throw new Error((data && data.error && data.error.message) || `HTTP ${response.status}`);
    const input = $('composer-input');
    input.value = input.value.trim() ? `${input.value.trim()} ${data.text}` : data.text;
    autosize();
    input.focus();
    setStatus('');
  } catch (error) {
    setStatus('');
    showBanner(`Could not transcribe: ${error.message}`, 'error');
  }
}

// ---------------------------------------------------------------------------------------------
// Client tools (the page's own tools, run here) and view context

const clientTools = new Map(); // name -> { spec, run }

/** Offers the model a tool this page runs: `run(args)` answers with a string or any JSON. */
export async function registerTool(spec, run) {
  if (!spec || typeof spec.name !== 'string' || typeof run !== 'function') {
    throw new TypeError('registerTool({name, description, inputSchema}, async (args) => result)');
  }
  const entry = { name: spec.name, description: spec.description || '' };
  if (spec.inputSchema) entry.inputSchema = spec.inputSchema;
  clientTools.set(spec.name, { spec: entry, run });
  await syncClientTools();
}

/** Sends this page's tools to the open session (the server keeps them for its turns). */
async function syncClientTools() {
  if (!state.sessionId || clientTools.size === 0) return;
  const tools = [...clientTools.values()].map((t) => t.spec);
  try {
    await api('PUT', `/sessions/${encodeURIComponent(state.sessionId)}/client-tools`, { tools });
  } catch (error) {
    showBanner(`Could not offer this page's tools: ${error.message}`, 'error');
  }
}

/** Runs a call of one of this page's tools and posts its result, once it has claimed the call:
 *  every open tab of the session hears the call and only the first claim wins (409 for the
 *  others), so the tool runs once; a replayed call that no longer waits (answered, timed out,
 *  stopped) is 404 and not run again. */
async function runClientTool(event) {
  const sessionId = state.sessionId;
  if (!sessionId || !event.callId) return;
  const base = `/sessions/${encodeURIComponent(sessionId)}/client-tools`;
  try {
    await api('POST', `${base}/${encodeURIComponent(event.callId)}/claim`);
  } catch {
    return; // another tab runs it, or it waits no more
  }
  const tool = clientTools.get(event.name);
  let content;
  let isError = false;
  if (!tool) {
    content = `This page has no tool named ${event.name}.`;
    isError = true;
  } else {
    try {
      const result = await tool.run(event.arguments || {});
      content = result === undefined || result === null ? 'Done.' : result;
    } catch (error) {
      content = String((error && error.message) || error);
      isError = true;
    }
  }
  try {
    await api('POST', `${base}/${encodeURIComponent(event.callId)}/result`, { content, isError });
  } catch {
    /* the call ended meanwhile (a stop or the timeout): nothing waits for this result */
  }
}

const VIEW_CONTEXT_KEY = 'rein.view-context-id';

/** Publishes what the person is looking at; the next message is linked to it. */
export async function setViewContext(context) {
  let id = sessionStorage.getItem(VIEW_CONTEXT_KEY);
  if (!id) {
    const random = crypto.getRandomValues(new Uint32Array(2));
    id = `page-${random[0].toString(36)}${random[1].toString(36)}`;
  }
  const body = {
    route: (context && context.route) || location.pathname || '/',
    pageType: (context && context.pageType) || 'page',
  };
  for (const key of ['title', 'summary', 'selection', 'entities', 'metadata']) {
    if (context && context[key] !== undefined) body[key] = context[key];
  }
  const stored = await api('PUT', `/view-contexts/${encodeURIComponent(id)}`, body);
  sessionStorage.setItem(VIEW_CONTEXT_KEY, id);
  return stored;
}

// ---------------------------------------------------------------------------------------------
// Wiring

function autosize() {
  const input = $('composer-input');
  input.style.height = 'auto';
  input.style.height = `${Math.min(input.scrollHeight, 220)}px`;
}

function wire() {
  $('composer').addEventListener('submit', (e) => {
    e.preventDefault();
    const text = $('composer-input').value.trim();
    if (text) send(text);
  });
  $('composer-input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      $('composer').requestSubmit();
    }
  });
  $('composer-input').addEventListener('input', autosize);
  $('log').addEventListener('scroll', () => {
    const log = $('log');
    state.pinned = log.scrollHeight - log.scrollTop - log.clientHeight < 80;
  });
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && state.busy && !$('token-dialog').open) {
      e.preventDefault();
      stop();
    }
  });
  $('stop').addEventListener('click', stop);
  $('mic').addEventListener('click', toggleRecording);
  $('new-session').addEventListener('click', newChat);
  $('delete-session').addEventListener('click', deleteSession);
  $('export-md').addEventListener('click', () => exportSession('md'));
  $('export-json').addEventListener('click', () => exportSession('json'));
  $('checkpoint-continue').addEventListener('click', continueTurn);
  $('checkpoint-discard').addEventListener('click', discardCheckpoint);
  $('model-select').addEventListener('change', (e) => {
    if (state.sessionId) updateSettings({ runtimeModel: e.target.value });
    else state.modelPick = e.target.value;
  });
  $('agent-select').addEventListener('change', (e) => {
    state.prefs.agent = e.target.value;
    store.set('rein.agent', e.target.value);
    state.modelPick = null; // another agent: show, and start on, its own model
    showAgentModel();
  });
  $('auto-approve').checked = state.prefs.autoApprove;
  $('reasoning').checked = state.prefs.reasoning;
  $('auto-approve').addEventListener('change', async (e) => {
    const wanted = e.target.checked;
    await updateSettings({ autoApprove: wanted });
    const policy = (state.session && state.session.policy) || {};
    if (!state.sessionId || policy.autoApprove === wanted) {
      store.set('rein.autoApprove', wanted);
    } else if (typeof policy.autoApprove === 'boolean') {
      // Refused (the server keeps its approvals): show what is in force.
      e.target.checked = policy.autoApprove;
    }
  });
  $('reasoning').addEventListener('change', (e) => {
    store.set('rein.reasoning', e.target.checked);
    updateSettings({ reasoning: e.target.checked });
  });
  $('token-form').addEventListener('submit', () => {
    state.token = $('token-input').value.trim();
    store.set('rein.token', state.token);
    start();
  });
}

async function start() {
  await loadCatalog();
  if (!state.mcpPolling) {
    state.mcpPolling = true;
    pollMcpServers();
  }
  await loadSessions();
  const active = store.get('rein.activeSession', null);
  if (active && state.sessions.some((s) => s.sessionId === active)) await openSession(active);
  else newChat();
  env.flags.dataset.ready = 'true';
}

/** Mounts the chat: on the page's own document by default; the widget passes its shadow root,
 *  the server's origin, its token and the element for the `data-*` flags. */
export function mount({ root = document, base = '', token = null, flags = document.body, embedded = false } = {}) {
  Object.assign(env, { root, base, flags, embedded });
  API = `${base}/agent/api/runtime`;
  if (token) state.token = token;
  wire();
  start();
  return { registerTool, setViewContext, renderMarkdown, state, open: openSession };
}

/** The event handling alone, rendering into `root` without starting the chat (no session, no
 *  stream): what the unit tests under `node --test` drive (`tests/browser/events.test.mjs`). */
export function eventRenderer(root) {
  Object.assign(env, { root, flags: root.body || root });
  return { handle: handleEvent, state, showMcpServers, webLink };
}

// The page mounts itself; the widget imports `app.js?embed` and mounts where it wants.
if (!new URL(import.meta.url).searchParams.has('embed')) window.rein = mount();
