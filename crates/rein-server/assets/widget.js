// rein chat widget: the web chat on any page, from one tag.
//
//   <script src="http://127.0.0.1:8080/widget.js" data-token="TOKEN" async></script>
//
// `data-token` only where the server has tokens; the host page's origin must be listed in the
// server's `server.cors_origins`, or the browser refuses every request (CORS). The panel is the
// page's own chat code (`/assets/app.js`, mounted in a shadow root), so it streams, folds
// activity, asks for approvals and stops as the full page does. API on `window.rein`:
//
//   rein.registerTool({name, description, inputSchema}, async (args) => result)
//   rein.setViewContext({route, pageType, title, summary, selection, entities, metadata})
//   rein.open(), rein.close(), rein.ready (a promise of the mounted chat)
//
// A classic script (not a module) so that `document.currentScript` names the server.
(() => {
  const script = document.currentScript;
  if (!script || !script.src) return;
  const base = new URL(script.src).origin;
  const token = script.dataset.token || null;

  const host = document.createElement('div');
  host.id = 'rein-widget';
  const shadow = host.attachShadow({ mode: 'open' });
  const style = document.createElement('link');
  style.rel = 'stylesheet';
  style.href = `${base}/assets/chat.css`;
  const launcher = document.createElement('button');
  launcher.type = 'button';
  launcher.className = 'rein-launcher primary';
  launcher.id = 'rein-launcher';
  launcher.textContent = 'Chat';
  launcher.setAttribute('aria-expanded', 'false');
  launcher.setAttribute('aria-controls', 'rein-panel');
  launcher.hidden = true; // shown once the chat is mounted: a refused origin shows nothing
  const panel = document.createElement('section');
  panel.className = 'rein-panel';
  panel.id = 'rein-panel';
  panel.setAttribute('aria-label', 'Chat');
  panel.hidden = true;
  const close = document.createElement('button');
  close.type = 'button';
  close.className = 'ghost rein-close';
  close.id = 'rein-close';
  close.setAttribute('aria-label', 'Close the chat');
  close.textContent = '×';
  shadow.append(style, launcher, panel);

  const setOpen = (open) => {
    panel.hidden = !open;
    launcher.setAttribute('aria-expanded', String(open));
    host.dataset.open = String(open);
    if (open) {
      const input = shadow.getElementById('composer-input');
      if (input) input.focus();
    }
  };
  launcher.addEventListener('click', () => setOpen(panel.hidden));
  close.addEventListener('click', () => setOpen(false));

  const ready = (async () => {
    const response = await fetch(`${base}/`, { headers: { Accept: 'text/html' } });
    if (!response.ok) throw new Error(`rein: the chat page answered ${response.status}`);
    const page = new DOMParser().parseFromString(await response.text(), 'text/html');
    for (const node of page.body.childNodes) panel.append(document.importNode(node, true));
    // The page's own paths name the chat server, not the host page.
    for (const el of panel.querySelectorAll('[src^="/"]')) el.src = base + el.getAttribute('src');
    const topbar = panel.querySelector('.topbar-actions');
    if (topbar) topbar.append(close);
    const app = await import(`${base}/assets/app.js?embed`);
    const chat = app.mount({ root: shadow, base, token, flags: host, embedded: true });
    launcher.hidden = false;
    return chat;
  })();
  ready.catch((error) => console.error(error));

  const rein = (window.rein = window.rein || {});
  rein.ready = ready;
  rein.registerTool = (spec, run) => ready.then((chat) => chat.registerTool(spec, run));
  rein.setViewContext = (context) => ready.then((chat) => chat.setViewContext(context));
  rein.open = () => setOpen(true);
  rein.close = () => setOpen(false);

  const attach = () => document.body.append(host);
  if (document.body) attach();
  else document.addEventListener('DOMContentLoaded', attach);
})();
