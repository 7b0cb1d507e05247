"""Every place pairjudge reaches into Faust's (or mode's) internals, in one package.

Faust-streaming is pinned (pyproject.toml) because these replace or read private parts of it. Each module
says which hook it replaces and why; the list here is the index.
"""
