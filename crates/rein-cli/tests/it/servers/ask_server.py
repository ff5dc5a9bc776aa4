"""A stdio MCP server on the Python SDK (`mcp` 2.3.0) whose tools ask the person a question
(elicitation) before they answer: python ask_server.py

The questions are resolvers (`Resolve(fn)` returning `Elicit`), which the SDK sends the way the
negotiated protocol wants: an "input required" result for 2026-07-28, an `elicitation/create`
request for older clients."""

from typing import Annotated

from pydantic import BaseModel, Field

from mcp.server.mcpserver import (
    AcceptedElicitation,
    Elicit,
    ElicitationResult,
    MCPServer,
    Resolve,
)

mcp = MCPServer("rein-test-asker")


class Who(BaseModel):
    name: str = Field(description="Your name")
    color: str = Field(default="blue", description="Your favourite colour")


class Colour(BaseModel):
    color: str = Field(default="green", description="Your favourite colour")


def ask_who() -> Elicit[Who]:
    return Elicit("Who are you?", Who)


def ask_colour() -> Elicit[Colour]:
    return Elicit("Your favourite colour?", Colour)


@mcp.tool()
async def greet(who: Annotated[ElicitationResult[Who], Resolve(ask_who)]) -> str:
    """Greets the person, asking their name first."""
    if isinstance(who, AcceptedElicitation):
        return f"Hello, {who.data.name} ({who.data.color})!"
    return f"No greeting: {who.action}."


@mcp.tool()
async def favourite(colour: Annotated[ElicitationResult[Colour], Resolve(ask_colour)]) -> str:
    """Asks the person's favourite colour (the form has a default for every field)."""
    if isinstance(colour, AcceptedElicitation):
        return f"Favourite: {colour.data.color}."
    return f"No colour: {colour.action}."


if __name__ == "__main__":
    mcp.run("stdio")
