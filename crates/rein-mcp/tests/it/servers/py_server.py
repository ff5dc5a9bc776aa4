"""A test MCP server on the Python SDK (`mcp` 2.3.0): python py_server.py stdio | stateful PORT | stateless PORT."""

import os
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

mcp = MCPServer("rein-test-python")


@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@mcp.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@mcp.tool()
def big(size: int) -> str:
    """Return `size` characters of text."""
    return "x" * size


@mcp.tool()
async def hang(seconds: float = 3600.0) -> str:
    """Sleep for a long time."""
    await anyio.sleep(seconds)
    return "woke up"


@mcp.tool()
def fail(message: str) -> str:
    """Always fails with the message."""
    raise ValueError(message)


@mcp.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@mcp.tool()
def env(name: str) -> str:
    """An environment variable of the server, or `<unset>`."""
    return os.environ.get(name, "<unset>")


@mcp.tool()
def cwd() -> str:
    """The server's working directory."""
    return os.getcwd()


@mcp.tool()
def client_name(ctx: Context) -> str:
    """The client's name from the handshake."""
    params = ctx.session.client_params
    return params.client_info.name if params is not None else "<none>"


@mcp.tool()
def maybe(count: int | None = None, label: str = "n") -> str:
    """An optional argument (an anyOf schema)."""
    return f"{label}={count}"


@mcp.tool()
def record_then_exit(path: str) -> str:
    """A side effect (a line appended to `path`), then the process dies before it answers."""
    with open(path, "a") as f:
        f.write("ran\n")
    os._exit(1)


@mcp.tool(annotations=ToolAnnotations(readOnlyHint=True))
def read_once_then_exit(path: str) -> str:
    """Read-only: the first call (no file at `path` yet) makes it and dies; later calls answer."""
    if os.path.exists(path):
        return "answered on the second try"
    open(path, "w").close()
    os._exit(1)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "stdio":
        mcp.run("stdio")
    else:
        mcp.run(
            "streamable-http",
            host="127.0.0.1",
            port=int(sys.argv[2]),
            streamable_http_path="/mcp",
            stateless_http=(mode == "stateless"),
            json_response=(len(sys.argv) > 3 and sys.argv[3] == "json"),
        )
