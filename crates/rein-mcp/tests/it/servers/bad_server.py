"""Broken MCP servers for fault tests: python bad_server.py exit | garbage | wrong | http-garbage PORT."""

import http.server
import json
import sys

mode = sys.argv[1]

if mode == "exit":
    print("bad_server: refusing to start (missing API key)", file=sys.stderr, flush=True)
    sys.exit(3)

if mode in ("garbage", "wrong"):
    line = sys.stdin.readline()
    request = json.loads(line)
    print("bad_server: got " + request.get("method", "?"), file=sys.stderr, flush=True)
    if mode == "garbage":
        sys.stdout.write("this is not JSON-RPC {{{\n")
    else:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {"nonsense": True}}) + "\n")
    sys.stdout.flush()
    sys.stdin.read()
    sys.exit(0)

if mode == "http-garbage":

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("content-length", "0")))
            body = b"{ definitely not json"
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    http.server.HTTPServer(("127.0.0.1", int(sys.argv[2])), Handler).serve_forever()
