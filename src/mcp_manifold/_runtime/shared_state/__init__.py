"""State that several replicas of one gateway share through Redis (`state_url`), one module per kind.

Nothing here is imported, nor redis-py loaded, unless `state_url` is set: a single gateway process keeps
its state itself, as it always did. `store.py` owns the connection; each other module keeps one kind of
state in it and says what happens to that kind while the store cannot be reached (docs/scale-out.md).
"""
