"""The front: how clients reach the gateway (stdio, streamable HTTP), the MCP server and the fast lane."""
