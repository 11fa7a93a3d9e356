"""Stage 2, the headers: takes a source and its options and gives its closure, every header an
NVRTC compile reads and where it was found (options, scan, search, then fast or exact mode
through resolver.py), remembered per source by manifest.py."""
