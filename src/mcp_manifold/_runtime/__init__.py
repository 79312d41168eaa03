"""The runtime: the gateway's lifecycle, its backends and the one call path into them, with the stores.

Everything that starts processes, opens connections or touches files lives here (or in `front/` for
the client side). Kept free of heavy imports: `result_files.grep_worker` runs in a fresh interpreter.
"""
