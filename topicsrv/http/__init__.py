"""The HTTP /v0 + SSE front: sans-IO protocol and routing, handlers, and a trio adapter."""
