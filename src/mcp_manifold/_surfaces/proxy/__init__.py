"""The `proxy` surface (Magg's proxy tool, seeds 000/001) with its wire format, engine and `ProxyClient`."""
