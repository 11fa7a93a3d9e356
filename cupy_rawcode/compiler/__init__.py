"""Stage 5, the compiler: takes a keyed request that missed the store and gives NVRTC's code
(nvrtc.py, with strip.py and devrt.py); the orchestrator (orchestrator/) runs request -> key ->
store -> NVRTC, and hints.py turns NVRTC's errors into advice."""
