"""The `code` surface: programs in an embedded JavaScript engine, with the caller's tools as functions."""
