"""The `dispatch` surface (Mini-A's proxy-dispatch, seed 002) with its connection aliases."""
