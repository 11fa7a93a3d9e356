"""The orchestrator: takes a request from a face (the classes, install(), compile(), the worker
pool) and runs it through the stages: key -> store -> compile -> retry -> warm index -> record
(flow.py), one compile through the cache (compiling.py), Jitify's leniency (jitify.py) and
CuPy's own payloads (payloads.py)."""
