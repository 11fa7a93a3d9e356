"""Many compiles at once: takes kernels (warmup(), precompile.py) or a manifest of jobs
(prebuild.py) and gives a warm cache, compiled in worker processes (pool.py)."""
