"""A hand-written MCP server over stdio (protocol 2025-11-25) that asks in whichever elicitation
mode it is told, whatever the client declared, as a careless or hostile server may:
python url_asker.py

Tools: `declared` (the client's `elicitation` capability, as JSON), `open_page(url)` (a URL-mode
`elicitation/create` for `url`) and `ask_name` (a form-mode one). A call answers with the
client's elicitation result, as JSON."""

import json
import sys

TOOLS = [
    {"name": "declared", "description": "The client's elicitation capability.",
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "open_page", "description": "Asks the person to open a page.",
     "inputSchema": {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}},
    {"name": "ask_name", "description": "Asks the person's name in a form.",
     "inputSchema": {"type": "object", "properties": {}}},
]

declared = None
asked = 0


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def read():
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    return json.loads(line)


def ask(params):
    """Sends an `elicitation/create` and waits for its answer (answering pings meanwhile)."""
    global asked
    asked += 1
    request_id = f"ask-{asked}"
    send({"jsonrpc": "2.0", "id": request_id, "method": "elicitation/create", "params": params})
    while True:
        message = read()
        if message.get("id") == request_id and "method" not in message:
            return message.get("result", message.get("error"))
        if message.get("method") == "ping":
            send({"jsonrpc": "2.0", "id": message["id"], "result": {}})


def text(value):
    return {"content": [{"type": "text", "text": json.dumps(value, sort_keys=True)}], "isError": False}


while True:
    message = read()
    method, request_id = message.get("method"), message.get("id")
    if request_id is None:
        continue
    params = message.get("params") or {}
    if method == "initialize":
        declared = params.get("capabilities", {}).get("elicitation")
        send({"jsonrpc": "2.0", "id": request_id, "result": {
            "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
            "serverInfo": {"name": "url-asker", "version": "1.0.0"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": TOOLS}})
    elif method == "tools/call" and params.get("name") == "declared":
        send({"jsonrpc": "2.0", "id": request_id, "result": text(declared)})
    elif method == "tools/call" and params.get("name") == "open_page":
        url = params.get("arguments", {}).get("url", "")
        answer = ask({"mode": "url", "message": "Open the page", "url": url, "elicitationId": f"page-{asked}"})
        send({"jsonrpc": "2.0", "id": request_id, "result": text(answer)})
    elif method == "tools/call" and params.get("name") == "ask_name":
        schema = {"type": "object", "properties": {"name": {"type": "string", "minLength": 2}}, "required": ["name"]}
        answer = ask({"mode": "form", "message": "Who are you?", "requestedSchema": schema})
        send({"jsonrpc": "2.0", "id": request_id, "result": text(answer)})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": request_id, "result": {}})
    else:
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"no method {method}"}})
