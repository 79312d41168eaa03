"""The `hub` surface (Brummer's hub, seed 003): instances found at run time, connected per client."""
